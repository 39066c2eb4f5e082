"""A trial's outcome and stop reason, decided in one place.

The rules, in order: a fault (of the browser, its server, the agent's run, or the site: a bot block
or an error page) ends the trial whatever its grade; a request the model gateway refused at the
trial's cap, or spend over the task's limit, fails it; then the grade decides. Errors before
grading are classified by the exception's type (a table, as Harbor's error policy does), never by
searching a message's text.

A fault errors the trial only on the harness's own evidence that the agent did not cause it
(`charged_to_agent`): an errored trial leaves the paired tests, so a fault an agent could cause
from inside its walls (a link for an answer file, its own CLI killed, its browser crashed by its
own calls) would let it drop the pairs it was losing. Such a fault fails the trial, flagged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from . import Grade
    from .page_state import PageState
    from ..results.records import BrowserCalls, RunManifest, Tokens, TrialRecord


class AgentOutcome(Protocol):
    """What the verdict reads of the agent's run (trial/harbor_run.py's AgentOutcome)."""

    exception: str | None  # the run failed (auth, rate limit, crash)
    scored_note: str | None  # it ended on its own limits (time, context, output): still graded
    output_refused: str | None  # its answer file was a link, special or too large
    tokens: Tokens
    verifier_harness_fault: bool  # a task verifier's failure was on the harness's side


@dataclass(frozen=True)
class Verdict:
    outcome: str
    stop_reason: str | None
    reward: float
    detail: str
    flag: str | None = None  # a fault put down to the agent: flagged on the record

    def fields(self) -> dict:
        return dict(outcome=self.outcome, stop_reason=self.stop_reason, reward=self.reward, detail=self.detail)


@dataclass(frozen=True)
class ModelEvidence:
    """What the model gateway saw of a trial: the agent's requests, and the replies the provider
    failed or refused (never the gateway's own refusals)."""

    requests: int
    provider_failures: int


# Who each errored stop reason is put down to: "harness" (errored, always), or the evidence under
# which the agent could have caused it from inside its walls (then failed, flagged). docs/walls.md
# gives the same table.
FAULT_CAUSE = {
    "backend_error": "harness",  # the browser backend failed before the agent ran
    "error_before_grading": "harness",
    "worker_crashed": "harness",
    "judge_error": "harness",
    "verifier_error": "the agent, unless Harbor's side of it failed: the verifier ran on the answer and page it left",
    "model_error": "harness",  # the provider's usage could not be counted
    "bot_block": "harness",  # the harness's own fresh load of the page shows it (page_state.py)
    "site_error": "harness",
    "browser_crashed": "the agent, once a call of its reached the browser",
    "upstream_error": "the agent, once the browser server answered a call of its",
    "output_refused": "the agent: it wrote its answer file",
    "agent_error": "the agent, once its model answered it with no failure the gateway saw",
}


def charged_to_agent(reason: str, calls: BrowserCalls, model: ModelEvidence | None, verifier_harness_fault: bool = False) -> bool:
    """Whether the agent could have caused this fault, by the harness's own evidence."""
    if reason == "verifier_error":  # an answer or page that makes the verifier fail, hang or write no reward
        return not verifier_harness_fault
    if reason == "browser_crashed":
        return calls.forwarded > 0
    if reason == "upstream_error":
        return calls.forwarded > calls.upstream_failures
    if reason == "output_refused":
        return True
    if reason == "agent_error":  # a runner without the gateway is the harness's own code: its failure is ours
        return model is not None and model.requests > 0 and model.provider_failures == 0
    return False


def _error_policy() -> list[tuple[type[BaseException], str]]:
    """Exception type -> stop reason for a trial that broke before it could be graded; the first
    match (by isinstance) wins, anything else is `error_before_grading`."""
    from ..browsers.base import BackendError

    return [(BackendError, "backend_error")]


def error_before_grading(exc: BaseException | None, detail: str) -> Verdict:
    reason = next((r for kind, r in _error_policy() if isinstance(exc, kind)), "error_before_grading")
    return Verdict("errored", reason, 0.0, detail[:4000])


def decide(outcome: AgentOutcome, grade: Grade, calls: BrowserCalls, lost: str | None, page: PageState | None,
           spend_limit: float, capped: str | None = None, model_fault: str | None = None,
           model: ModelEvidence | None = None) -> Verdict:
    """The outcome and its stop reason. A fault ends the trial whatever its grade: a lost browser,
    a browser server that failed a call, a failed agent run, or a bot-block or error page the agent
    was left on. Were a fault to end only failed trials, the arm with more faults would lose
    failures from the paired tests and never passes: a bias. It errors the trial unless the agent
    could have caused it (`charged_to_agent`), when it fails it, flagged. Then spend, then the grade.
    `model`: what the gateway saw (None: the runner calls no model through it)."""
    def errored(reason: str, why: str) -> Verdict:
        graded = "" if why == grade.detail else f"; the grade, not counted: {grade.detail}"
        if charged_to_agent(reason, calls, model, getattr(outcome, "verifier_harness_fault", False)):
            return Verdict("failed", reason, 0.0, f"{why} (the agent could have caused it: {FAULT_CAUSE[reason]}){graded}",
                           flag=f"fault charged to the agent: {reason}")
        return Verdict("errored", reason, 0.0, f"{why}{graded}")

    if lost:
        return errored("browser_crashed", lost)
    if calls.upstream_failures:
        return errored("upstream_error", f"the browser server failed {calls.upstream_failures} call(s)")
    if model_fault:  # the gateway read a usage from the model API it could not count: spend unknown
        return errored("model_error", model_fault)
    if grade.stop_reason == "judge_error":  # the grader failed: nothing measured the agent
        return Verdict("errored", "judge_error", 0.0, grade.detail)
    if grade.stop_reason == "verifier_error":
        return errored("verifier_error", grade.detail)
    if capped:  # the gateway refused a model request at the trial's cap: the agent's run ended there
        return Verdict("failed", "over_spend", 0.0, f"the model gateway stopped the agent: {capped}; {grade.detail}")
    if outcome.output_refused:  # the answer file was a link, a special file or too large: nothing to grade
        return errored("output_refused", outcome.output_refused)
    if outcome.exception:
        return errored("agent_error", outcome.exception)
    if page is not None and page.label != "ok":
        return errored(page.label, f"the agent was left on a {page.describe()}")
    if outcome.tokens.cost_usd is not None and outcome.tokens.cost_usd > spend_limit:
        # Over the task's spend limit is never a pass, whatever the answer.
        return Verdict("failed", "over_spend", 0.0,
                       f"spent ${outcome.tokens.cost_usd:.4f} of a ${spend_limit:.2f} limit; {grade.detail}")
    if grade.passed:
        return Verdict("passed", None, 1.0, grade.detail)
    reason = grade.stop_reason
    if reason in ("no_answer", "no_browser_call") and (outcome.scored_note or "").startswith("AgentTimeoutError"):
        reason = "agent_timeout"  # ran out of time before answering: still scored, it had its time
    return Verdict("failed", reason, 0.0, grade.detail)


def worker_crash_record(manifest: RunManifest, trial_id: str, detail: str) -> TrialRecord | None:
    """The record of a trial whose xdist worker died while running it (SIGKILL, out of memory)."""
    from ..results.records import TrialRecord

    planned = next((t for t in manifest.trials if t.trial_id == trial_id), None)
    if planned is None:
        return None
    limits = manifest.task_limits[planned.task]
    return TrialRecord(
        **planned.model_dump(), experiment_id=manifest.experiment_id, runner=manifest.runner, model=manifest.model,
        grading=limits.grading, placebo=limits.placebo, outcome="errored", stop_reason="worker_crashed",
        detail=f"the pytest-xdist worker running it died: {detail[-1000:]}", worker="controller",
    )
