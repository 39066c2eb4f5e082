"""verdict.py: a fault errors a trial whatever its grade; then spend; then the grade."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_webbench.grading import Grade
from pytest_webbench.grading.page_state import PageState
from pytest_webbench.results.records import BrowserCalls, Tokens
from pytest_webbench.trial.harbor_run import AgentOutcome
from pytest_webbench.grading.verdict import FAULT_CAUSE, ModelEvidence, decide

PASSED = Grade(True, None, "answer matches")
FAILED = Grade(False, "wrong_answer", "price: expected 17.49, got 12")
BLOCK = PageState(url="https://x/", title="Just a moment...", status=403, markers=["cloudflare"])
ERROR_PAGE = PageState(url="https://x/", title="Shop", status=503)
FINE = PageState(url="https://x/", title="Shop", status=200)


def outcome(**changes) -> AgentOutcome:
    base = dict(harbor_trial_dir=Path("/x"), instruction="", answer_raw=b"{}", agent_sec=1.0, trial_sec=2.0,
                tokens=Tokens(cost_usd=0.1), exception=None)
    return AgentOutcome(**{**base, **changes})


CRASHED = outcome(exception="NonZeroAgentExitCodeError: exit 137")
FAULTS = [
    # (what went wrong, decide's arguments for it, the stop reason): each with the harness's own
    # evidence that the agent did not cause it
    ("browser lost before any call", dict(lost="the session's Chromium exited", calls=BrowserCalls()), "browser_crashed"),
    ("upstream failed every call", dict(calls=BrowserCalls(forwarded=2, upstream_failures=2)), "upstream_error"),
    ("harness's agent run failed", dict(outcome=CRASHED, model=None), "agent_error"),
    ("CLI died before its model answered", dict(outcome=CRASHED, model=ModelEvidence(0, 0)), "agent_error"),
    ("the provider refused the agent", dict(outcome=CRASHED, model=ModelEvidence(3, 1)), "agent_error"),
    ("left on a bot block", dict(page=BLOCK), "bot_block"),
    ("left on an error page", dict(page=ERROR_PAGE), "site_error"),
    ("model API's usage unreadable", dict(model_fault="the model API's usage could not be read: -5"), "model_error"),
    ("Harbor could not put the verifier's tests in", dict(grade=Grade(False, "verifier_error", "AddTestsDirError"),
                                                          outcome=outcome(verifier_harness_fault=True)), "verifier_error"),
]
# the same faults where the agent could have caused them from inside its walls: failed, flagged
AGENT_FAULTS = [
    ("browser lost after the agent's calls", dict(lost="the session's Chromium exited", calls=BrowserCalls(forwarded=3)),
     "browser_crashed"),
    ("upstream failed after answering", dict(calls=BrowserCalls(forwarded=3, upstream_failures=1)), "upstream_error"),
    ("the agent's CLI died on its own", dict(outcome=CRASHED, model=ModelEvidence(3, 0)), "agent_error"),
    ("a link for an answer file", dict(outcome=outcome(output_refused="the answer file was a link")), "output_refused"),
    ("the verifier failed on what it left", dict(grade=Grade(False, "verifier_error", "no reward written")), "verifier_error"),
]


@pytest.mark.parametrize("grade", [PASSED, FAILED], ids=["passed", "failed"])
@pytest.mark.parametrize("fault, arguments, reason", FAULTS, ids=[f[0] for f in FAULTS])
def test_a_fault_the_harness_saw_errors_the_trial_whatever_its_grade(fault, arguments, reason, grade):
    given = dict(outcome=outcome(), grade=grade, calls=BrowserCalls(forwarded=3), lost=None, page=FINE, spend_limit=1.0)
    verdict = decide(**{**given, **arguments})
    assert (verdict.outcome, verdict.stop_reason, verdict.reward, verdict.flag) == ("errored", reason, 0.0, None)
    assert arguments.get("grade", grade).detail in verdict.detail  # the grade is kept for the reader, not counted


@pytest.mark.parametrize("grade", [PASSED, FAILED], ids=["passed", "failed"])
@pytest.mark.parametrize("fault, arguments, reason", AGENT_FAULTS, ids=[f[0] for f in AGENT_FAULTS])
def test_a_fault_the_agent_could_cause_fails_it_flagged_whatever_its_grade(fault, arguments, reason, grade):
    """An errored trial leaves the paired tests: an agent that could error its own trials could
    drop the pairs it was losing. So a fault it could have caused is its failure."""
    given = dict(outcome=outcome(), grade=grade, calls=BrowserCalls(forwarded=3), lost=None, page=FINE, spend_limit=1.0)
    verdict = decide(**{**given, **arguments})
    assert (verdict.outcome, verdict.stop_reason, verdict.reward) == ("failed", reason, 0.0)
    assert verdict.flag == f"fault charged to the agent: {reason}" and verdict.detail


def test_every_errored_stop_reason_says_who_it_is_put_down_to():
    from typing import get_args

    from pytest_webbench.results.records import StopReason

    errored_reasons = {"backend_error", "error_before_grading", "worker_crashed", "judge_error", "verifier_error",
                       "model_error", "bot_block", "site_error", "browser_crashed", "upstream_error", "output_refused",
                       "agent_error"}
    assert set(FAULT_CAUSE) == errored_reasons and errored_reasons <= set(get_args(StopReason))


def test_without_a_fault_spend_then_the_grade_decide():
    ok = dict(calls=BrowserCalls(forwarded=3), lost=None, page=FINE, spend_limit=1.0)
    assert decide(outcome(), PASSED, **ok).outcome == "passed"
    assert (decide(outcome(), FAILED, **ok).outcome, decide(outcome(), FAILED, **ok).stop_reason) == ("failed", "wrong_answer")
    over = decide(outcome(tokens=Tokens(cost_usd=1.5)), PASSED, **ok)
    assert (over.outcome, over.stop_reason) == ("failed", "over_spend")  # never a pass
    timed_out = decide(outcome(scored_note="AgentTimeoutError: 600 s"), Grade(False, "no_answer", "no answer"), **ok)
    assert (timed_out.outcome, timed_out.stop_reason) == ("failed", "agent_timeout")
    assert decide(outcome(), PASSED, **{**ok, "page": None}).outcome == "passed"  # an unreadable page is no fault
