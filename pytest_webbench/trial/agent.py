"""The agent's run in one trial: a one-trial Harbor run through the proxy and the gateway, the
browser handed back to the harness when it stops, and what its record is flagged with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..design.suite import TrialSpec
from ..planning.state import WebbenchState
from ..results.records import harbor_folder
from ..runners import runner_spec

if TYPE_CHECKING:
    from .browser_session import BrowserSessionHandle
    from .harbor_run import AgentOutcome
    from .proxy_route import ProxyHandle


def _trial_dir(st: WebbenchState, spec: TrialSpec):
    return harbor_folder(st.experiment_dir, spec.key.arm, spec.trial_id)


class AgentRunner:
    def __init__(self, st: WebbenchState, spec: TrialSpec, browser: BrowserSessionHandle, proxy: ProxyHandle, gateway=None):
        self.st, self.spec, self.browser, self.proxy, self.gateway = st, spec, browser, proxy, gateway
        self.outcome: AgentOutcome | None = None
        self.trace: dict | None = None  # the browser trace's file and URLs (records.BrowserTrace)
        self.grades = runner_spec(st.options.runner).grades  # what its trials are graded by

    def run(self) -> AgentOutcome:
        from .harbor_run import run_harbor_trial

        runner = runner_spec(self.st.options.runner)
        timeout = self.spec.task.timeout_sec + 120
        self.outcome = self.browser.run(
            run_harbor_trial(self.st.options, runner, self.spec, self.browser, self.proxy, self.st.experiment_dir,
                             self.gateway),
            timeout=timeout,
        )
        self.browser.end_agent_code()
        # The trace ends as the agent stopped (the harness's own screenshot and reads are not the
        # agent's steps, and would double its last frames); then the page as the agent left it,
        # before a page check moves it.
        if self.st.options.trace:
            self.trace = self.browser.save_trace(_trial_dir(self.st, self.spec))
        self.browser.save_screenshot(_trial_dir(self.st, self.spec))
        return self.outcome

    def flags(self) -> list[str]:
        """What the record flags: tool calls outside the browser tools that reached the site, the
        backend or the task's files (read from the gateway's record, the transcript of record);
        where the CLI's own trajectory claims what the gateway never saw; the agent's files the
        harness would not copy out; replies the gateway had to count from their bytes."""
        from ..gateway.wiring import MODEL_LOG
        from ..grading.trajectory_scan import scan_calls, targets_for
        from ..grading.transcript import disagreements, read_transcript

        if self.outcome is None:
            return []
        services = self.browser.services
        targets = [
            targets_for("the site", [services.site_urls.get(self.spec.task.meta.site, ""), self.browser.start_url]),
            targets_for("the browser backend", [services.backend_mcp_url, services.proxy_base_url]),
            targets_for("the task's files", paths=[str(self.spec.task.path), str(self.st.suite.path)]),
        ]
        flags = [f"the harness did not copy out {refused}" for refused in self.outcome.files_refused]
        if self.trace and self.trace.get("bounded"):
            flags.append(self.trace["bounded"])
        if self.outcome.forks_refused:
            flags.append(f"the agent's commands met their seal's process limit: {self.outcome.forks_refused} fork(s) refused")
        transcript = read_transcript(_trial_dir(self.st, self.spec) / MODEL_LOG)
        if transcript is None:  # no model behind this runner: its own steps are all there is
            calls = [{"name": c.get("function_name"), "arguments": c.get("arguments")}
                     for step in self.outcome.trajectory_steps for c in step.get("tool_calls") or [] if isinstance(c, dict)]
            return flags + scan_calls(calls, targets)
        flags += scan_calls(transcript.calls, targets) + disagreements(transcript, self.outcome.trajectory_steps)
        if transcript.estimated:
            flags.append(f"{transcript.estimated} model repl(ies) were not metered whole: charged their worst case")
        flags += [f"the gateway refused a request: {why}"[:300] for why in transcript.refused_requests[:5]]
        return flags

    def turns(self) -> int | None:
        """Model turns as the gateway counted them (None without a gateway)."""
        from ..gateway.wiring import MODEL_LOG
        from ..grading.transcript import read_transcript

        transcript = read_transcript(_trial_dir(self.st, self.spec) / MODEL_LOG)
        return transcript.turns if transcript is not None else None
