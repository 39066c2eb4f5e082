"""The mean effect over tasks, CMH, Holm and the sequential rule against published or hand-computed values."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import norm
from scipy.stats import t as student_t

from pytest_webbench import stats as sa
from pytest_webbench.stats import sequential as sq

Z = float(norm.ppf(0.975))


# -- the mean effect over tasks ---------------------------------------------------------------------------

def _tasks(counts_of_plus_one: list[int], pairs: int) -> list[list[int]]:
    return [[1] * k + [0] * (pairs - k) for k in counts_of_plus_one]


def test_task_mean_interval_is_student_s_paired_t_on_the_sleep_data():
    # Student (1908), R's sleep data: t.test(extra ~ group, paired = TRUE) gives mean difference 1.58,
    # t = 4.0621, df = 9, p = 0.002833, 95% CI 0.7001142 to 2.4598858. Divided by 5 each difference is
    # a task's share of 50 pairs (1.2 -> 12 of 50 favouring treatment): the same t, the CI over 5.
    sleep = [1.2, 2.4, 1.3, 1.3, 0.0, 1.0, 1.8, 0.8, 4.6, 1.4]
    r = sa.task_mean_interval(_tasks([round(d * 10) for d in sleep], 50))
    assert r.estimate == pytest.approx(1.58 / 5, abs=1e-12)
    assert (r.low, r.high) == pytest.approx((0.7001142 / 5, 2.4598858 / 5), abs=5e-8)
    assert r.p_value == pytest.approx(0.002833, abs=5e-7)
    assert not r.floored and r.tasks == 10 and r.pairs == 500


def test_task_mean_difference_between_runs_by_hand():
    # x minus y per task: 8/10 - 5/10, 5/10 - 5/10, 9/10 - 3/10 = 0.3, 0, 0.6; mean 0.3, between-task
    # variance (0 + 0.09 + 0.09) / 2 = 0.09, over 3 tasks 0.03. The floor, each side's p = (x+1)/(n+2):
    # (0.75*0.25 + 0.5*0.5)/10 + (0.5*0.5 + 0.5*0.5)/10 + (10/12*2/12 + 4/12*8/12)/10 = 0.129861, over
    # 9 = 0.014429, below 0.03. t(0.975, 2) = 4.302653; the two-sided p at t = 0.3 / sqrt(0.03) with 2
    # degrees of freedom is 1 - t / sqrt(t^2 + 2) = 0.225403.
    r = sa.task_mean_difference([((8, 10), (5, 10)), ((5, 10), (5, 10)), ((9, 10), (3, 10))])
    se = math.sqrt(0.03)
    assert r.estimate == pytest.approx(0.3) and r.standard_error == pytest.approx(se) and not r.floored
    assert (r.low, r.high) == pytest.approx((0.3 - 4.302653 * se, 1.0), abs=1e-6)  # the top cut at 1
    assert r.p_value == pytest.approx(1 - 0.3 / se / math.sqrt(0.3 ** 2 / 0.03 + 2), abs=1e-9)
    assert r.p_value == pytest.approx(0.225403, abs=1e-6) and r.tasks == 3 and r.pairs == 60
    # a side without trials leaves its task out; fewer than two tasks left: no interval
    assert sa.task_mean_difference([((8, 10), (5, 10)), ((0, 0), (5, 10))]) is None


def test_task_mean_difference_weighs_every_task_alike_however_many_trials_it_got():
    # the same rate on each task in both runs (90% and 10%), the trials split 20/10 in one and 10/20 in
    # the other: trials pooled over tasks make it 19/30 against 11/30 (Newcombe's interval excludes 0);
    # the mean over tasks finds no difference at all
    r = sa.task_mean_difference([((9, 10), (18, 20)), ((2, 20), (1, 10))])
    assert r.estimate == pytest.approx(0.0, abs=1e-12) and r.low < 0 < r.high and r.p_value == pytest.approx(1.0)
    pooled = sa.newcombe_difference(11, 30, 19, 30)
    assert pooled.high < 0  # what the comparison's headline used to print


def test_task_mean_interval_by_hand_where_the_floor_sets_the_width():
    # task means 2/3, 1/3, 3/4: estimate 7/12; between-task variance 0.04861 / 3 = 0.0162 is below the
    # floor, (3/5/3 + 2/5/3 + 4/6/4) / 9 = 0.5 / 9, so the standard error is sqrt(1/18)
    r = sa.task_mean_interval([[1, 0, 1], [0, 0, 1], [1, 1, 1, 0]])
    se = math.sqrt(1 / 18)
    half = student_t.ppf(0.975, 2) * se
    assert r.estimate == pytest.approx(7 / 12) and r.standard_error == pytest.approx(se) and r.floored
    assert (r.low, r.high) == pytest.approx((7 / 12 - half, 1.0))  # the upper limit capped at 1
    assert r.p_value == pytest.approx(2 * student_t.sf((7 / 12) / se, 2))


def test_task_mean_interval_is_never_zero_width_and_weighs_tasks_equally():
    agree = sa.task_mean_interval([[0, 0, 0]] * 5)  # every pair concordant: no between-task spread
    assert agree.estimate == 0 and agree.low < 0 < agree.high and agree.low == pytest.approx(-agree.high)
    assert agree.p_value == 1 and agree.floored
    # one task with 40 pairs all favouring treatment beside four with 3 concordant pairs: the estimand
    # weighs each task once (0.2), where the pairs as one sample would say 40/52
    unequal = sa.task_mean_interval([[1] * 40] + [[0] * 3] * 4)
    assert unequal.estimate == pytest.approx(0.2) and unequal.pairs == 52
    assert sa.task_mean_interval([[1, 0, 0]]) is None and sa.task_mean_interval([[1, 0], []]) is None


def test_mde_of_the_task_mean_test_by_hand():
    r = sa.task_mean_interval(_tasks([12, 24, 13, 13, 0, 10, 18, 8, 46, 14], 50))
    expected = (student_t.ppf(0.975, 9) + student_t.ppf(0.8, 9)) * r.standard_error
    assert sa.mde_task_mean(r) == pytest.approx(expected)
    assert sa.mde_task_mean(sa.task_mean_interval([[1], [-1]])) is None  # beyond 100 points


def test_the_task_mean_interval_covers_with_unequal_pairs_per_task():
    """Pairs per task [40, 3, 3, 3, 3], each task's effect +0.4 or -0.4 at random (the mean effect
    over tasks is 0): a pair-weighted interval covered 59.5% here; this one must cover 95% within
    Monte Carlo error (2,000 runs: SE 0.5 points)."""
    rng = np.random.default_rng(28)
    runs, covered = 2000, 0
    for _ in range(runs):
        groups = []
        for n in (40, 3, 3, 3, 3):
            delta = 0.4 if rng.random() < 0.5 else -0.4
            control = rng.random(n) < 0.5 - delta / 2
            treatment = rng.random(n) < 0.5 + delta / 2
            groups.append(list(treatment.astype(int) - control.astype(int)))
        r = sa.task_mean_interval(groups)
        covered += r.low <= 0 <= r.high
    assert covered / runs >= 0.935, covered / runs


# -- Cochran-Mantel-Haenszel ----------------------------------------------------------------------------------

# Agresti (1990) penicillin and rabbits, the example of R's mantelhaen.test: rows = delay None / 1.5 h,
# columns = cured / died. R: Mantel-Haenszel X-squared = 3.9286, p-value = 0.04747, common odds ratio 7,
# 95% CI 1.026713 to 47.725133 (also statsmodels' TestStratified1).
RABBITS = [[[0, 6], [0, 5]], [[3, 3], [0, 6]], [[6, 0], [2, 4]], [[5, 1], [6, 0]], [[2, 0], [5, 0]]]

# Agresti (2013), Categorical Data Analysis 3rd ed., the eight-centre clinical trial (drug vs control,
# success / failure): CMH = 6.38 without continuity correction, Mantel-Haenszel odds ratio 2.13, MH
# risk difference 0.130 with SE 0.050 (GSK cicalc::ci_risk_diff_mh_strata, Sato: 0.0313 to 0.2284).
CENTRES = [[[11, 25], [10, 27]], [[16, 4], [22, 10]], [[14, 5], [7, 12]], [[2, 14], [1, 16]],
           [[6, 11], [0, 12]], [[1, 10], [0, 10]], [[1, 4], [1, 8]], [[4, 2], [6, 1]]]


def test_cmh_penicillin_and_rabbits():
    r = sa.cmh_test(RABBITS, correction=True)
    assert r.statistic == pytest.approx(3.9286, abs=5e-5)
    assert r.p_value == pytest.approx(0.04747, abs=5e-6)
    assert r.odds_ratio == pytest.approx(7.0, abs=1e-12)
    assert (r.odds_ratio_low, r.odds_ratio_high) == pytest.approx((1.026713, 47.725133), abs=5e-7)
    assert r.strata == 5


def test_cmh_agresti_eight_centres():
    r = sa.cmh_test(CENTRES, correction=False)
    assert r.statistic == pytest.approx(6.38, abs=5e-3)
    assert r.p_value == pytest.approx(0.0115, abs=5e-5)
    assert r.odds_ratio == pytest.approx(2.13, abs=5e-3)
    assert r.risk_difference == pytest.approx(0.130, abs=5e-4)
    assert r.risk_difference_se == pytest.approx(0.050, abs=5e-4)
    assert (r.risk_difference_low, r.risk_difference_high) == pytest.approx((0.0313, 0.2284), abs=5e-5)
    corrected = sa.cmh_test(CENTRES)
    assert corrected.corrected and corrected.statistic < r.statistic


def test_cmh_one_stratum_by_hand_and_empty_input():
    # one table [[3, 1], [1, 3]]: E(a) = 2, Var(a) = 4*4*4*4 / (8^2 * 7) = 4/7, (|3 - 2|)^2 / (4/7) = 1.75
    r = sa.cmh_test([[[3, 1], [1, 3]]], correction=False)
    assert r.statistic == pytest.approx(1.75) and r.odds_ratio == pytest.approx(9.0)
    assert r.risk_difference == pytest.approx(0.5)
    assert sa.cmh_test([[[0, 0], [3, 4]]]) is None


# -- Holm -------------------------------------------------------------------------------------------------------

def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert sa.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert sa.holm([0.01, None, 0.04]) == [pytest.approx(0.02), None, pytest.approx(0.04)]
    assert sa.holm([0.5, 0.6]) == [1.0, 1.0]
    assert sa.holm([]) == []


# -- the sequential rule -----------------------------------------------------------------------------------------

def test_mixture_e_value_by_hand():
    # E_m(s) = 2^m B(1/2 + s, 1/2 + m - s) / B(1/2, 1/2). With s = m: B(m + 1/2, 1/2) / pi = (2m-1)!! / (2m)!!,
    # so E_6(6) = 64 * 10395 / 46080 = 10395 / 720 = 14.4375 and E_5(5) = 32 * 945 / 3840 = 7.875.
    rule = sq.SequentialRule(max_pairs=8)
    assert rule.e_value(0, 6) == pytest.approx(10395 / 720, rel=1e-12)
    assert rule.e_value(5, 0) == pytest.approx(945 / 120, rel=1e-12)
    assert rule.e_value(0, 0) == pytest.approx(1.0)


def test_threshold_and_error_for_eight_pairs_by_hand():
    # up to 8 discordant pairs the only paths the boundary can catch are 6, 7 or 8 all one way, all of
    # which pass through "first six all one way": chance 2 / 2^6 = 1/32; threshold = E_6(6)
    rule = sq.SequentialRule(max_pairs=8)
    assert rule.type_i_bound == pytest.approx(1 / 32, abs=1e-15)
    assert rule.threshold == pytest.approx(10395 / 720, rel=1e-9)
    assert rule.majority_needed(5) is None and rule.majority_needed(6) == 6


@pytest.mark.parametrize("max_pairs", [10, 12, 15])
def test_type_i_bound_by_enumerating_every_path(max_pairs):
    # brute force over all 2^max_pairs sign sequences of the discordant pairs, independent of the DP
    rule = sq.SequentialRule(max_pairs=max_pairs)
    needed = [rule.majority_needed(m) for m in range(max_pairs + 1)]
    crossed = 0
    for signs in itertools.product((0, 1), repeat=max_pairs):
        s = 0
        for m, x in enumerate(signs, start=1):
            s += x
            if needed[m] is not None and max(s, m - s) >= needed[m]:
                crossed += 1
                break
    assert crossed / 2**max_pairs == pytest.approx(rule.type_i_bound, abs=1e-12)
    assert rule.type_i_bound <= 0.05


def test_predictive_chance_one_step_from_the_boundary_by_hand():
    # 8 pairs max, after 7: 5 treatment-only, 2 concordant. Only a sixth treatment-only pair can still
    # reach the boundary (6 of 6); Polya urn with Dirichlet(1, 1/2, 1/2): (1/2 + 5) / (2 + 7) = 11/18.
    rule = sq.SequentialRule(max_pairs=8)
    assert rule.predictive_chance(0, 5, 7) == pytest.approx(11 / 18, abs=1e-12)
    assert rule.decide(0, 5, 7) == "continue" and rule.decide(0, 6, 8) == "effect"
    assert rule.decide(1, 5, 7) == "futility"       # boundary out of reach: curtailed


def test_decisions_on_the_presets():
    rule = sq.SequentialRule.for_fixed_design(10)
    assert rule.max_pairs == 20 and rule.futility_below == 0.3
    assert rule.decide(0, 6, 6) == "effect" and rule.decide(6, 0, 6) == "effect"     # E_6 = 14.44 >= 9.50
    assert rule.decide(0, 5, 5) == "continue"                                       # E_5 = 7.875
    assert rule.decide(0, 0, 1) == "continue"                                       # no futility on one pair
    assert rule.decide(0, 0, 2) == "futility"                                       # ceiling: two ties
    assert rule.decide(2, 2, 4) == "futility"                                       # 50/50 split
    assert rule.decide(0, 3, 20) == "futility"                                      # cap reached
    assert rule.decide_speed(faster=6, slower=0, pairs=6) == rule.decide(0, 6, 6)
    with pytest.raises(ValueError):
        rule.decide(0, 0, 21)
    with pytest.raises(ValueError):
        rule.decide(3, 3, 5)
    assert "9.50" in rule.describe()
    assert sq.SequentialRule.for_fixed_design(11).max_pairs == 22      # nearest preset (10) scaled


def test_operating_characteristics_by_enumerating_every_sequence():
    rule = sq.SequentialRule(max_pairs=7, futility_below=0.2)
    p_t, p_c = 0.5, 0.1
    probs = {"t": p_t, "c": p_c, "=": 1 - p_t - p_c}
    for rnd in (1, 2):
        effect = expected = 0.0
        for seq in itertools.product("tc=", repeat=7):
            prob = math.prod(probs[x] for x in seq)
            b = c = 0
            for n, x in enumerate(seq, start=1):
                b += x == "c"
                c += x == "t"
                if n % rnd and n != 7:
                    continue
                d = rule.decide(b, c, n)
                if d != "continue":
                    effect += prob * (d == "effect")
                    expected += prob * n
                    break
        oc = rule.operating_characteristics(p_t, p_c, rnd)
        assert oc["effect"] == pytest.approx(effect, abs=1e-12)
        assert oc["expected_pairs"] == pytest.approx(expected, abs=1e-12)


def test_type_i_under_irregular_rounds_by_simulation():
    # no effect, half the pairs discordant, rounds of 1 to 3 pairs at random: rejection rate <= 5% + 3 SE
    rule = sq.SequentialRule.for_fixed_design(10)
    rng = np.random.default_rng(11)
    tasks, rejected = 20000, 0
    kinds = rng.choice(3, size=(tasks, rule.max_pairs), p=[0.5, 0.25, 0.25])
    for k in range(tasks):
        b = c = n = 0
        while n < rule.max_pairs:
            step = min(int(rng.integers(1, 4)), rule.max_pairs - n)
            for x in kinds[k, n:n + step]:
                b += x == 2
                c += x == 1
            n += step
            d = rule.decide(b, c, n)
            if d != "continue":
                rejected += d == "effect"
                break
    assert rejected / tasks <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / tasks)


def test_decide_builds_its_tables_once():
    # decide runs after every pair at run time; its boundary tables must come from the cache
    rule = sq.SequentialRule.for_fixed_design(20)
    rule.decide(0, 0, 0)
    built = sq._tables.cache_info().misses, sq._boundary.cache_info().misses
    for discordant in range(1, 12):
        rule.decide(discordant // 2, discordant - discordant // 2, 12)
    assert (sq._tables.cache_info().misses, sq._boundary.cache_info().misses) == built


def test_the_mantel_haenszel_difference_is_never_a_point_when_every_trial_passed():
    # Sato's variance is 0 when every trial of both rows passed: the interval falls back to Newcombe's
    # on the pooled rows (5 tasks x 3 each way, all passing: 15/15 against 15/15)
    r = sa.cmh_test([[[3, 0], [3, 0]]] * 5)
    newcombe = sa.newcombe_difference(15, 15, 15, 15)
    assert r.risk_difference == 0 and r.risk_difference_se == 0
    assert (r.risk_difference_low, r.risk_difference_high) == pytest.approx((newcombe.low, newcombe.high))
    assert r.risk_difference_low < 0 < r.risk_difference_high


def test_task_mean_rate_by_hand_and_at_a_ceiling():
    # ten tasks of 20 trials at 50, 60, 70, 80, 90% (twice): mean 0.7; between-task variance 0.2 / 9, its
    # mean's 0.2 / 90, above the floor; t(9)
    r = sa.task_mean_rate([(x, 20) for x in (10, 12, 14, 16, 18) * 2])
    se = math.sqrt(0.2 / 90)
    assert r.estimate == pytest.approx(0.7) and r.standard_error == pytest.approx(se) and not r.floored
    assert (r.low, r.high) == pytest.approx((0.7 - student_t.ppf(0.975, 9) * se, 0.7 + student_t.ppf(0.975, 9) * se))
    # every trial passed in 5 tasks of 3: the floor p(1 - p)/n with p = 4/5 keeps it a proper interval below 1
    ceiling = sa.task_mean_rate([(3, 3)] * 5)
    assert ceiling.high == 1.0 and 0 < ceiling.low < 1 and ceiling.floored
    assert ceiling.low == pytest.approx(1 - student_t.ppf(0.975, 4) * math.sqrt(5 * (0.8 * 0.2 / 3)) / 5)
    # unequal trials weigh nothing: a 40-trial task passing everything beside four failing 3-trial tasks is 0.2
    assert sa.task_mean_rate([(40, 40)] + [(0, 3)] * 4).estimate == pytest.approx(0.2)
    assert sa.task_mean_rate([(3, 3)]) is None
