"""Sequential decisions under -n, when a trial's duration depends on its arm and outcome.

Pairs of one task run on W workers in attempt order; a pair's trials run back to back, and a
failing treatment ends fast (15 s) while a failing control times out (300 s). Under no difference
the pairs that happen to have ended first are then mostly control-favouring ones: a rule fed
whichever pairs ended first declares false effects. `planning/stopping.py` decides on the longest
prefix of attempts whose pairs have all ended, so its error rate holds whatever the finishing order.
The simulation drives the production functions (`prefix_pairs`, `decision_on`, `rule_for`)."""

from __future__ import annotations

import heapq
import math
import random

import pytest

from pytest_webbench.planning.stopping import ALPHA, PairOutcome, TaskPairs, decision_on, prefix_pairs, rule_for

ATTEMPTS = 40


def _trial(arm: str, passed: bool, rng: random.Random) -> dict:
    if passed:
        seconds = rng.uniform(50, 70)  # the same for both arms: no difference in speed either
    else:
        seconds = 15.0 if arm == "treatment" else 300.0
    return {"outcome": "passed" if passed else "failed", "timings": {"agent_sec": seconds}}


def _first_ended(by_attempt: dict, attempts: int) -> TaskPairs:
    """The rule this module guards against: every pair that has ended, whatever its attempt."""
    out = TaskPairs()
    for attempt in sorted(by_attempt):
        c, t = by_attempt[attempt]
        out.attempts.append(attempt)
        out.pairs.append(PairOutcome(c["outcome"] == "passed", t["outcome"] == "passed",
                                     c["timings"]["agent_sec"], t["timings"]["agent_sec"]))
    out.last_attempt = max(by_attempt, default=0)
    return out


def simulate_task(rng: random.Random, workers: int, seen) -> tuple[bool, bool]:
    """One task run to its decision on `workers` workers: (false pass/fail claim, false speed claim)."""
    rule = rule_for(ATTEMPTS)
    ended: dict[int, tuple[dict, dict]] = {}
    running: list[tuple[float, int, tuple[dict, dict]]] = []
    next_attempt, now, decision = 1, 0.0, None

    def start(at: float) -> None:
        nonlocal next_attempt
        c, t = rng.random() < 0.5, rng.random() < 0.5
        pair = (_trial("control", c, rng), _trial("treatment", t, rng))
        duration = pair[0]["timings"]["agent_sec"] + pair[1]["timings"]["agent_sec"]
        heapq.heappush(running, (at + duration, next_attempt, pair))
        next_attempt += 1

    for _ in range(workers):
        start(0.0)
    while running:
        now, attempt, pair = heapq.heappop(running)
        ended[attempt] = pair
        if decision is None:  # a worker is free: the task's pairs so far are read before its next pair
            decision = decision_on(rule, "t", seen(ended, ATTEMPTS))
            if decision is None and next_attempt <= ATTEMPTS:
                start(now)
    if decision is None:  # the final look, at the cap
        decision = decision_on(rule, "t", seen(ended, ATTEMPTS))
    if decision is None:
        return False, False
    return decision.outcome == "effect", decision.speed == "effect"


def false_claims(workers: int, seen, tasks: int, seed: int) -> tuple[float, float, float]:
    rng = random.Random(seed)
    outcome = speed = either = 0
    for _ in range(tasks):
        o, s = simulate_task(rng, workers, seen)
        outcome += o
        speed += s
        either += o or s
    return outcome / tasks, speed / tasks, either / tasks


TASKS = 3000


def _se(p: float) -> float:
    return math.sqrt(p * (1 - p) / TASKS)


@pytest.mark.parametrize("workers", [2, 8, 16])
def test_decisions_on_a_prefix_keep_the_error_rate_whatever_ends_first(workers):
    outcome, speed, either = false_claims(workers, prefix_pairs, TASKS, seed=workers)
    rule = rule_for(ATTEMPTS)
    # each endpoint at alpha / 2, any false claim about a task at alpha, within Monte Carlo error
    assert outcome <= rule.alpha + 3 * _se(rule.alpha), outcome
    assert speed <= rule.alpha + 3 * _se(rule.alpha), speed
    assert either <= ALPHA + 3 * _se(ALPHA), either


def test_the_same_rule_on_the_pairs_that_ended_first_declares_false_effects():
    """The scenario is hostile enough to matter: fed the first-ended pairs, the same boundary errs
    well above its level (so the test above could fail)."""
    outcome, _, _ = false_claims(8, _first_ended, TASKS, seed=8)
    rule = rule_for(ATTEMPTS)
    assert outcome > rule.alpha + 4 * _se(rule.alpha), outcome


@pytest.mark.parametrize("attempts", range(7, 61))
def test_every_cap_sequential_accepts_can_declare_an_effect(attempts):
    """With every pair favouring one arm, the rule declares the effect by the cap: it never stops
    such a task for futility first."""
    rule = rule_for(attempts)
    for t_only, c_only in ((1.0, 0.0), (0.0, 1.0)):
        assert rule.operating_characteristics(t_only, c_only)["effect"] == pytest.approx(1.0)


WALK = {"T": PairOutcome(False, True), "C": PairOutcome(True, False), "N": PairOutcome(False, False),
        "f": PairOutcome(True, True, 10.0, 5.0), "s": PairOutcome(True, True, 5.0, 10.0)}


def _walk(letters: str) -> TaskPairs:
    return TaskPairs(attempts=list(range(1, len(letters) + 1)), pairs=[WALK[k] for k in letters])


def test_an_effect_once_reached_stands_while_the_other_endpoint_runs_on():
    # pass/fail crosses the boundary at pair 13 (treatment 8 of 8 discordant) while speed is still
    # undecided; by pair 18 the split has fallen back under it and speed stops for futility. The task
    # is an effect for treatment, as its anytime p-value (under alpha / 2) says, never "futility".
    rule = rule_for(20)
    assert decision_on(rule, "t", _walk("TsTsTTNssTTsT")) is None  # speed not yet stopped
    d = decision_on(rule, "t", _walk("TsTsTTNssTTsTTCsCf"))
    assert rule.decide(d.control_only, d.treatment_only, d.pairs) == "futility"  # what the last look alone says
    assert (d.outcome, d.favours, d.speed) == ("effect", "treatment", "futility")
    assert d.p_value <= rule.alpha < 0.05


def test_a_decision_is_an_effect_exactly_when_its_anytime_p_value_is_under_alpha():
    rng = random.Random(31)
    rule, fell_back = rule_for(20), 0
    for _ in range(3000):
        weights = [rng.random() for _ in WALK]
        letters, d = "", None
        while d is None:  # every task is decided by the cap
            letters += rng.choices(list(WALK), weights)[0]
            d = decision_on(rule, "t", _walk(letters))
        pairs = _walk(letters).pairs
        for verdict, p, steps in ((d.outcome, d.p_value, [q.step for q in pairs]),
                                  (d.speed, d.speed_p_value, [q.speed_step for q in pairs])):
            assert (verdict == "effect") == (p <= rule.alpha), (letters, verdict, p)
            fell_back += verdict == "effect" and rule.decide(steps.count(-1), steps.count(1), len(steps)) != "effect"
    assert fell_back > 0  # walks that crossed and fell back were among them
