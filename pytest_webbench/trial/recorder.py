"""The trial's record, written whatever happens: from the verdict when the trial was graded, from
the error when it broke before (and from makereport, for a trial that failed without one)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from ..design.pairing import TrialKey
from ..design.suite import TrialSpec
from ..planning.state import STATE_KEY, WebbenchState, item_key, state
from ..results.record_index import write_trial_record
from ..results.records import Tokens, TrialRecord, trial_record_path
from ..results.well_formed import well_formed

if TYPE_CHECKING:
    from ..grading import Grade
    from .harbor_run import AgentOutcome


class TrialRecorder:
    def __init__(self, st: WebbenchState, spec: TrialSpec):
        self.st, self.spec = st, spec
        self.written: TrialRecord | None = None
        self.started_at = datetime.now(UTC).isoformat()
        self.spend_limit = spec.task.meta.spend_limit_usd

    def base(self) -> dict:
        key: TrialKey = self.spec.key
        meta = self.spec.task.meta
        return dict(
            experiment_id=self.st.options.experiment_id, trial_id=key.trial_id, task=key.task, attempt=key.attempt,
            arm=key.arm, pair_id=self.spec.pair_id, pair_position=self.spec.pair_position, runner=self.st.options.runner,
            model=self.st.options.model, grading=meta.grading, placebo=meta.placebo, started_at=self.started_at,
        )

    def record(self, outcome: AgentOutcome, grade: Grade, calls, page_value, flags: list[str] | None = None,
               lost: str | None = None, page=None, gateway=None, trace: dict | None = None,
               gateway_turns: int | None = None, walls=None, judge=None) -> TrialRecord:
        from .harbor_run import record_reward_in_harbor
        from ..grading.verdict import ModelEvidence, decide

        meter = gateway.meter if gateway is not None else None
        capped = (meter.over_cap() or "a request past the cap") if meter is not None and meter.refused else None
        if meter is not None:  # the gateway's own count, the same way for every runner; the CLI's kept beside it
            tokens = Tokens(input=meter.usage.input, cached=meter.usage.cached, output=meter.usage.output,
                            reasoning=meter.usage.reasoning, turns=gateway_turns, source="gateway",
                            cost_usd=round(meter.charged_usd, 8) if meter.price is not None else None)
        else:
            tokens = outcome.tokens.model_copy(update={"turns": outcome.turns})
        checked = outcome if meter is None else replace(outcome, tokens=tokens)
        model_fault = "; ".join(meter.faults)[:1000] if meter is not None and meter.faults else None
        evidence = ModelEvidence(meter.requests, meter.provider_failures) if meter is not None else None
        decided = decide(checked, grade, calls, lost, page, self.spend_limit, capped, model_fault, evidence)
        verdict = decided.fields()
        if decided.flag:
            flags = [*(flags or []), decided.flag]
        if outcome.scored_note and not outcome.exception:
            verdict["detail"] = f"{verdict['detail']} (the agent's run ended: {outcome.scored_note[:500]})"
        # the detail and flags quote what the agent wrote (a file's name, its trajectory's arguments)
        verdict["detail"], flags = well_formed(verdict["detail"]), well_formed(flags or [])
        raw = outcome.answer_raw.decode("utf-8", errors="replace")[:10000] if outcome.answer_raw else None
        from ..grading.judge import claims_success
        record = TrialRecord(
            **self.base(), **verdict, answer=grade.answer, answer_raw=raw, expected=grade.expected,
            page_value=page_value, instruction=outcome.instruction,
            timings={"trial_sec": outcome.trial_sec, "agent_sec": outcome.agent_sec, "tool_sec": calls.tool_sec,
                     "model_sec": round(meter.model_sec, 6) if meter is not None else None},
            tokens=tokens, tokens_cli=outcome.tokens.model_copy(update={"turns": outcome.turns}) if meter is not None else None,
            model_requests=meter.requests if meter is not None else None, model_refused=meter.refused if meter else 0,
            calls=calls, flags=flags or [], trace=trace, walls=walls, judge=judge, verifier_rewards=outcome.verifier_rewards,
            submissions=page_value.get("submissions") if self.spec.task.meta.request and isinstance(page_value, dict) else None,
            claims_done=claims_success(raw) if self.spec.task.meta.request else None, inbox=outcome.inbox,
            agent_tool_calls=sum(len(step.get("tool_calls") or []) for step in outcome.trajectory_steps)
            if outcome.trajectory_steps else None,
            harbor_trial_dir=str(outcome.harbor_trial_dir.relative_to(self.st.experiment_dir)),
        )
        record_reward_in_harbor(outcome.harbor_trial_dir, record.reward)
        self._write(record, then=self._pages)  # its pages before its index line
        self.written = record
        return record

    def _pages(self, record: TrialRecord) -> bool:
        from ..viewer.pages import write_trial_pages

        try:
            write_trial_pages(self.st.experiment_dir, record)
            return True
        except Exception as exc:  # noqa: BLE001 - a page the report can build later never fails a trial
            print(f"webbench: the page of {record.trial_id} was not written ({type(exc).__name__}: {exc}); "
                  "the report will build it")
            return False

    def _write(self, record: TrialRecord, then=None) -> None:
        """A record is written whole or not at all; a results disk that is full (or gone read-only)
        stops the run there, saying so, rather than failing every trial after it."""
        from ..results.claims import disk_full_message

        try:
            write_trial_record(self.st.experiment_dir, record, then=then)
        except OSError as exc:
            if (message := disk_full_message(exc, self.st.experiment_dir)) is None:
                raise
            pytest.exit(message, returncode=pytest.ExitCode.INTERRUPTED)

    def record_error(self, exc: BaseException | None, detail: str) -> None:
        """The trial broke before grading: it stays in the denominator, its reason by the error's type."""
        from ..grading.verdict import error_before_grading

        record = TrialRecord(**self.base(), **error_before_grading(exc, detail).fields())
        self._write(record)
        self.written = record  # its page is the report's to build: the screenshot comes at teardown


RECORDER_KEY = pytest.StashKey[TrialRecorder]()


def record_if_missing(item: pytest.Item, report: pytest.TestReport, exc: BaseException | None = None) -> None:
    """Called from makereport: a trial that failed without a record (setup error, crash) gets one."""
    if report.passed or STATE_KEY not in item.config.stash:
        return
    key = item_key(item)
    if key is None:
        return
    spec_id = key.trial_id
    st = state(item.config)
    recorder = item.stash.get(RECORDER_KEY, None) or TrialRecorder(st, st.specs[spec_id])
    item.stash[RECORDER_KEY] = recorder  # so the report columns find the error record too
    if recorder.written is None and not trial_record_path(st.experiment_dir, spec_id).exists():
        recorder.record_error(exc, f"{report.when}: {report.longreprtext[-3000:]}")
