"""The intervals for this suite's tasks (stats/suite.py), against values worked by hand from their
formulas (docs/statistics.md): the rate's variance from (passes + 1.5) / (trials + 3) per task, the
paired difference's from Bonett and Price's adjusted discordant shares (+1/2 each, over pairs + 1)."""

from __future__ import annotations

import pytest

from pytest_webbench.stats.suite import suite_mde, suite_mean_rate, suite_paired_difference


def test_the_mean_rate_over_two_tasks_by_hand():
    # 3/5 and 5/5: mean 0.8; variances (4.5/8)(3.5/8)/5 and (6.5/8)(1.5/8)/5; se = sqrt(sum) / 2 = 0.141145
    got = suite_mean_rate([(3, 5), (5, 5)])
    assert got.estimate == pytest.approx(0.8)
    assert got.standard_error == pytest.approx(0.14114487, abs=1e-7)
    assert got.low == pytest.approx(0.52336113, abs=1e-7) and got.high == 1.0  # clipped at the ceiling
    assert (got.tasks, got.units, got.p_value) == (2, 10, None)


def test_a_task_at_the_ceiling_still_carries_its_uncertainty():
    got = suite_mean_rate([(5, 5), (5, 5), (5, 5)])
    assert got.estimate == 1.0 and got.low < 0.9 and got.high == 1.0
    assert suite_mean_rate([(0, 0)]) is None and suite_mean_rate([]) is None


def test_the_paired_difference_by_hand():
    # tasks (treatment-only, control-only, pairs): (10, 3, 50) and (0, 0, 4)
    # estimate ((10 - 3)/50 + 0)/2 = 0.07; variances ((10.5+3.5)/51 - (7/51)^2)/50 and (1/5)/4
    got = suite_paired_difference([(10, 3, 50), (0, 0, 4), (0, 0, 0)])
    assert got.estimate == pytest.approx(0.07)
    assert got.standard_error == pytest.approx(0.11738124, abs=1e-7)
    assert (got.low, got.high) == (pytest.approx(-0.16006299, abs=1e-7), pytest.approx(0.30006299, abs=1e-7))
    assert got.p_value == pytest.approx(0.55094314, abs=1e-7) and (got.tasks, got.units) == (2, 54)


def test_the_test_and_the_interval_agree():
    for counts in ([(9, 1, 12), (7, 2, 10), (8, 0, 9)], [(2, 1, 5), (1, 1, 5)], [(6, 0, 6)]):
        got = suite_paired_difference(counts)
        assert (got.p_value < 0.05) == (got.low > 0 or got.high < 0), counts


def test_the_mde_is_the_effect_its_own_standard_error_detects():
    # tasks (10, 3, 50) and (0, 0, 4): at d = 0.34632 each task's share is taken as max(share, d) = d,
    # so se = sqrt((d - d^2)/50 + (d - d^2)/4) / 2 = 0.123617, and (1.959964 + 0.841621) x se = d
    d = suite_mde([(10, 3, 50), (0, 0, 4)])
    se = ((d - d * d) / 50 + (d - d * d) / 4) ** 0.5 / 2
    assert d == pytest.approx(0.34632, abs=1e-5) and (1.959964 + 0.841621) * se == pytest.approx(d, abs=1e-5)
    # a share above the effect is kept: (40, 0, 50) has share (40 + 0 + 1/2 + 1/2) / 51
    wide = suite_mde([(40, 0, 50), (40, 0, 50)])
    assert wide == pytest.approx(2.801585 * (((41 / 51) - wide ** 2) / 50 * 2) ** 0.5 / 2, abs=1e-5)
    assert suite_mde([(0, 0, 1)]) is None  # beyond 100 points
