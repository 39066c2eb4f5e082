"""The trial's fixtures: services per process, and per trial a browser session, a proxy route, the
agent runner and the recorder that writes the trial's record whatever happens."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .pairing import TrialKey
from .record_index import write_trial_record
from .records import Tokens, TrialRecord, record_undeleted_browser, supersede_trial_dir, trial_record_path
from .runners import runner_spec
from .state import STATE_KEY, WebbenchState, state
from .suite import TrialSpec

if TYPE_CHECKING:  # the trial machinery (web servers, HTTP clients) loads when the first trial runs,
    # so planning a run (--collect-only) stays fast: benchmarks/collection_scale.py
    from .grading import Grade
    from .run import RunServices
    from .trial import AgentOutcome, BrowserSessionHandle, ProxyHandle

SCREENSHOT = "final-screenshot.png"


@pytest.fixture(scope="session")
def webbench_services(request):
    from .run import RunServices

    st = state(request.config)
    services = RunServices.start(st.suite, st.options.browser, st.options)
    yield services
    services.close()


@pytest.fixture
def webbench_trial(request) -> TrialSpec:
    return state(request.config).specs[request.param]


def _trial_dir(st: WebbenchState, spec: TrialSpec) -> Path:
    return st.experiment_dir / "jobs" / spec.key.arm / spec.trial_id


@pytest.fixture
def browser_session(request, webbench_services: RunServices, webbench_trial: TrialSpec):
    from .trial import BrowserSessionHandle, open_browser_session

    st = state(request.config)
    supersede_trial_dir(st.experiment_dir, _trial_dir(st, webbench_trial))  # a rerun starts clean
    session_id = f"{st.options.experiment_id}-{webbench_trial.trial_id}"
    start_url = webbench_services.site_urls[webbench_trial.task.meta.site] + webbench_trial.task.meta.start_path
    handle = BrowserSessionHandle(session_id, start_url, webbench_services)
    try:
        handle.run(open_browser_session(webbench_services, webbench_trial, session_id, start_url, st.options.trace))
        yield handle
    finally:
        handle.save_screenshot(_trial_dir(st, webbench_trial) / SCREENSHOT)  # if the agent never ran
        try:
            handle.run(webbench_services.backend.delete_session(session_id), timeout=60)
        except Exception as exc:  # noqa: BLE001 - whatever went wrong, a billed browser must not be forgotten
            if webbench_services.backend.billed:  # swept again at the run's end; the report lists what is left
                record_undeleted_browser(st.experiment_dir, session_id, f"{type(exc).__name__}: {exc}")


@pytest.fixture
def mcp_proxy(request, webbench_services: RunServices, webbench_trial: TrialSpec, browser_session):
    from .trial import open_proxy_route

    handle = open_proxy_route(webbench_services, webbench_trial, browser_session.session_id, _trial_dir(state(request.config), webbench_trial))
    try:
        yield handle
    finally:
        session = webbench_services.routes.remove(webbench_trial.trial_id)
        if session is not None:
            webbench_services.loop.run(session.aclose(), timeout=30)


@pytest.fixture
def model_gateway(request, webbench_services: RunServices, webbench_trial: TrialSpec, browser_session):
    """The trial's route through the model gateway, for runners that call a model (None otherwise)."""
    st = state(request.config)
    runner = runner_spec(st.options.runner)
    if not runner.uses_gateway:
        yield None
        return
    from .gateway.wiring import model_price, open_gateway_route

    model = runner.check_model(st.options.model)
    meta = webbench_trial.task.meta
    handle = open_gateway_route(
        webbench_services.gateway, webbench_services.proxy_base_url, webbench_trial.trial_id, model,
        st.options.model_base_url, model_price(model, st.options.model_price, st.options.allow_unpriced),
        meta.spend_limit_usd, meta.token_limit, _trial_dir(st, webbench_trial), api=runner.api_for(model))
    try:
        yield handle
    finally:
        webbench_services.gateway.remove(webbench_trial.trial_id)


class AgentRunner:
    def __init__(self, st: WebbenchState, spec: TrialSpec, browser: BrowserSessionHandle, proxy: ProxyHandle, gateway=None):
        self.st, self.spec, self.browser, self.proxy, self.gateway = st, spec, browser, proxy, gateway
        self.outcome: AgentOutcome | None = None
        self.trace: dict | None = None  # the browser trace's file and URLs (records.BrowserTrace)
        self.grades = runner_spec(st.options.runner).grades  # what its trials are graded by

    def run(self) -> AgentOutcome:
        from .trial import run_harbor_trial

        runner = runner_spec(self.st.options.runner)
        timeout = self.spec.task.timeout_sec + 120
        self.outcome = self.browser.run(
            run_harbor_trial(self.st.options, runner, self.spec, self.browser, self.proxy, self.st.experiment_dir,
                             self.gateway),
            timeout=timeout,
        )
        self.browser.end_agent_code()
        # the page as the agent left it, before a page check moves it; the trace ends here too
        self.browser.save_screenshot(_trial_dir(self.st, self.spec) / SCREENSHOT)
        if self.st.options.trace:
            self.trace = self.browser.save_trace(_trial_dir(self.st, self.spec))
        return self.outcome

    def flags(self) -> list[str]:
        """What the record flags: tool calls outside the browser tools that reached the site, the
        backend or the task's files (read from the gateway's record, the transcript of record);
        where the CLI's own trajectory claims what the gateway never saw; the agent's files the
        harness would not copy out; replies the gateway had to count from their bytes."""
        from .gateway.wiring import MODEL_LOG
        from .grading.trajectory_scan import scan_calls, targets_for
        from .grading.transcript import disagreements, read_transcript

        if self.outcome is None:
            return []
        services = self.browser.services
        targets = [
            targets_for("the site", [services.site_urls.get(self.spec.task.meta.site, ""), self.browser.start_url]),
            targets_for("the browser backend", [services.backend_mcp_url, services.proxy_base_url]),
            targets_for("the task's files", paths=[str(self.spec.task.path), str(self.st.suite.path)]),
        ]
        flags = [f"the harness did not copy out {refused}" for refused in self.outcome.files_refused]
        transcript = read_transcript(_trial_dir(self.st, self.spec) / MODEL_LOG)
        if transcript is None:  # no model behind this runner: its own steps are all there is
            calls = [{"name": c.get("function_name"), "arguments": c.get("arguments")}
                     for step in self.outcome.trajectory_steps for c in step.get("tool_calls") or [] if isinstance(c, dict)]
            return flags + scan_calls(calls, targets)
        flags += scan_calls(transcript.calls, targets) + disagreements(transcript, self.outcome.trajectory_steps)
        if transcript.estimated:
            flags.append(f"{transcript.estimated} model repl(ies) carried no usage: counted from their bytes")
        flags += [f"the gateway refused a request: {why}"[:300] for why in transcript.refused_requests[:5]]
        return flags

    def turns(self) -> int | None:
        """Model turns as the gateway counted them (None without a gateway)."""
        from .gateway.wiring import MODEL_LOG
        from .grading.transcript import read_transcript

        transcript = read_transcript(_trial_dir(self.st, self.spec) / MODEL_LOG)
        return transcript.turns if transcript is not None else None


@pytest.fixture
def agent_runner(request, webbench_trial, browser_session, mcp_proxy, model_gateway) -> AgentRunner:
    return AgentRunner(state(request.config), webbench_trial, browser_session, mcp_proxy, model_gateway)


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
            arm=key.arm, pair_id=key.pair_id, pair_position=self.spec.pair_position, runner=self.st.options.runner,
            model=self.st.options.model, grading=meta.grading, placebo=meta.placebo, started_at=self.started_at,
        )

    def record(self, outcome: AgentOutcome, grade: Grade, calls, page_value, flags: list[str] | None = None,
               lost: str | None = None, page=None, gateway=None, trace: dict | None = None,
               gateway_turns: int | None = None, walls=None) -> TrialRecord:
        from .trial import record_reward_in_harbor
        from .verdict import decide

        meter = gateway.meter if gateway is not None else None
        capped = (meter.over_cap() or "a request past the cap") if meter is not None and meter.refused else None
        if meter is not None:  # the gateway's own count, the same way for every runner; the CLI's kept beside it
            tokens = Tokens(input=meter.usage.input, cached=meter.usage.cached, output=meter.usage.output,
                            reasoning=meter.usage.reasoning, turns=gateway_turns, source="gateway",
                            cost_usd=round(meter.cost_usd, 8) if meter.price is not None else None)
        else:
            tokens = outcome.tokens.model_copy(update={"turns": outcome.turns})
        checked = outcome if meter is None else replace(outcome, tokens=tokens)
        verdict = decide(checked, grade, calls, lost, page, self.spend_limit, capped).fields()
        if outcome.scored_note and not outcome.exception:
            verdict["detail"] = f"{verdict['detail']} (the agent's run ended: {outcome.scored_note[:500]})"
        raw = outcome.answer_raw.decode("utf-8", errors="replace")[:10000] if outcome.answer_raw else None
        record = TrialRecord(
            **self.base(), **verdict, answer=grade.answer, answer_raw=raw, expected=grade.expected,
            page_value=page_value, instruction=outcome.instruction,
            timings={"trial_sec": outcome.trial_sec, "agent_sec": outcome.agent_sec, "tool_sec": calls.tool_sec,
                     "model_sec": round(meter.model_sec, 6) if meter is not None else None},
            tokens=tokens, tokens_cli=outcome.tokens.model_copy(update={"turns": outcome.turns}) if meter is not None else None,
            model_requests=meter.requests if meter is not None else None, model_refused=meter.refused if meter else 0,
            calls=calls, flags=flags or [], trace=trace, walls=walls,
            harbor_trial_dir=str(outcome.harbor_trial_dir.relative_to(self.st.experiment_dir)),
        )
        record_reward_in_harbor(outcome.harbor_trial_dir, record.reward)
        write_trial_record(self.st.experiment_dir, record, then=self._pages)  # its pages before its index line
        self.written = record
        return record

    def _pages(self, record: TrialRecord) -> bool:
        from .viewer.pages import write_trial_pages

        try:
            write_trial_pages(self.st.experiment_dir, record)
            return True
        except Exception as exc:  # noqa: BLE001 - a page the report can build later never fails a trial
            print(f"webbench: the page of {record.trial_id} was not written ({type(exc).__name__}: {exc}); "
                  "the report will build it")
            return False

    def record_error(self, exc: BaseException | None, detail: str) -> None:
        """The trial broke before grading: it stays in the denominator, its reason by the error's type."""
        from .verdict import error_before_grading

        record = TrialRecord(**self.base(), **error_before_grading(exc, detail).fields())
        write_trial_record(self.st.experiment_dir, record)
        self.written = record  # its page is the report's to build: the screenshot comes at teardown


@pytest.fixture
def trial_recorder(request, webbench_trial) -> TrialRecorder:
    recorder = TrialRecorder(state(request.config), webbench_trial)
    request.node.stash[RECORDER_KEY] = recorder
    return recorder


RECORDER_KEY = pytest.StashKey[TrialRecorder]()


def record_if_missing(item: pytest.Item, report: pytest.TestReport, exc: BaseException | None = None) -> None:
    """Called from makereport: a trial that failed without a record (setup error, crash) gets one."""
    if report.passed or STATE_KEY not in item.config.stash:
        return
    spec_id = getattr(getattr(item, "callspec", None), "params", {}).get("webbench_trial")
    if spec_id is None:
        return
    st = state(item.config)
    recorder = item.stash.get(RECORDER_KEY, None) or TrialRecorder(st, st.specs[spec_id])
    item.stash[RECORDER_KEY] = recorder  # so the report columns find the error record too
    if recorder.written is None and not trial_record_path(st.experiment_dir, spec_id).exists():
        recorder.record_error(exc, f"{report.when}: {report.longreprtext[-3000:]}")


