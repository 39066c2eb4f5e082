"""The pooled paired interval, CMH, Holm and the sequential rule against published or hand-computed values."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import chi2, norm
from scipy.stats import t as student_t

from pytest_webbench import stats as sa
from pytest_webbench.stats import pooled as sa_pooled
from pytest_webbench.stats import sequential as sq

Z = float(norm.ppf(0.975))


# -- Tango's score interval -----------------------------------------------------------------------------

def test_tango_with_no_discordant_pair_is_the_closed_form():
    # b = c = 0: the restricted MLE of the discordant cell is 0, the statistic is sqrt(n d / (1 - d)),
    # so the limits are +-z^2 / (n + z^2); for n = 54 that is +-0.0664 (also Newcombe 1998, Table III)
    ci = sa.tango_interval(0, 0, 54)
    assert ci.high == pytest.approx(Z**2 / (54 + Z**2), abs=1e-9) == pytest.approx(0.0664, abs=5e-5)
    assert ci.low == pytest.approx(-ci.high, abs=1e-9)


def test_tango_score_at_zero_is_mcnemar():
    # At delta = 0 Tango's statistic is McNemar's (c - b) / sqrt(b + c). For the Bentur et al. data of
    # Fagerland et al. (2014), b = 1, c = 7 of 21, ratesci::pairbinci prints chisq = 4.285714 (= z^2 (N-1)/N).
    z0 = sa_pooled._tango_z(1, 7, 21, 0.0)
    assert z0 == pytest.approx(6 / math.sqrt(8), abs=1e-12)
    assert z0**2 * 20 / 21 == pytest.approx(4.285714, abs=1e-6)


@pytest.mark.parametrize("b, c, n", [(2, 12, 50), (1, 7, 21), (16, 6, 161), (0, 5, 5), (3, 3, 10)])
def test_tango_matches_the_yang_sun_hardin_closed_form(b, c, n):
    # Yang, Sun & Hardin (Stat Med 2013): Tango's limits are roots of the quartic
    # u0 x^4 + u1 x^3 + u2 x^2 + u3 x + u4 (their Appendix B, with their b - c = our c - b).
    g = Z**2
    bb, cc = c, b   # their b is the (Success, Failure) cell of the first margin: treatment-only here
    m0 = n**2 * (n / g + 1) ** 2
    m1 = -n * (bb - cc) * (n / g + 1) * (4 * n / g + 1)
    m2 = 2 * n * (bb - cc) ** 2 * (3 * n / g + 2) / g - n**2 * ((bb + cc) / g + 1)
    m3 = n * (bb - cc) * (2 * (bb + cc) / g + 1) - (bb - cc) ** 3 * (4 * n / g + 1) / g
    m4 = (bb - cc) ** 2 * ((bb - cc) ** 2 / g - (bb + cc)) / g
    roots = np.roots([m0, m1, m2, m3, m4])
    real = sorted(r.real for r in roots if abs(r.imag) < 1e-9 and -1 - 1e-9 <= r.real <= 1 + 1e-9)
    ci = sa.tango_interval(b, c, n)
    assert any(abs(r - ci.low) < 1e-7 for r in real) or ci.low == -1.0
    assert any(abs(r - ci.high) < 1e-7 for r in real) or ci.high == 1.0


# -- Newcombe's method 10 for paired data ---------------------------------------------------------------

# Newcombe (Stat Med 1998;17:2635-2650) Table III, method 10: (e, f, g, h) -> limits to 4 decimals,
# e = both, f = first only, g = second only, h = neither; theta = (f - g) / n.
NEWCOMBE_TABLE_III = [
    ((36, 12, 2, 0), (0.0569, 0.3404)), ((20, 12, 2, 16), (0.0562, 0.3292)), ((18, 12, 2, 18), (0.0562, 0.3290)),
    ((36, 14, 0, 0), (0.1528, 0.4167)), ((35, 14, 0, 1), (0.1461, 0.4175)), ((18, 14, 0, 18), (0.1441, 0.3963)),
    ((2, 97, 1, 0), (0.8721, 0.9854)), ((1, 97, 1, 1), (0.8736, 0.9850)), ((0, 29, 1, 0), (0.6666, 0.9882)),
    ((2, 98, 0, 0), (0.9178, 0.9945)), ((1, 98, 0, 1), (0.9171, 0.9916)), ((0, 30, 0, 0), (0.8395, 1.0)),
    ((54, 0, 0, 0), (-0.0664, 0.0664)), ((53, 0, 0, 1), (-0.0729, 0.0729)), ((30, 0, 0, 24), (-0.0358, 0.0358)),
    ((29, 0, 0, 25), (-0.0354, 0.0354)), ((28, 0, 0, 26), (-0.0352, 0.0352)), ((27, 0, 0, 27), (-0.0351, 0.0351)),
]


@pytest.mark.parametrize("cells, limits", NEWCOMBE_TABLE_III)
def test_newcombe_paired_matches_table_iii(cells, limits):
    e, f, g, h = cells
    ci = sa.newcombe_paired(both=e, control_only=g, treatment_only=f, neither=h)
    assert (round(ci.low, 4), round(ci.high, 4)) == pytest.approx(limits, abs=1e-4)


# -- the pooled paired interval -------------------------------------------------------------------------

def test_all_pairs_agreeing_gives_a_proper_interval():
    # 5 tasks x 3 pairs, all d = 0: design effect 1, so Tango's closed form with t(4):
    # +-t^2 / (15 + t^2), t = 2.776445 -> +-0.33946
    r = sa.pooled_paired_interval([[0, 0, 0]] * 5)
    t = student_t.ppf(0.975, 4)
    assert r.estimate == 0 and r.design_effect == 1 and r.p_value == 1
    assert r.high == pytest.approx(t * t / (15 + t * t), abs=1e-9) == pytest.approx(0.33946, abs=1e-5)
    assert r.low == pytest.approx(-r.high, abs=1e-9)


def test_interval_stays_inside_minus_one_to_one():
    up = sa.pooled_paired_interval([[1, 1, 1]] * 5)
    assert up.estimate == 1 and up.high == 1.0 and 0 < up.low < 1
    down = sa.pooled_paired_interval([[-1, -1, -1]] * 5)
    assert down.low == -1.0 and down.high == pytest.approx(-up.low, abs=1e-12)
    few = sa.pooled_paired_interval([[-1, -1]] * 3)   # 6 pairs, t(2) = 4.30: wide, still inside
    assert few.low == -1.0 and -1 < few.high < 1


def test_design_effect_and_p_value_by_hand():
    # tasks [1, 1], [0, 0], [-1, 0]: n = 6, sum 1, 3 discordant.
    # independent variance (3 - 1/6) / 36 = 17/216; CR1 1.5 * ((5/3)^2 + (1/3)^2 + (4/3)^2) / 36 = 7/36;
    # design effect = 42/17; z = (2 - 1) / sqrt(42/17 * 3), two-sided on t(2)
    r = sa.pooled_paired_interval([[1, 1], [0, 0], [-1, 0]])
    assert r.design_effect == pytest.approx(42 / 17, abs=1e-12)
    assert r.p_value == pytest.approx(2 * student_t.sf(math.sqrt(17 / 126), 2), abs=1e-12)
    assert (r.pairs, r.tasks, r.control_only, r.treatment_only) == (6, 3, 1, 2)
    tango = sa.tango_interval(17 / 42, 34 / 42, 102 / 42, critical=student_t.ppf(0.975, 2))
    assert (r.low, r.high) == pytest.approx((tango.low, tango.high), abs=1e-12)


def test_without_clustering_it_is_tango_read_on_t():
    # design effect floored at 1: identical tasks give Tango's interval with the t(G-1) quantile
    groups = [[1, 0, -1, 0]] * 4
    r = sa.pooled_paired_interval(groups)
    assert r.design_effect == 1.0
    tango = sa.tango_interval(4, 4, 16, critical=student_t.ppf(0.975, 3))
    assert (r.low, r.high) == pytest.approx((tango.low, tango.high), abs=1e-12)


def test_deterministic_and_none_without_two_tasks():
    rng = np.random.default_rng(7)
    groups = [list(rng.choice([-1, 0, 0, 1], 10)) for _ in range(20)]
    first = sa.pooled_paired_interval(groups)
    assert first is not None
    assert sa.pooled_paired_interval(groups) == first
    assert sa.pooled_paired_interval([[1, 0, 0]]) is None
    assert sa.pooled_paired_interval([[1, 0], []]) is None


# -- minimum detectable effect ------------------------------------------------------------------------------

def test_expected_floored_design_effect_by_integration():
    # E[max(1, D W)], W ~ chi2(k)/k, by numerical integration of the density
    for d, tasks in ((1.0, 5), (1.0, 20), (1.5, 9), (3.0, 5)):
        k = tasks - 1
        integral = quad(lambda w: max(1.0, d * w) * chi2.pdf(w * k, k) * k, 0, 60)[0]
        assert sa_pooled.expected_floored_design_effect(d, tasks) == pytest.approx(integral, abs=1e-7)


def test_mde_matches_the_closed_form_root():
    # delta A - a = b sqrt(pi - delta^2), A = sqrt(N/D'), a = t_alpha sqrt(pi), b = t_power:
    # squaring, delta^2 (A^2 + b^2) - 2 a A delta + a^2 - b^2 pi = 0, larger root (valid while delta <= pi)
    pairs, tasks, pi, deff = 100, 20, 0.4, 1.5
    floored = quad(lambda w: max(1.0, deff * w) * chi2.pdf(w * 19, 19) * 19, 0, 60)[0]
    t_a, t_b = student_t.ppf(0.975, tasks - 1), student_t.ppf(0.8, tasks - 1)
    big_a, a = math.sqrt(pairs / floored), t_a * math.sqrt(pi)
    qa, qb, qc = big_a**2 + t_b**2, -2 * a * big_a, a * a - t_b**2 * pi
    root = (-qb + math.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa)
    assert root < pi
    assert sa.mde_clustered(pairs, tasks, pi, deff) == pytest.approx(root, abs=1e-9)


def test_mde_edges():
    assert sa.mde_clustered(10, 1, 0.5) is None
    assert sa.mde_clustered(6, 3, 0.5) is None            # nothing up to 100 points at 6 pairs over 3 tasks
    assert sa.mde_clustered(400, 20, 0.3, 4.0) > sa.mde_clustered(400, 20, 0.3, 1.0)
    assert sa.mde_clustered_from_data([[1, 1], [0, 0], [-1, 0]]) == sa.mde_clustered(6, 3, 0.5, 42 / 17)


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
