"""The report's statistics under the conditions real runs have: unequal pairs per task, sequential
stopping, and pairs ending out of order under -n. Part of benchmarks/stats_calibration.py (its
sections 4 and 5); runnable alone:

    python benchmarks/stats_conditions.py [--reps 1000] [--tasks-sim 4000] [--only conditions|saving|newcombe|errors]

Every figure calls the product's own functions (stats/, planning/stopping.py) on simulated records,
so what is measured is what a report prints.

Task populations (fixed here before any tuning; a run's tasks are a sample of them):
  null-0.5   every task's two arms pass at the same rate, spread Beta(1.5, 1.5) around 0.5
  null-0.85  the same around 0.85 (near the ceiling)
  shift-0.2  treatment's rate is control's + 0.2 on every task (control Beta around 0.4)
  mixed-0.4  each task's effect is +0.4 or -0.4 at random (mean 0), rates 0.3 and 0.7
Trials of a pair are correlated (Gaussian copula, rho 0.5). Speed: a passing trial takes
60 s x lognormal(0, 0.3) in either arm (no speed-up); a failing treatment ends in 15 s, a failing
control times out at 300 s (so under -n, the pairs that end first are mostly control-favouring).

Conditions:
  equal       K tasks x n pairs each
  unequal     pairs per task [40, 3, 3, 3, 3], and 10 or 20 tasks with 3 to 40 pairs each (log-uniform)
  sequential  every task stopped by `--sequential --attempts 20` (planning/stopping.py's rule on the
              prefix of attempts), pairs ending in order (-n 1)
  -n 8        the same with 8 workers and the durations above: pairs end out of order
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import math
import sys
from pathlib import Path

import numpy as np
from scipy.special import betaincinv, ndtr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_webbench.planning.stopping import decision_on, prefix_pairs, rule_for  # noqa: E402
from pytest_webbench.stats import (  # noqa: E402
    clopper_pearson, cmh_test, fisher_exact_p, holm, mcnemar_exact, newcombe_difference, sign_test, task_mean_difference,
    task_mean_interval, task_mean_rate,
)

ALPHA = 0.05
RHO = 0.5
CAP = 20
POPULATIONS = {"null-0.5": (0.5, 0.0), "null-0.85": (0.85, 0.0), "shift-0.2": (0.4, 0.2), "mixed-0.4": (0.5, None)}


def task_rates(rng, population: str) -> tuple[float, float]:
    mu, delta = POPULATIONS[population]
    if delta is None:  # mixed: +-0.4 around 0.5
        sign = 1 if rng.random() < 0.5 else -1
        return 0.5 - 0.2 * sign, 0.5 + 0.2 * sign
    pc = float(betaincinv(mu * 3, (1 - mu) * 3, rng.random()))
    return pc, min(1.0, pc + delta)


def population_effect(population: str) -> float:
    mu, delta = POPULATIONS[population]
    if delta is None or delta == 0:
        return 0.0
    # E[min(1, pc + delta)] - E[pc], pc ~ Beta(3 mu, 3 (1 - mu)): by quadrature on a fine grid
    u = (np.arange(200000) + 0.5) / 200000
    pc = betaincinv(mu * 3, (1 - mu) * 3, u)
    return float(np.minimum(1.0, pc + delta).mean() - pc.mean())


def _record(passed, seconds: float) -> dict:
    return {"outcome": "passed" if passed else "failed", "timings": {"agent_sec": seconds}}


def pair(rng, pc: float, pt: float) -> tuple[dict, dict, dict]:
    """(control, treatment, playwright) records as the stopping rule and the report read them."""
    z1 = rng.standard_normal()
    z2 = RHO * z1 + math.sqrt(1 - RHO * RHO) * rng.standard_normal()
    c, t, p = ndtr(z1) < pc, ndtr(z2) < pt, rng.random() < pc  # playwright: control's rate, unpaired

    def record(passed: bool, arm: str) -> dict:
        return _record(passed, 60.0 * math.exp(0.3 * rng.standard_normal()) if passed else (15.0 if arm == "treatment" else 300.0))

    return record(c, "control"), record(t, "treatment"), record(p, "playwright")


def run_until_decided(rule, cap: int, workers: int, draw) -> tuple[object, dict[int, tuple]]:
    """One task's pairs on `workers` workers, in attempt order, each pair's trials back to back, until
    planning/stopping.py decides it on the prefix of attempts that have ended (pairs in flight then
    still end and are recorded). `draw()` gives a pair as (control record, treatment record, ...).
    Returns the decision (or None at the cap) and every recorded pair by attempt."""
    ended: dict[int, tuple] = {}
    running: list = []
    next_attempt, decision = 1, None

    def start(at: float) -> None:
        nonlocal next_attempt
        p = draw()
        heapq.heappush(running, (at + p[0]["timings"]["agent_sec"] + p[1]["timings"]["agent_sec"], next_attempt, p))
        next_attempt += 1

    for _ in range(min(workers, cap)):
        start(0.0)
    while running:
        now, attempt, p = heapq.heappop(running)
        ended[attempt] = p
        if decision is None:
            decision = decision_on(rule, "t", prefix_pairs({a: (q[0], q[1]) for a, q in ended.items()}, cap))
            if decision is None and next_attempt <= cap:
                start(now)
    return decision, ended


def run_task(rng, pc: float, pt: float, pairs: int, mode: str) -> list[tuple[dict, dict, dict]]:
    """The pairs a task contributes: all `pairs` of them, or those a sequential run had recorded when
    it decided (the prefix it decided on, and the pairs in flight then)."""
    if mode in ("equal", "unequal"):
        return [pair(rng, pc, pt) for _ in range(pairs)]
    _, ended = run_until_decided(rule_for(CAP), CAP, 1 if mode == "sequential" else 8, lambda: pair(rng, pc, pt))
    return [ended[a] for a in sorted(ended)]  # every recorded pair, as the report reads a run


def pair_counts(mode: str, tasks: int, rng) -> list[int]:
    if mode == "equal":
        return [EQUAL_PAIRS] * tasks
    if tasks == 5:
        return [40, 3, 3, 3, 3]
    return [int(round(math.exp(rng.uniform(math.log(3), math.log(40))))) for _ in range(tasks)]


EQUAL_PAIRS = 5


def simulate(population: str, mode: str, tasks: int, reps: int, rng) -> dict[str, float]:
    target = population_effect(population)
    null = POPULATIONS[population][1] == 0.0
    hits = {k: 0 for k in ("pooled_cover", "pooled_reject", "cp_cover", "cp_units", "headline_cover", "mcnemar",
                           "mcnemar_units", "mcnemar_holm", "sign", "sign_units", "sign_holm", "newcombe_cover",
                           "fisher", "cmh", "mh_cover", "seq_claim", "runs_same", "runs_tools", "runs_pooled")}
    for _ in range(reps):
        rates = [task_rates(rng, population) for _ in range(tasks)]
        counts = pair_counts(mode, tasks, rng) if mode in ("equal", "unequal") else [CAP] * tasks
        runs = [run_task(rng, pc, pt, n, mode) for (pc, pt), n in zip(rates, counts)]
        # a second run of the same tasks, as `python -m pytest_webbench.report A B` compares two: its own
        # counts (fixed counts shuffled between the tasks; a sequential run stops where it stops)
        again = [run_task(rng, pc, pt, n, mode) for (pc, pt), n in zip(rates, rng.permutation(counts))]
        groups, mc_p, sign_p, tables = [], [], [], []
        per_task = []
        for (pc, pt), ps in zip(rates, runs):
            cs = [p[0]["outcome"] == "passed" for p in ps]
            ts = [p[1]["outcome"] == "passed" for p in ps]
            ws = [p[2]["outcome"] == "passed" for p in ps]
            groups.append([int(t) - int(c) for c, t in zip(cs, ts)])
            b, c_ = sum(c and not t for c, t in zip(cs, ts)), sum(t and not c for c, t in zip(cs, ts))
            mc_p.append(mcnemar_exact(b, c_))
            both = [(p[0]["timings"]["agent_sec"], p[1]["timings"]["agent_sec"]) for p, c, t in zip(ps, cs, ts) if c and t]
            sign_p.append(sign_test(sum(tt < cc for cc, tt in both), sum(cc < tt for cc, tt in both)))
            ci = clopper_pearson(sum(cs), len(cs))
            hits["cp_cover"] += ci.low <= pc <= ci.high
            hits["cp_units"] += 1
            per_task.append((sum(cs), len(cs)))
            nd = newcombe_difference(sum(ws), len(ws), sum(cs), len(cs))
            hits["newcombe_cover"] += nd.low <= 0 <= nd.high  # playwright and control share a rate
            hits["fisher"] += fisher_exact_p(sum(ws), len(ws), sum(cs), len(cs)) <= ALPHA
            tables.append([[sum(ws), len(ws) - sum(ws)], [sum(cs), len(cs) - sum(cs)]])
        def passes(ps, arm):
            return sum(p[arm]["outcome"] == "passed" for p in ps), len(ps)

        same = task_mean_difference([(passes(b, 0), passes(a, 0)) for a, b in zip(runs, again)])  # control, twice
        hits["runs_same"] += same.low <= 0 <= same.high
        tools = task_mean_difference([(passes(b, 1), passes(a, 0)) for a, b in zip(runs, again)])  # B's treatment
        hits["runs_tools"] += tools.low <= target <= tools.high
        a_all, b_all = [passes(a, 0) for a in runs], [passes(b, 0) for b in again]
        old = newcombe_difference(sum(x for x, _ in b_all), sum(n for _, n in b_all), sum(x for x, _ in a_all), sum(n for _, n in a_all))
        hits["runs_pooled"] += old.low <= 0 <= old.high  # trials pooled over tasks, as the headline once was
        pooled = task_mean_interval(groups)
        hits["pooled_cover"] += pooled.low <= target <= pooled.high
        hits["pooled_reject"] += pooled.p_value <= ALPHA
        head = task_mean_rate(per_task)  # the headline: the mean of the tasks' rates, as the report gives it
        mean_rate = sum(pc for pc, _ in rates) / tasks
        hits["headline_cover"] += head.low <= mean_rate <= head.high
        for key, ps in (("mcnemar", mc_p), ("sign", sign_p)):
            hits[key] += sum(p is not None and p <= ALPHA for p in ps)
            hits[key + "_units"] += tasks
            hits[key + "_holm"] += any(a is not None and a <= ALPHA for a in holm(ps))
        cmh = cmh_test(tables)
        hits["cmh"] += cmh.p_value <= ALPHA
        hits["mh_cover"] += cmh.risk_difference_low <= 0 <= cmh.risk_difference_high
    out = {"pooled_cover": hits["pooled_cover"] / reps, "pooled_reject": hits["pooled_reject"] / reps,
           "cp_cover": hits["cp_cover"] / hits["cp_units"], "headline_cover": hits["headline_cover"] / reps,
           "mcnemar": hits["mcnemar"] / hits["mcnemar_units"], "mcnemar_holm": hits["mcnemar_holm"] / reps,
           "sign": hits["sign"] / hits["sign_units"], "sign_holm": hits["sign_holm"] / reps,
           "newcombe_cover": hits["newcombe_cover"] / hits["cp_units"], "fisher": hits["fisher"] / hits["cp_units"],
           "cmh": hits["cmh"] / reps, "mh_cover": hits["mh_cover"] / reps, "null": null, "pooled_null": target == 0.0, "reps": reps,
           "runs_same": hits["runs_same"] / reps, "runs_tools": hits["runs_tools"] / reps, "runs_pooled": hits["runs_pooled"] / reps,
           "units": hits["cp_units"]}
    return out


COLUMNS = [("pooled_cover", "pooled interval coverage", "reps", "cover"), ("pooled_reject", "pooled test", "reps", "test"),
           ("cp_cover", "Clopper-Pearson task", "units", "cover"), ("headline_cover", "headline (t over tasks)", "reps", "cover"),
           ("mcnemar", "McNemar task", "units", "test"), ("mcnemar_holm", "McNemar Holm FWER", "reps", "test"),
           ("sign", "sign task", "units", "speed"), ("sign_holm", "sign Holm FWER", "reps", "speed"),
           ("newcombe_cover", "Newcombe task (pw vs c)", "units", "cover"), ("fisher", "Fisher task (pw vs c)", "units", "pw"),
           ("cmh", "CMH (pw vs c)", "reps", "pw"), ("mh_cover", "MH difference (pw vs c)", "reps", "cover"),
           ("runs_same", "two runs, one model: headline B - A", "reps", "cover"),
           ("runs_tools", "two runs, B with tools: headline B - A", "reps", "cover"),
           ("runs_pooled", "two runs, one model: trials pooled (replaced)", "reps", "cover")]


def _se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / n)


def print_conditions(reps: int, rng) -> None:
    print(f"## 4. The report's statistics under equal and unequal counts, sequential stopping and -n 8 ({reps} runs per row)\n")
    print("Coverage (nominal 95%) and rejection rates at alpha 0.05, percent. `!` marks coverage under 93.5% or a "
          "type-I error over 5% + 2 MC SE; `(I)` marks a type-I error within it; other test figures are power. The "
          "playwright arm shares control's rate in every population, so its columns are always coverage or type-I. "
          "Speed has no effect in any population. Sequential rows are conditional on stopping (the intervals are "
          "fixed-sample ones computed on the pairs a stopped run recorded).\n")
    print("| condition | tasks | population | " + " | ".join(c[1] for c in COLUMNS) + " |")
    print("|" + "---|" * (3 + len(COLUMNS)))
    for mode, task_counts in (("equal", (5, 10, 20)), ("unequal", (5, 10, 20)), ("sequential", (5, 10)), ("-n 8", (5, 10))):
        for tasks in task_counts:
            for population in POPULATIONS:
                r = simulate(population, mode, tasks, reps, rng)
                cells = []
                for key, _, unit, kind in COLUMNS:
                    v, n = r[key], r["reps"] if unit == "reps" else r["units"]
                    if kind == "cover":
                        flag = "!" if v < 0.935 else ""
                    elif kind in ("speed", "pw") or (kind == "test" and r["null"]) or (key == "pooled_reject" and r["pooled_null"]):
                        # mixed-0.4: every task has an effect, their mean is 0: the pooled test's column is its type-I error
                        flag = "!" if v > ALPHA + 2 * _se(ALPHA, n) else " (I)"
                    else:
                        flag = ""
                    cells.append(f"{100 * v:.1f}{flag}")
                label = {"equal": f"equal ({EQUAL_PAIRS} pairs)", "unequal": "unequal ([40,3,3,3,3])" if tasks == 5
                         else "unequal (3-40)", "sequential": f"sequential (cap {CAP})", "-n 8": f"-n 8 (cap {CAP})"}[mode]
                print(f"| {label} | {tasks} | {population} | " + " | ".join(cells) + " |")
                sys.stdout.flush()
    print()


# -- sequential decisions and the saving, on a mix written down before any tuning ----------------------------

MIX = {  # name: (control rate, treatment rate, treatment's speed-up as a log ratio)
    "ceiling": (0.95, 0.95, 0.0), "floor": (0.05, 0.05, 0.0), "null": (0.5, 0.5, 0.0), "small": (0.5, 0.65, 0.0),
    "large": (0.3, 0.8, 0.3), "reverse": (0.6, 0.4, 0.0), "faster": (0.8, 0.8, 0.3),
}


def sequential_task(rng, pc, pt, speedup, cap, workers) -> tuple[object, int]:
    def draw() -> tuple[dict, dict]:
        z1 = rng.standard_normal()
        z2 = RHO * z1 + math.sqrt(1 - RHO * RHO) * rng.standard_normal()
        c, t = ndtr(z1) < pc, ndtr(z2) < pt
        base = 60.0 * math.exp(0.3 * rng.standard_normal())
        cs = base * math.exp(0.2 * rng.standard_normal()) if c else 300.0
        ts = base * math.exp(0.2 * rng.standard_normal() - speedup) if t else 15.0
        return _record(c, cs), _record(t, ts)

    decision, ended = run_until_decided(rule_for(cap), cap, workers, draw)
    return decision, len(ended)


def fixed_design(rng, pc, pt, speedup, n) -> tuple[bool, bool]:
    z1 = rng.standard_normal(n)
    z2 = RHO * z1 + math.sqrt(1 - RHO * RHO) * rng.standard_normal(n)
    c, t = ndtr(z1) < pc, ndtr(z2) < pt
    b, c_ = int((c & ~t).sum()), int((t & ~c).sum())
    base = 60.0 * np.exp(0.3 * rng.standard_normal(n))
    cs, ts = base * np.exp(0.2 * rng.standard_normal(n)), base * np.exp(0.2 * rng.standard_normal(n) - speedup)
    both = c & t
    p_pf = mcnemar_exact(b, c_)
    p_sp = sign_test(int((ts < cs)[both].sum()), int((cs < ts)[both].sum()))
    return p_pf is not None and p_pf <= ALPHA, p_sp is not None and p_sp <= ALPHA


def print_saving(tasks_sim: int, rng, workers_list=(1, 8)) -> None:
    print(f"## 5. Sequential runs under the production policy ({tasks_sim} simulated tasks per scenario)\n")
    print("The rule `--sequential --attempts 2 x n_fixed` uses (planning/stopping.py: both endpoints at alpha/2, the "
          "prefix of attempts, a task stopping once both have stopped) at -n 1 and -n 8 with outcome-dependent durations "
          "(pairs used count every pair a run records, those in flight when the task was decided included), "
          "against the fixed design of n_fixed pairs judged by exact McNemar and the sign test, each at 0.05. The mix "
          "was written down before any tuning: " + ", ".join(f"{k} {v[0]}->{v[1]} (speed-up {v[2]})" for k, v in MIX.items())
          + ". Power: the share of tasks where an effect that is there was declared (pass/fail, speed); false: a "
          "claim where there is no effect, on either endpoint.\n")
    print("| -n | n_fixed (cap) | scenario | pairs used (fixed n) | pass/fail effect: fixed / sequential | speed effect: fixed / sequential | any false claim: fixed / sequential |")
    print("|---|---|---|---|---|---|---|")
    for workers, n_fixed in [(w, n) for w in workers_list for n in (10, 20, 30)]:
        cap = 2 * n_fixed
        used_total = 0.0
        for name, (pc, pt, speedup) in MIX.items():
            seq_pf = seq_sp = seq_false = fix_pf = fix_sp = fix_false = used = 0
            for _ in range(tasks_sim):
                decision, pairs = sequential_task(rng, pc, pt, speedup, cap, workers)
                used += pairs
                pf = decision is not None and decision.outcome == "effect"
                sp = decision is not None and decision.speed == "effect"
                seq_pf, seq_sp = seq_pf + pf, seq_sp + sp
                seq_false += (pf and pc == pt) or (sp and speedup == 0)
                f_pf, f_sp = fixed_design(rng, pc, pt, speedup, n_fixed)
                fix_pf, fix_sp = fix_pf + f_pf, fix_sp + f_sp
                fix_false += (f_pf and pc == pt) or (f_sp and speedup == 0)
            used_total += used / tasks_sim
            print(f"| {workers} | {n_fixed} ({cap}) | {name} | {used / tasks_sim:.1f} ({n_fixed}) | {100 * fix_pf / tasks_sim:.1f} / "
                  f"{100 * seq_pf / tasks_sim:.1f} | {100 * fix_sp / tasks_sim:.1f} / {100 * seq_sp / tasks_sim:.1f} | "
                  f"{100 * fix_false / tasks_sim:.1f} / {100 * seq_false / tasks_sim:.1f} |")
            sys.stdout.flush()
        saved = 1 - used_total / (len(MIX) * n_fixed)
        print(f"| {workers} | {n_fixed} ({cap}) | **over the mix** | {used_total / len(MIX):.1f} ({n_fixed}) | | | **{f'{100 * saved:.1f}% fewer' if saved >= 0 else f'{-100 * saved:.1f}% more'} pairs** |")
    print()


# -- Newcombe's interval per task, exactly -------------------------------------------------------------------

def print_newcombe_exact(trials=(3, 5, 10, 20)) -> None:
    """The coverage of the product's Newcombe interval (one task: an arm against control, or one run
    against another) computed exactly, every outcome weighted by its binomial chance, over rates 0.01
    to 0.99 in both arms: its worst case, and its worst with both arms at one rate (the playwright
    arm against control when they do not differ)."""
    from scipy.stats import binom

    grid = np.round(np.arange(1, 100) / 100, 2)
    print("## 6. Newcombe's interval per task: exact coverage (rates 0.01-0.99 in each arm)\n")
    print("| trials per arm | worst coverage | at rates (arm, reference) | worst with one rate in both | at rate |")
    print("|---|---|---|---|---|")
    for n in trials:
        low, high = np.empty((n + 1, n + 1)), np.empty((n + 1, n + 1))
        for x in range(n + 1):
            for y in range(n + 1):
                interval = newcombe_difference(x, n, y, n)
                low[x, y], high[x, y] = interval.low, interval.high
        pmf = binom.pmf(np.arange(n + 1)[None, :], n, grid[:, None])  # [rate, passes]
        worst, at, worst_null, at_null = 1.0, None, 1.0, None
        for i, p1 in enumerate(grid):
            diff = p1 - grid  # against every reference rate
            covered = (low[None] <= diff[:, None, None] + 1e-12) & (diff[:, None, None] - 1e-12 <= high[None])
            coverage = np.einsum("x,jy,jxy->j", pmf[i], pmf, covered)
            j = int(np.argmin(coverage))
            if coverage[j] < worst:
                worst, at = float(coverage[j]), (float(p1), float(grid[j]))
            if coverage[i] < worst_null:
                worst_null, at_null = float(coverage[i]), float(p1)
        print(f"| {n} | {100 * worst:.1f}% | {at[0]:.2f}, {at[1]:.2f} | {100 * worst_null:.1f}% | {at_null:.2f} |")
    print()


# -- errored trials --------------------------------------------------------------------------------------

ERRORS = {  # name: (chance a trial errors whatever it would have done, a treatment trial that would fail, a control that would pass)
    "random 10%": (0.10, 0.0, 0.0),
    "treatment's failures 30%": (0.0, 0.30, 0.0),
    "control's passes 30%": (0.0, 0.0, 0.30),
}


def print_errors(reps: int, rng, tasks: int = 10) -> None:
    """The pooled interval (pairs with an errored trial left out) and its sensitivity line (every
    errored trial a failure), the report's own pooled_effect on simulated records, each against the
    estimand it names: the intervals for these tasks against the mean of the run's own tasks' true
    differences, the interval for tasks like these against the population's. Errors at random, and
    errors that hit one arm's failures or the other's passes (a fault that strikes where a task is hard)."""
    from types import SimpleNamespace

    from pytest_webbench.report.paired import pooled_effect

    print(f"## 7. Errored trials: the pooled interval and its sensitivity line ({tasks} tasks, {reps} runs per row)\n")
    print("| errors | pairs per task | population | these tasks: pooled interval (errored pairs left out) | "
          "these tasks: sensitivity line (errored as failures) | either covers | tasks like these: pooled interval |")
    print("|---|---|---|---|---|---|---|")
    for (name, (anywhere, t_fail, c_pass)), pairs in itertools.product(ERRORS.items(), (5, 20)):
        for population in ("null-0.5", "shift-0.2"):
            target = population_effect(population)
            main = sens = either = wide = 0
            for _ in range(reps):
                by_task, truths = {}, []
                for task in range(tasks):
                    pc, pt = task_rates(rng, population)
                    truths.append(pt - pc)
                    recorded = []
                    for _ in range(pairs):
                        c, t, _ = pair(rng, pc, pt)
                        c_err = rng.random() < anywhere or (c["outcome"] == "passed" and rng.random() < c_pass)
                        t_err = rng.random() < anywhere or (t["outcome"] == "failed" and rng.random() < t_fail)
                        recorded.append((SimpleNamespace(outcome="errored" if c_err else c["outcome"]),
                                         SimpleNamespace(outcome="errored" if t_err else t["outcome"])))
                    by_task[str(task)] = recorded
                truth = sum(truths) / len(truths)
                effect = pooled_effect(by_task)
                covered = effect is not None and effect.ci_low is not None and effect.ci_low <= truth <= effect.ci_high
                s = effect.errored_as_failures if effect is not None else None
                s_covered = covered if s is None else (s.ci_low is not None and s.ci_low <= truth <= s.ci_high)
                wide += effect is not None and effect.population_low is not None and \
                    effect.population_low <= target <= effect.population_high
                main, sens, either = main + covered, sens + s_covered, either + (covered or s_covered)
            print(f"| {name} | {pairs} | {population} | {100 * main / reps:.1f}{'!' if main / reps < 0.935 else ''} | "
                  f"{100 * sens / reps:.1f}{'!' if sens / reps < 0.935 else ''} | {100 * either / reps:.1f} | "
                  f"{100 * wide / reps:.1f}{'!' if wide / reps < 0.935 else ''} |")
            sys.stdout.flush()
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--tasks-sim", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--only", choices=("conditions", "saving", "newcombe", "errors"))
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.only in (None, "conditions"):
        print_conditions(args.reps, rng)
    if args.only in (None, "saving"):
        print_saving(args.tasks_sim, rng)
    if args.only in (None, "newcombe"):
        print_newcombe_exact()
    if args.only in (None, "errors"):
        print_errors(args.reps, rng)


if __name__ == "__main__":
    main()
