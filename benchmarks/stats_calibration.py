"""Calibration of the report's statistics by simulation at the record level (benchmarks/stats_calibration.py).

Simulates many runs of G tasks x n control/treatment pairs and reports, with Monte Carlo standard
errors, the coverage of every interval and the rejection rate of every test the report uses, then the
sequential stopping rule against the fixed design. Prints Markdown.

    python benchmarks/stats_calibration.py [--reps 3000] [--tasks-sim 20000] [--quick]

Data-generating model (per cell):
  * none:   every task has the same pass rates (control mu, treatment mu + delta); the two trials of
            a pair are independent.
  * strong: task pass rates spread widely, Beta with mean mu (resp. mu + delta) and a + b = 3
            (at mu = 0.5 that is Beta(1.5, 1.5): sd 0.25); treatment takes the same quantile as control
            (a task hard for one arm is hard for the other; delta = 0 is "no effect on any task");
            the two trials of a pair are correlated (Gaussian copula, rho = 0.5).
  * noisy:  as strong, but the treatment quantile is only 0.8-correlated with the control one, so
            task effects scatter around delta (delta = 0 is "no effect on average", not on every task).
  The estimand of pooled intervals is the population difference delta (tasks are a sample of
  tasks); per-task intervals target the task's own rates. A second, independent run (same tasks,
  treatment rates, no pairing) feeds the unpaired comparisons (Newcombe, CMH). Agent times: log
  time = pair effect + noise, treatment shifted by -delta (delta read as a log speed-up).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy
from scipy.special import betaincinv, betaln, ndtr
from scipy.stats import beta as beta_dist
from scipy.stats import binom, chi2, multivariate_normal, norm
from scipy.stats import t as student_t

from pytest_webbench.stats import (  # noqa: E402
    cmh_test,
    holm,
    mcnemar_exact,
    clopper_pearson,
    mcnemar_power,
    mde_task_mean,
    newcombe_difference,
    task_mean_interval,
    task_mean_rate,
    wilson,
)
from pytest_webbench.stats.sequential import SequentialRule  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stats_conditions  # noqa: E402


def clustered_paired_difference(differences_by_task, confidence=0.95):
    """The pooled interval the report used before (CR1 sandwich, t with tasks - 1 df), kept here only
    to measure it beside its replacement: it collapsed to zero width when every pair agreed."""
    from types import SimpleNamespace

    groups = [g for g in differences_by_task if len(g)]
    n, clusters = sum(len(g) for g in groups), len(groups)
    if clusters < 2:
        return None
    mean = sum(sum(g) for g in groups) / n
    variance = clusters / (clusters - 1) * sum(sum(d - mean for d in g) ** 2 for g in groups) / n**2
    half = float(student_t.ppf(0.5 + confidence / 2, clusters - 1)) * math.sqrt(variance)
    return SimpleNamespace(estimate=mean, se=math.sqrt(variance), low=mean - half, high=mean + half)


ALPHA = 0.05
Z = float(norm.ppf(0.975))
KAPPA, TASK_RHO, PAIR_RHO = 3.0, 0.8, 0.5


def header() -> None:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = float("nan")
    print(f"# Statistics calibration\n\n{datetime.datetime.now().isoformat(timespec='seconds')} - "
          f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM - Python {platform.python_version()}, "
          f"numpy {np.__version__}, scipy {scipy.__version__}\n")


def se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / n)


# -- data ---------------------------------------------------------------------------------------------

def task_rates(rng, reps, tasks, mu, delta, setting):
    if setting == "none":
        return np.full((reps, tasks), mu), np.full((reps, tasks), mu + delta)
    z1 = rng.standard_normal((reps, tasks))
    z2 = z1 if setting == "strong" else TASK_RHO * z1 + math.sqrt(1 - TASK_RHO**2) * rng.standard_normal((reps, tasks))
    pc = betaincinv(mu * KAPPA, (1 - mu) * KAPPA, ndtr(z1))
    pt = betaincinv((mu + delta) * KAPPA, (1 - mu - delta) * KAPPA, ndtr(z2))
    return pc, pt


def paired_outcomes(rng, pc, pt, n, rho):
    z1 = rng.standard_normal(pc.shape + (n,))
    z2 = rho * z1 + math.sqrt(1 - rho * rho) * rng.standard_normal(pc.shape + (n,))
    return z1 < norm.ppf(pc)[..., None], z2 < norm.ppf(pt)[..., None]


# -- vectorised versions of the library functions (spot-checked against them) -------------------------

def wilson_v(x, n, z=Z):
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def newcombe_v(xa, na, xb, nb):
    """Interval for rate_a - rate_b (stats.newcombe_difference)."""
    la, ua = wilson_v(xa, na)
    lb, ub = wilson_v(xb, nb)
    pa, pb = xa / na, xb / nb
    d = pa - pb
    return d - np.sqrt((pa - la) ** 2 + (ub - pb) ** 2), d + np.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)


def clopper_pearson_v(x, n):
    """stats.clopper_pearson over arrays."""
    lo = np.where(x > 0, beta_dist.ppf(0.025, np.maximum(x, 1e-9), n - x + 1), 0.0)
    hi = np.where(x < n, beta_dist.ppf(0.975, x + 1, np.maximum(n - x, 1e-9)), 1.0)
    return lo, hi


def task_mean_v(values, floors, lowest):
    """stats.task_mean_interval / task_mean_rate over reps: values (reps, G) the tasks' means, floors
    (reps, G) their within-task variance bounds."""
    k = values.shape[1]
    est = values.mean(1)
    between = values.var(1, ddof=1) / k
    floor = floors.sum(1) / k**2
    se = np.sqrt(np.maximum(between, floor))
    crit = float(student_t.ppf(0.975, k - 1))
    return est, np.maximum(lowest, est - crit * se), np.minimum(1.0, est + crit * se), np.abs(est) / se > crit, se


def newcombe_paired_v(e, f, g, h):
    """Newcombe's (1998) method 10 for a paired difference, e = both, f = treatment only, g = control
    only, h = neither: the per-task paired interval a report could print, measured for comparison."""
    n = e + f + g + h
    p1, p2 = (e + f) / n, (e + g) / n
    l1, u1 = wilson_v(e + f, n)
    l2, u2 = wilson_v(e + g, n)
    num = e * h - f * g
    num = np.where(num > 0, np.maximum(num - n / 2, 0.0), num)
    den = (e + f) * (g + h) * (e + g) * (f + h)
    phi = np.where(den > 0, num / np.sqrt(np.maximum(den, 1)), 0.0)
    th = p1 - p2
    lo = th - np.sqrt(np.maximum((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0))
    hi = th + np.sqrt(np.maximum((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0))
    return np.maximum(lo, -1), np.minimum(hi, 1)


def tango_z_v(b, c, n, d):
    a_ = 2 * n
    b_ = -c - b + (2 * n - c + b) * d
    c_ = -b * d * (1 - d)
    q = (np.sqrt(np.maximum(b_ * b_ - 4 * a_ * c_, 0)) - b_) / (2 * a_)
    var = n * (2 * q + d * (1 - d))
    num = c - b - n * d
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(var > 0, num / np.sqrt(np.maximum(var, 1e-300)), np.where(num == 0, 0.0, np.sign(num) * np.inf))


def tango_v(b, c, n, crit, iterations=50):
    est = (c - b) / n
    out = []
    for edge in (-1.0, 1.0):
        inside, outside = est.copy(), np.full_like(est, edge)
        at_edge = np.abs(tango_z_v(b, c, n, np.full_like(est, edge))) <= crit
        for _ in range(iterations):
            mid = 0.5 * (inside + outside)
            ok = np.abs(tango_z_v(b, c, n, mid)) <= crit
            inside, outside = np.where(ok, mid, inside), np.where(ok, outside, mid)
        out.append(np.where(at_edge, edge, 0.5 * (inside + outside)))
    return out[0], out[1]


def pooled_v(bg, cg, n):
    """The pair-weighted pooled interval the report used before (Tango's score interval widened by the
    design effect, t with tasks - 1 df), measured beside its replacement: bg, cg (reps, G)
    control-only / treatment-only counts, n pairs per task."""
    reps, tasks = bg.shape
    total = tasks * n
    b, c = bg.sum(1).astype(float), cg.sum(1).astype(float)
    est = (c - b) / total
    indep = (b + c - (c - b) ** 2 / total) / total**2
    clus = tasks / (tasks - 1) * (((cg - bg) - n * est[:, None]) ** 2).sum(1) / total**2
    with np.errstate(divide="ignore", invalid="ignore"):
        deff = np.where(indep > 0, np.maximum(1.0, clus / np.where(indep > 0, indep, 1)), 1.0)
    crit = float(student_t.ppf(0.975, tasks - 1))
    lo, hi = tango_v(b / deff, c / deff, total / deff, crit)
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.where(b + c > 0, np.abs(c - b) / np.sqrt(deff * np.maximum(b + c, 1)), 0.0)
    return est, lo, hi, stat > crit, deff


def cr1_v(bg, cg, n):
    reps, tasks = bg.shape
    total = tasks * n
    s = cg - bg
    est = s.sum(1) / total
    var = tasks / (tasks - 1) * ((s - n * est[:, None]) ** 2).sum(1) / total**2
    half = float(student_t.ppf(0.975, tasks - 1)) * np.sqrt(var)
    return est - half, est + half


def exact_two_sided(k, m):
    """Exact binomial(1/2) two-sided p (McNemar / sign test); 1 where m == 0."""
    m = np.asarray(m)
    k = np.minimum(k, m - k)
    return np.where(m > 0, np.minimum(1.0, 2 * binom.cdf(k, np.maximum(m, 1), 0.5)), 1.0)


def cmh_v(a, c, n):
    """CMH (continuity-corrected) and Sato MH risk difference over reps: a = passes of run B,
    c = passes of run A, both (reps, G) out of n per task."""
    n1 = n2 = float(n)
    total = n1 + n2
    m1 = a + c
    m2 = total - m1
    dev = (a - n1 * m1 / total).sum(1)
    var = (n1 * n2 * m1 * m2 / (total * total * (total - 1))).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.where(var > 0, np.maximum(np.abs(dev) - 0.5, 0) ** 2 / np.where(var > 0, var, 1), 0.0)
    p = np.where(var > 0, chi2.sf(stat, 1), 1.0)
    w = (n1 * n2 / total) * a.shape[1]
    rd = ((a * n2 - c * n1) / total).sum(1) / w
    sp = ((n1 * n1 * c - n2 * n2 * a + n1 * n2 * (n2 - n1) / 2) / total**2).sum(1)
    sq = ((a * (n2 - c) + c * (n1 - a)) / (2 * total)).sum(1)
    rse = np.sqrt(np.maximum(rd * sp + sq, 0)) / w
    # Sato's variance 0 (every trial passed, or every one failed): Newcombe's interval on the pooled rows
    tasks = a.shape[1]
    n_lo, n_hi = newcombe_v(a.sum(1), n * tasks, c.sum(1), n * tasks)
    flat = rd * sp + sq <= 0
    return p, np.where(flat, n_lo, np.maximum(-1, rd - Z * rse)), np.where(flat, n_hi, np.minimum(1, rd + Z * rse))


# -- part 1: the grid ------------------------------------------------------------------------------------

CELLS_MU_DELTA = [(0.5, 0.0), (0.5, 0.1), (0.5, 0.2), (0.5, 0.3), (0.85, 0.0), (0.85, 0.1), (0.15, 0.05), (0.15, 0.15)]


def spot_check(bg, cg, both, neither, xa, xb, n, lo, hi, h_lo, h_hi):
    """The vectorised formulas above agree with the library functions on the first reps."""
    for r in range(min(3, bg.shape[0])):
        groups = [[-1] * int(b) + [1] * int(c) + [0] * (n - int(b) - int(c)) for b, c in zip(bg[r], cg[r])]
        ref = task_mean_interval(groups)
        assert abs(ref.low - lo[r]) < 1e-9 and abs(ref.high - hi[r]) < 1e-9, (ref, lo[r], hi[r])
        head = task_mean_rate([(int(x), n) for x in xa[r]])
        assert abs(head.low - h_lo[r]) < 1e-9 and abs(head.high - h_hi[r]) < 1e-9, (head, h_lo[r], h_hi[r])
        cp = clopper_pearson(int(xa[r, 0]), n)
        cl, ch = clopper_pearson_v(xa[r, 0], n)
        assert abs(cp.low - cl) < 1e-9 and abs(cp.high - ch) < 1e-9
        old = clustered_paired_difference(groups)
        l_old, h_old = cr1_v(bg[r:r + 1], cg[r:r + 1], n)
        assert abs(old.low - l_old[0]) < 1e-9 and abs(old.high - h_old[0]) < 1e-9
        w = wilson(int(xa[r, 0]), n)
        wl, wh = wilson_v(xa[r, 0], n)
        assert abs(w.low - wl) < 1e-9 and abs(w.high - wh) < 1e-9
        nd = newcombe_difference(int(xb[r, 0]), n, int(xa[r, 0]), n)
        nl, nh = newcombe_v(xb[r, 0], n, xa[r, 0], n)
        assert abs(nd.low - nl) < 1e-9 and abs(nd.high - nh) < 1e-9
        cm = cmh_test([[[int(x), n - int(x)], [int(y), n - int(y)]] for x, y in zip(xb[r], xa[r])])
        p_v, rl, rh = cmh_v(xb[r:r + 1].astype(float), xa[r:r + 1].astype(float), n)
        assert abs(cm.p_value - p_v[0]) < 1e-9 and abs(cm.risk_difference_low - rl[0]) < 1e-9
        mc = [mcnemar_exact(int(b), int(c)) for b, c in zip(bg[r], cg[r])]
        pv = exact_two_sided(cg[r], bg[r] + cg[r])
        assert all(m is None or abs(m - q) < 1e-9 for m, q in zip(mc, pv))
        adj = holm([m for m in mc])
        tested = [p for p in mc if p is not None]
        any_holm = any(a is not None and a <= ALPHA for a in adj)
        assert any_holm == (bool(tested) and min(tested) <= ALPHA / len(tested))


def run_grid(reps: int, rng) -> list[dict]:
    rows = []
    for setting in ("none", "strong", "noisy"):
        for tasks in (5, 9, 20):
            for n in (3, 5, 10):
                for mu, delta in CELLS_MU_DELTA:
                    pc, pt = task_rates(rng, reps, tasks, mu, delta, setting)
                    ctrl, treat = paired_outcomes(rng, pc, pt, n, 0.0 if setting == "none" else PAIR_RHO)
                    bg = (ctrl & ~treat).sum(2)
                    cg = (treat & ~ctrl).sum(2)
                    both = (ctrl & treat).sum(2)
                    neither = n - bg - cg - both
                    xa, xt = ctrl.sum(2), treat.sum(2)
                    xb = (rng.random(pt.shape + (n,)) < pt[..., None]).sum(2)  # an independent second run
                    # speed among pairs where both passed
                    noise = 0.3 * rng.standard_normal(ctrl.shape + (2,))
                    faster = ((noise[..., 1] - delta < noise[..., 0]) & ctrl & treat).sum(2)
                    slower = both - faster
                    _, tw_lo, tw_hi, tw_reject, _ = pooled_v(bg, cg, n)
                    _, lo, hi, pooled_reject, _ = task_mean_v((cg - bg) / n, (bg + cg + 1) / (n + 2) / n, -1.0)
                    cr_lo, cr_hi = cr1_v(bg, cg, n)
                    w_lo_c, w_hi_c = wilson_v(xa, n)
                    w_lo_t, w_hi_t = wilson_v(xt, n)
                    cp_lo_c, cp_hi_c = clopper_pearson_v(xa, n)
                    cp_lo_t, cp_hi_t = clopper_pearson_v(xt, n)
                    # the headline: one arm's mean rate over the run's tasks (task_mean_rate), against the mean
                    # pass rate of these tasks; the pooled-trials Wilson interval it replaced beside it
                    smooth = (xa + 1) / (n + 2)
                    _, h_lo, h_hi, _, _ = task_mean_v(xa / n, smooth * (1 - smooth) / n, 0.0)
                    hw_lo, hw_hi = wilson_v(xa.sum(1), tasks * n)
                    spot_check(bg, cg, both, neither, xa, xb, n, lo, hi, h_lo, h_hi)
                    nc_lo, nc_hi = newcombe_v(xb, n, xa, n)
                    np_lo, np_hi = newcombe_paired_v(both, cg, bg, neither)
                    hl_lo, hl_hi = newcombe_v(xb.sum(1), tasks * n, xa.sum(1), tasks * n)
                    cmh_p, rd_lo, rd_hi = cmh_v(xb.astype(float), xa.astype(float), n)
                    p_task = exact_two_sided(cg, bg + cg)
                    tested = (bg + cg) > 0
                    m_tested = tested.sum(1)
                    min_p = np.where(tested, p_task, 2.0).min(1)
                    holm_any = (m_tested > 0) & (min_p <= ALPHA / np.maximum(m_tested, 1))
                    p_pooled_mcn = exact_two_sided(cg.sum(1), (bg + cg).sum(1))
                    p_sign = exact_two_sided(faster, both)
                    task_delta = pt - pc
                    cond_delta = task_delta.mean(1)
                    units = reps * tasks
                    row = dict(setting=setting, tasks=tasks, n=n, mu=mu, delta=delta, reps=reps, units=units,
                               cov_cp=float((((cp_lo_c <= pc) & (pc <= cp_hi_c)).mean() + ((cp_lo_t <= pt) & (pt <= cp_hi_t)).mean()) / 2),
                               cov_wilson=float((((w_lo_c <= pc) & (pc <= w_hi_c)).mean() + ((w_lo_t <= pt) & (pt <= w_hi_t)).mean()) / 2),
                               cov_headline=float(((h_lo <= pc.mean(1) + 1e-12) & (pc.mean(1) - 1e-12 <= h_hi)).mean()),
                               cov_headline_wilson=float(((hw_lo <= pc.mean(1) + 1e-12) & (pc.mean(1) - 1e-12 <= hw_hi)).mean()),
                               cov_pooled=float(((lo <= delta + 1e-12) & (delta - 1e-12 <= hi)).mean()),
                               cov_tango=float(((tw_lo <= delta + 1e-12) & (delta - 1e-12 <= tw_hi)).mean()),
                               width_pooled=float((hi - lo).mean()),
                               cov_cr1=float(((cr_lo <= delta + 1e-12) & (delta - 1e-12 <= cr_hi)).mean()),
                               zero_cr1=float((cr_hi - cr_lo < 1e-12).mean()),
                               width_cr1=float((cr_hi - cr_lo).mean()),
                               cov_newc_task=float(((nc_lo <= task_delta + 1e-12) & (task_delta - 1e-12 <= nc_hi)).mean()),
                               cov_newc_pooled=float(((hl_lo <= delta + 1e-12) & (delta - 1e-12 <= hl_hi)).mean()),
                               cov_newc_paired=float(((np_lo <= task_delta + 1e-12) & (task_delta - 1e-12 <= np_hi)).mean()),
                               cov_mh_rd=float(((rd_lo <= cond_delta + 1e-12) & (cond_delta - 1e-12 <= rd_hi)).mean()),
                               rej_mcnemar_task=float((p_task <= ALPHA).mean()),
                               rej_holm=float(holm_any.mean()),
                               rej_sign=float((p_sign <= ALPHA).mean()),
                               rej_pooled_mcnemar=float((p_pooled_mcn <= ALPHA).mean()),
                               rej_pooled=float(pooled_reject.mean()),
                               rej_tango=float(tw_reject.mean()),
                               rej_cr1=float(((cr_lo > 0) | (cr_hi < 0)).mean()),
                               rej_cmh=float((cmh_p <= ALPHA).mean()))
                    rows.append(row)
    return rows


COVERAGE = [("cov_cp", "Clopper-Pearson arm-task", "units2"), ("cov_wilson", "Wilson arm-task (replaced)", "units2"),
            ("cov_headline", "headline (t over tasks)", "reps"), ("cov_headline_wilson", "Wilson headline (replaced)", "reps"),
            ("cov_pooled", "pooled task mean", "reps"), ("cov_tango", "Tango + design effect (replaced)", "reps"),
            ("cov_cr1", "CR1 t (for comparison)", "reps"), ("cov_newc_task", "Newcombe task", "units"),
            ("cov_newc_pooled", "Newcombe pooled", "reps"), ("cov_newc_paired", "Newcombe paired task", "units"),
            ("cov_mh_rd", "MH RD (Sato)", "reps")]
TESTS = [("rej_mcnemar_task", "McNemar task", "units", "sharp"), ("rej_holm", "Holm FWER", "reps", "sharp"),
         ("rej_sign", "sign (speed)", "units", "speed"), ("rej_pooled_mcnemar", "pooled McNemar", "reps", "sharp"),
         ("rej_pooled", "pooled task mean", "reps", "mean"), ("rej_tango", "Tango + deff (replaced)", "reps", "mean"),
         ("rej_cr1", "CR1 t (for comparison)", "reps", "mean"),
         ("rej_cmh", "CMH", "reps", "sharp")]


def null_holds(row, kind: str) -> bool:
    if row["delta"] != 0:
        return False
    if kind in ("speed", "mean"):
        return True
    return row["setting"] != "noisy"   # "noisy" at delta 0: no effect on average only


def print_grid(rows: list[dict]) -> None:
    reps = rows[0]["reps"]
    print(f"## 1. Intervals and tests over the grid ({reps} simulated runs per cell)\n")
    print(f"Coverage of nominal 95% intervals, percent (MC SE {100 * se(0.95, reps):.2f} points at 95% for the "
          "per-run columns; per-task columns pool tasks x runs). `!` marks coverage below 93.5% (1.5 points under "
          "nominal). Estimands: pooled columns the population difference delta; MH RD the mean over the run's "
          "tasks; per-task columns the task's own rates.\n")
    print("| setting | tasks | pairs | mu | delta | " + " | ".join(c[1] for c in COVERAGE) + " | pooled width | CR1 width (zero-width %) |")
    print("|" + "---|" * (5 + len(COVERAGE) + 2))
    for r in rows:
        cells = []
        for key, _, _ in COVERAGE:
            v = r[key]
            cells.append(f"{100 * v:.1f}{'!' if v < 0.935 else ''}")
        print(f"| {r['setting']} | {r['tasks']} | {r['n']} | {r['mu']:.2f} | {r['delta']:.2f} | " + " | ".join(cells)
              + f" | {r['width_pooled']:.2f} | {r['width_cr1']:.2f} ({100 * r['zero_cr1']:.1f}) |")
    print("\nRejection rates at alpha 0.05 (percent). Under a null the test's null holds in (`sharp`: no effect on "
          "any task; `mean`: no effect on average; speed: no speed-up), the rate is the type-I error, marked `!` "
          "when above 5% + 2 MC SE; otherwise it is power. Per-task tests pool tasks x runs.\n")
    print("| setting | tasks | pairs | mu | delta | " + " | ".join(t[1] for t in TESTS) + " |")
    print("|" + "---|" * (5 + len(TESTS)))
    for r in rows:
        cells = []
        for key, _, unit, kind in TESTS:
            v = r[key]
            n_units = r["units"] if unit == "units" else r["reps"]
            flag = ""
            if null_holds(r, kind):
                flag = "!" if v > ALPHA + 2 * se(ALPHA, n_units) else " (I)"
            cells.append(f"{100 * v:.1f}{flag}")
        print(f"| {r['setting']} | {r['tasks']} | {r['n']} | {r['mu']:.2f} | {r['delta']:.2f} | " + " | ".join(cells) + " |")
    print("\nSummary:\n")
    for key, label, unit in COVERAGE:
        worst = min(rows, key=lambda r: r[key])
        n_units = {"reps": worst["reps"], "units": worst["units"], "units2": 2 * worst["units"]}[unit]
        misses = sum(r[key] < 0.935 for r in rows)
        print(f"- {label}: lowest coverage {100 * worst[key]:.1f}% (MC SE {100 * se(worst[key], n_units):.1f}) at "
              f"{worst['setting']}, {worst['tasks']} tasks x {worst['n']} pairs, mu {worst['mu']}, delta {worst['delta']}; "
              f"cells under 93.5%: {misses} of {len(rows)}")
    for key, label, unit, kind in TESTS:
        nulls = [r for r in rows if null_holds(r, kind)]
        worst = max(nulls, key=lambda r: r[key])
        n_units = worst["units"] if unit == "units" else worst["reps"]
        over = sum(r[key] > ALPHA + 2 * se(ALPHA, r["units"] if unit == "units" else r["reps"]) for r in nulls)
        print(f"- {label}: highest type-I {100 * worst[key]:.2f}% (MC SE {100 * se(worst[key], n_units):.2f}) at "
              f"{worst['setting']}, {worst['tasks']} x {worst['n']}, mu {worst['mu']}; null cells over 5% + 2 SE: {over} of {len(nulls)}")
    print()


# -- part 2: the minimum detectable effect ----------------------------------------------------------------

def run_mde(reps: int, rng) -> None:
    print("## 2. Minimum detectable effect of the pooled test (mde_task_mean) checked by simulation\n")
    print("The report states mde = (t(0.975) + t(0.8)) x the pooled interval's standard error, t with tasks - 1 df. "
          "Here the effect is set where the median stated mde equals it (a fixed point, base rate 0.5), and the "
          "pooled test's power at that effect is simulated. Target 80%; above 80% means the stated mde is "
          "conservative.\n")
    print("| setting | tasks | pairs/task | mde (median stated) | simulated power (MC SE) |")
    print("|---|---|---|---|---|")
    for setting in ("none", "strong"):
        for tasks in (5, 9, 20):
            for n in (3, 5, 10):
                crit = float(student_t.ppf(0.975, tasks - 1) + student_t.ppf(0.8, tasks - 1))
                delta, reject = 0.2, None
                for _ in range(8):
                    pc, pt = task_rates(rng, reps, tasks, 0.5, delta, setting)
                    ctrl, treat = paired_outcomes(rng, pc, pt, n, 0.0 if setting == "none" else PAIR_RHO)
                    bg, cg = (ctrl & ~treat).sum(2), (treat & ~ctrl).sum(2)
                    _, _, _, reject, se_run = task_mean_v((cg - bg) / n, (bg + cg + 1) / (n + 2) / n, -1.0)
                    stated = float(np.median(crit * se_run))
                    if stated > 0.49:
                        delta = None
                        break
                    if abs(stated - delta) < 2e-3:
                        break
                    delta = stated
                if delta is None:
                    print(f"| {setting} | {tasks} | {n} | > 0.49 (not reachable from base 0.5) | |")
                    continue
                # the library's own figure on one simulated run, against the vectorised one
                groups = [[-1] * int(b) + [1] * int(c) + [0] * (n - int(b) - int(c)) for b, c in zip(bg[0], cg[0])]
                assert abs(mde_task_mean(task_mean_interval(groups)) - crit * se_run[0]) < 1e-9 or crit * se_run[0] > 1
                pw = float(reject.mean())
                print(f"| {setting} | {tasks} | {n} | {delta:.3f} | {100 * pw:.1f} ({100 * se(pw, reps):.1f}) |")
    print()


# -- part 3: the sequential rule -----------------------------------------------------------------------------

def pair_cells(pc, pt, rho):
    """(p_both, p_treatment_only, p_control_only) for a Gaussian-copula pair."""
    if rho == 0:
        return pc * pt, pt * (1 - pc), pc * (1 - pt)
    both = float(multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]]).cdf([norm.ppf(pc), norm.ppf(pt)]))
    return both, pt - both, pc - both


def scenario_c(n_fixed: int) -> float | None:
    """Treatment rate (control 0.3, independent trials) that exact McNemar on n_fixed pairs detects with 80% power."""
    def power(pt):
        _, t_only, c_only = pair_cells(0.3, pt, 0.0)
        return mcnemar_power(n_fixed, c_only, t_only)
    if power(0.9999) < 0.8:
        return None
    lo, hi = 0.3, 0.9999
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if power(mid) < 0.8 else (lo, mid)
    return hi


def scenarios(n_fixed: int) -> dict[str, tuple[float, float, float]]:
    out = {"A ceiling 0.97/0.97 rho 0.8": (0.97, 0.97, 0.8), "B 0.3 -> 0.8": (0.3, 0.8, 0.0)}
    c = scenario_c(n_fixed)
    if c is not None:
        out[f"C 0.3 -> {c:.3f} (80% fixed)"] = (0.3, c, 0.0)
    out["D null 0.5/0.5"] = (0.5, 0.5, 0.0)
    return out


def plain_e_table(max_pairs: int) -> np.ndarray:
    """Reject when the Beta(1/2,1/2)-mixture e-value reaches 1/alpha (Ville), no futility."""
    m = np.arange(max_pairs + 1)[:, None]
    s = np.arange(max_pairs + 1)[None, :]
    with np.errstate(invalid="ignore"):
        log_e = m * math.log(2) + betaln(0.5 + s, 0.5 + m - s) - betaln(0.5, 0.5)
    return (s <= m) & (log_e >= math.log(1 / ALPHA) - 1e-12)


def simulate_sequential(rng, rule: SequentialRule, n_fixed, pc, pt, rho, k, round_size, speedup=0.0):
    """Record-level simulation of k tasks. Two stopping policies: 'pass/fail' (the task stops when
    decide() stops it; the speed verdict is read then) and 'joint' (the task runs until decide() and
    decide_speed() have both said stop once; since futility is non-binding and the boundaries hold
    for a look after every pair up to max_pairs, both verdicts are monitored for as long as it runs)."""
    n_max = max(rule.max_pairs, n_fixed)
    ctrl, treat = paired_outcomes(rng, np.full(k, pc), np.full(k, pt), n_max, rho)
    t_only = (treat & ~ctrl).astype(int)
    c_only = (ctrl & ~treat).astype(int)
    both = ctrl & treat
    noise = 0.3 * rng.standard_normal((k, n_max, 2))
    quicker = noise[..., 1] - speedup < noise[..., 0]
    faster = (both & quicker).astype(int)
    slower = (both & ~quicker).astype(int)
    cf, bf = t_only[:, :n_fixed].sum(1), c_only[:, :n_fixed].sum(1)
    fixed_reject = exact_two_sided(cf, bf + cf) <= ALPHA
    fixed_speed = exact_two_sided(faster[:, :n_fixed].sum(1), (faster + slower)[:, :n_fixed].sum(1)) <= ALPHA
    codes = {"continue": 0, "effect": 1, "futility": 2}
    table = np.zeros((rule.max_pairs + 1,) * 3, dtype=np.int8)
    for n in range(rule.max_pairs + 1):
        for m in range(n + 1):
            for s in range(m + 1):
                table[n, m, s] = codes[rule.decide(m - s, s, n)]
    ct, cc, cfast, cslow = (np.cumsum(x, 1) for x in (t_only, c_only, faster, slower))
    plain = plain_e_table(rule.max_pairs)
    out = {}
    # policy 1: pass/fail drives; policy 2: joint
    for policy in ("pass/fail", "joint"):
        running = np.ones(k, bool)
        pf_open = np.ones(k, bool)
        sp_open = np.ones(k, bool)
        used = np.zeros(k, int)
        effect = np.zeros(k, bool)
        speed_effect = np.zeros(k, bool)
        for n in range(1, rule.max_pairs + 1):
            if n % round_size and n != rule.max_pairs:
                continue
            s, m = ct[:, n - 1], ct[:, n - 1] + cc[:, n - 1]
            fs, sl = cfast[:, n - 1], cslow[:, n - 1]
            d = table[n, m, s]
            ds = table[n, fs + sl, fs]
            if policy == "pass/fail":
                stop = running & (d != 0)
                effect |= stop & (d == 1)
                speed_effect |= stop & (ds == 1)
            else:
                effect |= running & (d == 1)
                speed_effect |= running & (ds == 1)
                pf_open &= ~(running & (d != 0))
                sp_open &= ~(running & (ds != 0))
                stop = running & ~pf_open & ~sp_open
            used[stop] = n
            running &= ~stop
        out[policy] = dict(seq=effect.mean(), pairs=used.mean(), over=(used > n_fixed).mean(), seq_speed=speed_effect.mean())
    running = np.ones(k, bool)
    plain_used = np.zeros(k, int)
    plain_effect = np.zeros(k, bool)
    for n in range(1, rule.max_pairs + 1):
        if n % round_size and n != rule.max_pairs:
            continue
        s, m = ct[:, n - 1], ct[:, n - 1] + cc[:, n - 1]
        stop = running & (plain[m, s] | (n == rule.max_pairs))
        plain_effect |= stop & plain[m, s]
        plain_used[stop] = n
        running &= ~stop
    return dict(fixed=fixed_reject.mean(), fixed_speed=fixed_speed.mean(), plain=plain_effect.mean(),
                plain_pairs=plain_used.mean(), **{f"{pol}:{key}": v for pol, r in out.items() for key, v in r.items()})


def run_sequential(k: int, rng) -> None:
    print(f"## 3. Sequential rule vs the fixed design ({k} simulated tasks per scenario and round size)\n")
    print("Fixed design: exact McNemar on n_fixed pairs. Sequential: SequentialRule.for_fixed_design(n_fixed), "
          "decided after every round of 1 or 2 pairs; the task stops when decide() stops it. 'plain e' = "
          "mixture e-value >= 1/alpha, no futility, same cap (reference). Rates in percent, MC SE in brackets; "
          "'exact' = SequentialRule.operating_characteristics (no simulation error). '> n_fixed' = share of tasks "
          "that used more pairs than the fixed design.\n")
    speed_rows = []
    for n_fixed in (5, 10, 20):
        rule = SequentialRule.for_fixed_design(n_fixed)
        print(f"### n_fixed = {n_fixed}\n\n{rule.describe()}\n")
        if scenario_c(n_fixed) is None:
            print(f"With {n_fixed} pairs per task exact McNemar cannot reject at 0.05 at all (smallest two-sided "
                  f"p = {2 * 0.5 ** n_fixed:.4f}): its power is 0 everywhere and scenario C does not exist.\n")
        print("| scenario | round | fixed: effect % | sequential: effect % | exact | plain e: effect % | pairs fixed | "
              "pairs sequential (exact) | saved | > n_fixed | plain e pairs |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        totals = {1: [0.0, 0.0], 2: [0.0, 0.0]}
        for name, (pc, pt, rho) in scenarios(n_fixed).items():
            _, t_only, c_only = pair_cells(pc, pt, rho)
            for rnd in (1, 2):
                r = simulate_sequential(rng, rule, n_fixed, pc, pt, rho, k, rnd)
                oc = rule.operating_characteristics(t_only, c_only, rnd)
                totals[rnd][0] += n_fixed
                totals[rnd][1] += r["pass/fail:pairs"]
                seq = r["pass/fail:seq"]
                print(f"| {name} | {rnd} | {100 * r['fixed']:.2f} ({100 * se(r['fixed'], k):.2f}) | "
                      f"{100 * seq:.2f} ({100 * se(seq, k):.2f}) | {100 * oc['effect']:.2f} | "
                      f"{100 * r['plain']:.2f} | {n_fixed} | {r['pass/fail:pairs']:.2f} ({oc['expected_pairs']:.2f}) | "
                      f"{100 * (1 - r['pass/fail:pairs'] / n_fixed):.0f}% | {100 * r['pass/fail:over']:.1f}% | {r['plain_pairs']:.2f} |")
                if rnd == 1 and n_fixed in (10, 20) and name[0] in "AD":
                    for label, speedup in (("no speed-up", 0.0), ("1.35x speed-up", 0.3)):
                        sr = simulate_sequential(rng, rule, n_fixed, pc, pt, rho, k, 1, speedup)
                        speed_rows.append((n_fixed, name, label, sr))
        for rnd in (1, 2):
            fixed_total, seq_total = totals[rnd]
            print(f"\nMix (equal weights), round {rnd}: {seq_total:.2f} pairs vs {fixed_total:.0f} fixed: "
                  f"{100 * (1 - seq_total / fixed_total):.1f}% fewer trials.")
        print()
    print("### Speed (sign test on pairs where both passed, ties dropped), round size 1\n")
    print("'pass/fail' policy: the task stops when decide() stops it and the speed verdict is read then; 'joint': "
          "the task runs until decide() and decide_speed() have both stopped (both verdicts monitored throughout). "
          "Rates in percent: type-I error without a speed-up, power with one.\n")
    print("| n_fixed | scenario | speed | fixed sign test % | seq, pass/fail policy % | pairs | seq, joint policy % | pairs | pass/fail effect, joint % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n_fixed, name, label, r in speed_rows:
        print(f"| {n_fixed} | {name} | {label} | {100 * r['fixed_speed']:.2f} ({100 * se(r['fixed_speed'], k):.2f}) | "
              f"{100 * r['pass/fail:seq_speed']:.2f} | {r['pass/fail:pairs']:.2f} | "
              f"{100 * r['joint:seq_speed']:.2f} ({100 * se(r['joint:seq_speed'], k):.2f}) | {r['joint:pairs']:.2f} | "
              f"{100 * r['joint:seq']:.2f} |")
    print()
    print("### Where the sequential rule costs more (exact, n_fixed = 10 and 20, round size 1)\n")
    print("Sweep: control rate 0.1-0.9 x effect 0-0.6 x within-pair correlation 0 / 0.5. Listed: the five "
          "settings with the most expected pairs, and every one losing more than 1 point of power.\n")
    print("| n_fixed | control | treatment | rho | fixed power % | sequential power % | sequential pairs |")
    print("|---|---|---|---|---|---|---|")
    for n_fixed in (10, 20):
        rule = SequentialRule.for_fixed_design(n_fixed)
        rows = []
        for rho in (0.0, 0.5):
            for pc in (0.1, 0.3, 0.5, 0.7, 0.9):
                for d in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6):
                    pt = round(pc + d, 4)
                    if pt > 0.99:
                        continue
                    _, t_only, c_only = pair_cells(pc, pt, rho)
                    fixed = mcnemar_power(n_fixed, c_only, t_only)
                    oc = rule.operating_characteristics(t_only, c_only, 1)
                    rows.append((pc, pt, rho, fixed, oc["effect"], oc["expected_pairs"]))
        shown = sorted(rows, key=lambda r: -r[5])[:5] + [r for r in rows if r[3] - r[4] > 0.01 and r not in sorted(rows, key=lambda r: -r[5])[:5]]
        for pc, pt, rho, fixed, power, pairs in shown:
            print(f"| {n_fixed} | {pc} | {pt} | {rho} | {100 * fixed:.1f} | {100 * power:.1f} | {pairs:.2f} |")
        worst = max(rows, key=lambda r: r[3] - r[4])
        print(f"| {n_fixed} | largest power loss: {100 * (worst[3] - worst[4]):.1f} points at control {worst[0]}, "
              f"treatment {worst[1]}, rho {worst[2]} | | | | | |")
    print()


def first_futility_look(caps=(10, 20, 40), looks=(2, 3, 5, 8, 10, 20, 40)) -> None:
    """Whether a later first futility look keeps the saving and gains power (issue 48): the rule
    `--sequential --attempts CAP` runs (planning/stopping.rule_for), its first futility look moved
    from 2 pairs to later ones (CAP: no futility stop at all), each exact. Scenarios: no effect at
    0.5 (type-I error and the saving), a ceiling (0.97 both, rho 0.8), +0.4 from 0.3 (rho 0 and
    0.5) and +0.2 from 0.3; against exact McNemar on CAP fixed pairs at the rule's 0.025."""
    from pytest_webbench.planning.stopping import ALPHA as RUN_ALPHA, ENDPOINTS, rule_for

    cells = {"no effect 0.5": (0.5, 0.5, 0.0), "ceiling 0.97": (0.97, 0.97, 0.8), "+0.4 (0.3 -> 0.7)": (0.3, 0.7, 0.0),
             "+0.4, rho 0.5": (0.3, 0.7, 0.5), "+0.2 (0.3 -> 0.5)": (0.3, 0.5, 0.0)}
    print("## The first futility look (exact)\n")
    print("Each cell: chance of an effect (type-I error where there is none, else power) / expected pairs "
          "per task. The first row of each cap is the rule runs use; the last, no futility stop.\n")
    print("| cap | first look | " + " | ".join(cells) + " |")
    print("|---|---|" + "---|" * len(cells))
    for cap in caps:
        runs = rule_for(cap)
        for first in sorted({look for look in looks if look <= cap} | {runs.min_pairs_for_futility}):
            rule = SequentialRule(alpha=RUN_ALPHA / ENDPOINTS, max_pairs=cap, futility_below=runs.futility_below,
                                  min_pairs_for_futility=first)
            row = []
            for pc, pt, rho in cells.values():
                _, t_only, c_only = pair_cells(pc, pt, rho)
                oc = rule.operating_characteristics(t_only, c_only, 1)
                row.append(f"{100 * oc['effect']:.1f}% / {oc['expected_pairs']:.1f}")
            label = f"{first}" + (" (runs)" if first == runs.min_pairs_for_futility else " (none)" if first == cap else "")
            print(f"| {cap} | {label} | " + " | ".join(row) + " |")
        fixed = []
        for pc, pt, rho in cells.values():
            _, t_only, c_only = pair_cells(pc, pt, rho)
            fixed.append(f"{100 * mcnemar_power(cap, c_only, t_only, alpha=RUN_ALPHA / ENDPOINTS):.1f}% / {cap}")
        print(f"| {cap} | fixed, McNemar | " + " | ".join(fixed) + " |")
    print()


def tune_presets(sizes=(5, 8, 10, 12, 15, 20, 25, 30)) -> None:
    """Re-derive SequentialRule._PRESETS by exact computation: over max_pairs in {1.2, 1.5, 2} x n_fixed
    and futility_below in 0.05..0.3, keep the rules whose power in scenarios B and C is at least the fixed
    design's + 1 point at round sizes 1 and 2; among those saving at least 45% of the pairs over the A-D
    mix at both round sizes (a margin over the 40% target) take the one with the highest mean power in
    B and C; if none saves 45%, the one saving the most."""
    print("## Preset tuning (exact)\n")
    print("| n_fixed | max_pairs | futility_below | saved, round 1 | saved, round 2 | power B / C (round 1) | fixed B / C |")
    print("|---|---|---|---|---|---|---|")
    for n_fixed in sizes:
        cells = {name[0]: pair_cells(*v) for name, v in scenarios(n_fixed).items()}
        fixed = {k: mcnemar_power(n_fixed, c[2], c[1]) for k, c in cells.items()}
        candidates = []
        for factor in (1.2, 1.5, 2.0):
            max_pairs = math.ceil(factor * n_fixed)
            for futility in (0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3):
                rule = SequentialRule(max_pairs=max_pairs, futility_below=futility)
                saved, ok, powers = [], True, {}
                for rnd in (1, 2):
                    ocs = {k: rule.operating_characteristics(c[1], c[2], rnd) for k, c in cells.items()}
                    saved.append(1 - sum(o["expected_pairs"] for o in ocs.values()) / (n_fixed * len(ocs)))
                    ok &= all(ocs[k]["effect"] >= fixed[k] + 0.01 for k in "BC" if k in ocs)
                    if rnd == 1:
                        powers = {k: ocs[k]["effect"] for k in "BC" if k in ocs}
                if ok:
                    candidates.append((max_pairs, futility, saved, powers))
        enough = [c for c in candidates if min(c[2]) >= 0.45]
        if enough:
            best = max(enough, key=lambda c: (sum(c[3].values()) / len(c[3]), min(c[2])))
        else:
            best = max(candidates, key=lambda c: min(c[2]))
        max_pairs, futility, saved, powers = best
        print(f"| {n_fixed} | {max_pairs} | {futility} | {100 * saved[0]:.1f}% | {100 * saved[1]:.1f}% | "
              f"{' / '.join(f'{100 * v:.1f}' for v in powers.values())} | "
              f"{' / '.join(f'{100 * fixed[k]:.1f}' for k in powers)} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=4000, help="simulated runs per grid cell")
    parser.add_argument("--tasks-sim", type=int, default=20000, help="simulated tasks per sequential scenario")
    parser.add_argument("--seed", type=int, default=20240917)
    parser.add_argument("--quick", action="store_true", help="few repetitions, for a smoke test")
    parser.add_argument("--tune", action="store_true", help="only re-derive the SequentialRule presets (exact)")
    parser.add_argument("--futility-look", action="store_true", help="only the first futility look's trade (exact)")
    args = parser.parse_args()
    if args.tune:
        header()
        tune_presets()
        return
    if args.futility_look:
        header()
        first_futility_look()
        return
    if args.quick:
        args.reps, args.tasks_sim = 300, 2000
    rng = np.random.default_rng(args.seed)
    start = time.time()
    header()
    print_grid(run_grid(args.reps, rng))
    run_mde(args.reps, rng)
    run_sequential(args.tasks_sim, rng)
    first_futility_look()
    tune_presets()
    # 4 to 7: the conditions real runs have (unequal counts, sequential stopping, -n 8), the saving under
    # the production policy, Newcombe's exact coverage and errored trials, through the product's own
    # functions (benchmarks/stats_conditions.py)
    stats_conditions.print_conditions(max(200, args.reps // 4), rng)
    stats_conditions.print_saving(max(500, args.tasks_sim // 5), rng)
    stats_conditions.print_newcombe_exact()
    stats_conditions.print_errors(max(200, args.reps // 4), rng)
    print(f"_Total {time.time() - start:.0f} s._")


if __name__ == "__main__":
    main()
