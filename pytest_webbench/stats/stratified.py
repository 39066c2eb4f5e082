"""Unpaired comparisons stratified by task: the playwright arm against control, and two runs over
the same tasks (Cochran-Mantel-Haenszel), and Holm's adjustment for per-task p-values."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .binomial import newcombe_difference
from .distributions import chi2_sf, normal_ppf

# -- Cochran-Mantel-Haenszel over tasks --------------------------------------------------------------------

@dataclass(frozen=True)
class CMHResult:
    statistic: float            # CMH chi-square, 1 df
    p_value: float
    corrected: bool             # continuity correction applied to the statistic
    odds_ratio: float | None    # Mantel-Haenszel common odds ratio (row 0 vs row 1); None if undefined
    odds_ratio_low: float | None
    odds_ratio_high: float | None
    risk_difference: float | None   # Mantel-Haenszel risk difference, rate(row 0) - rate(row 1)
    risk_difference_se: float | None  # Sato (1989) standard error
    risk_difference_low: float | None
    risk_difference_high: float | None
    strata: int                 # strata that carried information


def cmh_test(strata: Sequence[Sequence[Sequence[int]]], correction: bool = True, confidence: float = 0.95) -> CMHResult | None:
    """Cochran-Mantel-Haenszel test over 2x2 tables stratified by task, with the Mantel-Haenszel
    common odds ratio (Robins-Breslow-Greenland 1986 interval) and risk difference (Sato 1989
    variance, consistent with many small tasks and with few large ones).

    Each table is [[a, b], [c, d]]: row 0 = the arm or run of interest (e.g. playwright, or run B),
    row 1 = the reference (control, or run A); column 0 = passed, column 1 = not passed.
    Assumes the trials of the two rows are independent within a task (unpaired arms, or two runs),
    and that tasks are independent. The test's null is "no difference in any task"; the odds ratio
    and risk difference estimate an effect common to the tasks (a weighted average when it is not).
    Tables with an empty row carry no information and are skipped; None if none is left."""
    rows = []
    for table in strata:
        (a, b), (c, d) = table
        n1, n2 = a + b, c + d
        if n1 > 0 and n2 > 0:
            rows.append((float(a), float(b), float(c), float(d)))
    if not rows:
        return None
    deviation = variance = 0.0
    r_sum = s_sum = pr = ps_qr = qs = 0.0
    weight = rd_num = sato_p = sato_q = 0.0
    for a, b, c, d in rows:
        n1, n2, m1, m2 = a + b, c + d, a + c, b + d
        total = n1 + n2
        deviation += a - n1 * m1 / total
        if total > 1:
            variance += n1 * n2 * m1 * m2 / (total * total * (total - 1))
        r, s = a * d / total, b * c / total
        p, q = (a + d) / total, (b + c) / total
        r_sum += r
        s_sum += s
        pr += p * r
        ps_qr += p * s + q * r
        qs += q * s
        weight += n1 * n2 / total
        rd_num += (a * n2 - c * n1) / total
        sato_p += (n1 * n1 * c - n2 * n2 * a + n1 * n2 * (n2 - n1) / 2) / total ** 2
        sato_q += (a * (n2 - c) + c * (n1 - a)) / (2 * total)
    if variance > 0:
        numerator = max(abs(deviation) - 0.5, 0.0) if correction else abs(deviation)
        statistic = numerator ** 2 / variance
        p_value = chi2_sf(statistic, 1)
    else:
        statistic, p_value = 0.0, 1.0
    z = normal_ppf(0.5 + confidence / 2)
    odds = low = high = None
    if r_sum > 0 and s_sum > 0:
        odds = r_sum / s_sum
        log_var = pr / (2 * r_sum ** 2) + ps_qr / (2 * r_sum * s_sum) + qs / (2 * s_sum ** 2)
        low, high = math.exp(math.log(odds) - z * math.sqrt(log_var)), math.exp(math.log(odds) + z * math.sqrt(log_var))
    rd = rd_num / weight
    rd_var = max((rd * sato_p + sato_q) / weight ** 2, 0.0)
    rd_se = math.sqrt(rd_var)
    rd_low, rd_high = max(-1.0, rd - z * rd_se), min(1.0, rd + z * rd_se)
    if rd_var == 0.0:
        # every trial of both rows passed (or every one failed): Sato's variance is 0 and its interval a
        # point. Newcombe's interval on the pooled rows is the proper one there (the rates are all at one edge).
        pooled = newcombe_difference(int(sum(r[0] for r in rows)), int(sum(r[0] + r[1] for r in rows)),
                                     int(sum(r[2] for r in rows)), int(sum(r[2] + r[3] for r in rows)), confidence)
        rd_low, rd_high = pooled.low, pooled.high
    return CMHResult(statistic, p_value, correction, odds, low, high, rd, rd_se, rd_low, rd_high, len(rows))


# -- Holm's step-down adjustment ------------------------------------------------------------------------------

def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm (1979) adjusted p-values, in the input order: the k-th smallest of m p-values is
    multiplied by m - k + 1, made non-decreasing, capped at 1. Controls the family-wise error rate
    under any dependence. None entries (untested) stay None and do not count in m."""
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(present)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted
