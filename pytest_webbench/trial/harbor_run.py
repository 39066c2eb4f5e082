"""One trial's Harbor run: what Harbor receives (the task, the agent with the proxy as its only MCP
server and its gateway route, where it runs), the run itself, and what the harness takes from it:
the answer, the agent's files it refused, Harbor's result with our reward."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from ..design.arms import ANSWER_PATH, GIVEN_PATH, arm_instructions
from ..design.suite import TrialSpec
from ..grading.trajectory_scan import load_trajectory_steps
from ..planning.options import RunOptions
from ..results.records import Tokens
from ..runners import RunnerSpec
from .browser_session import BrowserSessionHandle
from .proxy_route import ProxyHandle


@dataclass
class AgentOutcome:
    harbor_trial_dir: Path
    instruction: str
    answer_raw: bytes | None
    agent_sec: float | None
    trial_sec: float
    tokens: Tokens
    exception: str | None  # the agent failed (auth, rate limit, crash): the trial is errored
    scored_note: str | None = None  # it ended on a time, context or output limit: still graded
    turns: int | None = None
    trajectory_steps: list[dict] = field(default_factory=list)  # Harbor's ATIF steps, for the trajectory scan
    # Files of the agent's the harness would not copy out (a link, a special file, too large), named
    files_refused: list[str] = field(default_factory=list)
    output_refused: str | None = None  # the answer file itself was refused: the trial is errored
    verifier_rewards: dict | None = None  # grading "verifier": the task's own verifier's rewards
    verifier_error: str | None = None  # ... or why it gave none
    verifier_harness_fault: bool = False  # ... and it was the harness's side that failed (VERIFIER_HARNESS_FAULTS)
    forks_refused: int = 0  # forks of the agent's commands its seal's process limit refused
    inbox: str | None = None  # the trial's e-mail account: its address and where it is read


# Harbor's exception types for runs that ended on the agent's own limits: these stay scored
# (work done before the end counts). Anything else (a rejected key, a rate limit, a crash, a
# setup failure) makes the trial errored and the run incomplete.
SCORED_ENDINGS = frozenset({
    "AgentTimeoutError", "ContextWindowExceededError", "OutputTokenExceededError", "AgentSafetyRefusalError",
    "SubmissionIntercepted",  # a write task's run ends at its first intercepted submission, as ClawBench's does
})
# Harbor's exception types for a task verifier that gave no reward (grading "verifier").
VERIFIER_FAILURES = frozenset({
    "RewardFileNotFoundError", "RewardFileEmptyError", "VerifierOutputParseError", "VerifierTimeoutError",
    "AddTestsDirError", "DownloadVerifierDirError",
})
PAGE_PATH = "/app/page.json"  # grading "verifier": the page the agent left, for the task's own verifier
MAX_PAGE_BYTES = 16 * 1024 * 1024
# Harbor's verifier failures on its own side (the tests not put in, its logs not copied out): the
# harness's fault; any other (no reward, a bad one, a timeout) the verifier met on what the agent left.
VERIFIER_HARNESS_FAULTS = frozenset({"AddTestsDirError", "DownloadVerifierDirError"})
PAGE_SNAPSHOT = "return {url: location.href, title: document.title, html: document.documentElement.outerHTML};"


async def _page_snapshot(browser) -> bytes:
    """The page as the agent left it (URL, title, HTML), read over the harness's own connection;
    an unreadable page is said so in the file (the verifier decides what that means)."""
    try:
        page = await browser.services.backend.evaluate(browser.session_id, PAGE_SNAPSHOT)
    except Exception as exc:
        page = {"error": f"the page could not be read: {exc}"}
    data = json.dumps(page).encode()
    if len(data) > MAX_PAGE_BYTES:
        return json.dumps({"error": f"the page is over {MAX_PAGE_BYTES} bytes as JSON: not given"}).encode()
    return data


async def _verify_apart(environment, trial_dir: Path, browser) -> None:
    """The task's verifier gets a workspace of its own (host.py `verify_apart`) holding only what
    it grades: the answer as the harness copied it out (bounded, no link followed) and the page."""
    await browser.services.backend.end_agent_code(browser.session_id)  # no code of the agent's shapes the page read
    answer, _ = read_answer_file(trial_dir / "artifacts" / "answer.json")
    graded = {PurePosixPath(PAGE_PATH).name: await _page_snapshot(browser)}
    if answer is not None:
        graded[PurePosixPath(ANSWER_PATH).name] = answer
    await environment.verify_apart(graded)


def _trial_context(spec: TrialSpec, browser: BrowserSessionHandle) -> dict:
    """What our own agents are told of the trial (never a real agent): the task, the arm, the
    browser, and the harness's addresses (the hostile runner probes them)."""
    services = getattr(browser, "services", None)
    urls = [services.backend_mcp_url, services.proxy_base_url] if services is not None else []
    return {"task_dir": str(spec.task.path), "arm": spec.key.arm, "browser_session_id": browser.session_id,
            "start_url": browser.start_url, "harness_urls": urls}


def _exit_ports(*urls: str | None) -> list[int]:
    return sorted({urlsplit(url).port for url in urls if url and urlsplit(url).port})


def _exit_host(url: str) -> str:
    host = urlsplit(url).hostname
    if not host:
        raise ValueError(f"the proxy's URL {url!r} names no host")
    return host


def _visible_paths(runner: RunnerSpec) -> list[str]:
    """The pinned CLIs' folder stays visible to the agent's commands wherever it lives."""
    if runner.cli is None:
        return []
    from ..runners.install import npm_prefix

    return [str(npm_prefix())]


def _agent_env(runner: RunnerSpec) -> dict[str, str]:
    """The preset's environment, with the pinned CLI (and the Node it needs) first on PATH."""
    env = dict(runner.env)
    if runner.cli is not None:
        from ..runners.install import bin_path, node_bin_dir

        first = [str(bin_path(runner.cli).parent)] + ([str(node_bin_dir(runner.cli))] if runner.cli.node else [])
        env["PATH"] = os.pathsep.join([*first, os.environ.get("PATH", "/usr/bin:/bin")])
    return env


def harbor_trial_config(options: RunOptions, runner: RunnerSpec, spec: TrialSpec, browser: BrowserSessionHandle,
                        proxy: ProxyHandle, experiment_dir: Path, gateway=None):
    """What Harbor receives for one trial: the task, the agent with the proxy as its only MCP
    server, and where it runs (our host environment, or a Harbor sandbox type passed through)."""
    from harbor.models.environment_type import EnvironmentType
    from harbor.models.trial.config import (
        AgentConfig, ArtifactConfig, EnvironmentConfig, TaskConfig, TrialConfig, VerifierConfig,
    )

    on_host = options.environment == "host"
    # With the gateway, the agent's provider is its trial route and its key the trial's token: the
    # real key stays with the harness.
    base_url = gateway.url if gateway is not None else options.model_base_url
    agent_env = _agent_env(runner) if on_host else dict(runner.env)
    if gateway is not None:
        agent_env[gateway.key_variable] = gateway.token
    if on_host:
        environment = EnvironmentConfig(
            import_path="pytest_webbench.environments.host:HostEnvironment",
            # The agent's only way out of its seal: the listener serving its proxy and gateway routes.
            kwargs={"exit_ports": _exit_ports(proxy.url, gateway.url if gateway is not None else None),
                    "visible_paths": _visible_paths(runner),
                    # the reference and nop runners run no command of an agent's: nothing to seal
                    "allow_unsealed": options.allow_unsealed or not runner.agent_commands},
        )
    else:  # a sandbox holds nothing of the suite or the results: only the task's instruction goes in
        environment = EnvironmentConfig(type=EnvironmentType(options.environment))
    return TrialConfig(
        task=TaskConfig(path=spec.task.path),
        trial_name=spec.trial_id,
        trials_dir=experiment_dir / "jobs" / spec.key.arm,
        agent=AgentConfig(
            import_path=runner.agent,
            model_name=runner.check_model(options.model),
            base_url=base_url,
            model_api_format=runner.endpoint_api_format if base_url else None,
            mcp_servers=[{"name": "browser", "transport": "streamable-http", "url": proxy.url}],
            # The run's one exit, added to the task's agent-phase policy (no-network in the suites):
            # the host of the listener serving the agent's proxy and gateway routes.
            extra_allowed_hosts=[_exit_host(proxy.url)],
            kwargs={**runner.options, **(_trial_context(spec, browser) if runner.takes_trial_context else {})},
            # the pinned CLI's folder is on this machine: a sandbox installs the same pin itself
            env=agent_env,
        ),
        environment=environment,
        # grading happens in the test body; a task graded by its own verifier has Harbor run it
        verifier=VerifierConfig(disable=spec.task.meta.grading != "verifier"),
        # the answer file, fetched from wherever the agent ran (a sandbox keeps it otherwise)
        artifacts=[ArtifactConfig(source=ANSWER_PATH, destination="answer.json")],
        extra_instructions=[arm_instructions(spec.key.arm, browser.session_id, browser.start_url)],
    )


async def run_harbor_trial(
    options: RunOptions, runner: RunnerSpec, spec: TrialSpec, browser: BrowserSessionHandle, proxy: ProxyHandle,
    experiment_dir: Path, gateway=None,
) -> AgentOutcome:
    """One Harbor trial; the verifier is off because grading happens in the test body, against
    the answer and the live page."""
    from harbor.trial.trial import Trial

    config = harbor_trial_config(options, runner, spec, browser, proxy, experiment_dir, gateway)
    instruction_extra = config.extra_instructions[0]
    jobs_dir = config.trials_dir
    started = time.perf_counter()
    trial = await Trial.create(config)
    from harbor.trial.hooks import TrialEvent

    if (given := browser.given_dir) is not None:  # the task's, or this trial's own where it has an e-mail account
        # the files the task gives its agent, whatever runs it, once its environment is up and before it starts
        async def give_the_files(_event) -> None:
            await trial.agent_environment.upload_dir(str(given), GIVEN_PATH)

        trial.add_hook(TrialEvent.AGENT_START, give_the_files)
    trial_dir = jobs_dir / spec.trial_id
    ending = getattr(trial.agent_environment, "end_at_submission", None)
    if spec.task.meta.request is not None and not spec.task.meta.answer and ending is not None:
        # ClawBench ends a run at its first intercepted submission: its time and spend stop there too
        browser.services.backend.on_submission(browser.session_id, ending)
    if spec.task.meta.grading == "verifier":  # refused at configure for any environment but the host's
        async def verify_apart(_event) -> None:
            await _verify_apart(trial.agent_environment, trial_dir, browser)

        trial.add_hook(TrialEvent.VERIFICATION_START, verify_apart)
    result = await trial.run()
    trial_sec = time.perf_counter() - started
    answer_path = trial_dir / "artifacts" / "answer.json"
    agent_result = result.agent_result
    timing = result.agent_execution
    agent_sec = None
    if timing is not None and timing.started_at and timing.finished_at:
        agent_sec = (timing.finished_at - timing.started_at).total_seconds()
    exception = scored_note = verifier_error = None
    if result.exception_info is not None:
        text = failure_text(result.exception_info)
        if result.exception_info.exception_type in VERIFIER_FAILURES:
            verifier_error = text  # graded verifier_error; whose fault it is, verdict.py decides
        elif result.exception_info.exception_type in SCORED_ENDINGS:
            scored_note = text  # the agent ran out of time, context or output, or refused: graded as it stands
        else:
            exception = text
    if (signalled := getattr(trial.agent_environment, "verifier_signalled", None)) and verifier_error is None:
        verifier_error = f"the task's verifier did not finish: {'; '.join(signalled)[:500]}"  # its reward is none
    tokens = Tokens(
        input=getattr(agent_result, "n_input_tokens", None), cached=getattr(agent_result, "n_cache_tokens", None),
        output=getattr(agent_result, "n_output_tokens", None), cost_usd=getattr(agent_result, "cost_usd", None), source="cli",
    )
    steps = load_trajectory_steps(trial_dir / "agent" / "trajectory.json")  # read once: answer, turns, scan
    refused = read_refusals(trial_dir)
    answer_raw, too_large = read_answer_file(answer_path)
    if answer_raw is None and too_large is None:  # the final message: the gateway's record of it, where there is one
        answer_raw = final_reply(trial_dir) if gateway is not None else None
    answer_refused = too_large or next((why for path, why in refused if path == ANSWER_PATH), None)
    return AgentOutcome(
        harbor_trial_dir=trial_dir, instruction=spec.task.instruction + "\n\n" + instruction_extra,
        answer_raw=answer_raw if answer_raw is not None or gateway is not None else final_agent_message(steps),
        agent_sec=agent_sec, trial_sec=trial_sec, tokens=tokens, exception=exception, scored_note=scored_note,
        # model turns: the agent's steps, each one model response (None: no trajectory)
        turns=sum(1 for step in steps if step.get("source") == "agent") if steps else None,
        trajectory_steps=steps, files_refused=[f"{path}: {why}" for path, why in refused],
        output_refused=f"the answer file {ANSWER_PATH} was not read: {answer_refused}" if answer_refused else None,
        verifier_rewards=dict(result.verifier_result.rewards or {}) if result.verifier_result and not signalled else None,
        verifier_error=verifier_error,
        verifier_harness_fault=result.exception_info is not None
        and result.exception_info.exception_type in VERIFIER_HARNESS_FAULTS,
        forks_refused=getattr(trial.agent_environment, "forks_refused", 0),
        inbox=f"{account.email} ({account.service.provider})" if (account := getattr(browser, "inbox", None)) else None,
    )


MAX_ANSWER_BYTES = 1024 * 1024


_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
_RAISED = re.compile(r"([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Timeout|Failure|Refused)): ?(.*)")


def failure_text(info) -> str:
    """What failed, for the record, the report and the pages: an exception group (a TaskGroup's
    "unhandled errors") is replaced by its innermost cause, with the file and line that raised it,
    read from the traceback Harbor kept."""
    text = f"{info.exception_type}: {info.exception_message}"
    if "ExceptionGroup" not in info.exception_type:
        return text
    where, cause = None, None
    for raw in (info.exception_traceback or "").splitlines():
        line = raw.lstrip(" |+-").strip()
        if m := _FILE_LINE.search(line):
            where = f"{m.group(1)}:{m.group(2)}"
        elif (m := _RAISED.fullmatch(line)) and "ExceptionGroup" not in m.group(1):
            cause = (m.group(1), m.group(2), where)
    if cause is None:
        return text
    kind, message, at = cause
    return f"{kind}: {message}" + (f" (at {at})" if at else "") + f", inside {info.exception_type}"


def final_reply(trial_dir: Path) -> bytes | None:
    """The agent's final message as the model gateway passed it (the CLI's trajectory, which the
    agent can rewrite, is not read for it)."""
    from ..gateway.wiring import MODEL_LOG
    from ..grading.transcript import read_transcript

    transcript = read_transcript(trial_dir / MODEL_LOG)
    return transcript.final_text.encode() if transcript is not None and transcript.final_text else None


def read_answer_file(path: Path) -> tuple[bytes | None, str | None]:
    """The answer file as the harness copied it (a regular file of its own), and why it was not
    read if it was too large (MAX_ANSWER_BYTES)."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_ANSWER_BYTES + 1)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None, None
    if len(data) > MAX_ANSWER_BYTES:
        return None, f"over the {MAX_ANSWER_BYTES}-byte limit for an answer"
    return data, None


def read_refusals(trial_dir: Path) -> list[tuple[str, str]]:
    from ..environments.host import REFUSALS

    try:
        entries = json.loads((trial_dir / REFUSALS).read_text())
        return [(str(e["path"]), str(e["why"])) for e in entries]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def final_agent_message(steps: list[dict]) -> bytes | None:
    """The agent's last message in its ATIF trajectory: the answer when the agent replied with it
    but did not write answer.json (the instructions ask for both)."""
    for step in reversed(steps):
        message = step.get("message") if step.get("source") == "agent" else None
        if isinstance(message, list):
            message = "".join(text for part in message if isinstance(part, dict) and isinstance(text := part.get("text"), str))
        if isinstance(message, str) and message.strip():
            return message.strip().encode()
    return None


def record_reward_in_harbor(trial_dir: Path, reward: float) -> None:
    """Writes our grade into Harbor's result.json, so Harbor's tools see the same score."""
    from harbor.models.trial.result import TrialResult
    from harbor.models.verifier.result import VerifierResult

    from ..results.records import atomic_write

    path = trial_dir / "result.json"
    if not path.exists():
        return
    result = TrialResult.model_validate_json(path.read_text())
    result.verifier_result = VerifierResult(rewards={"reward": reward})
    atomic_write(path, result.model_dump_json(indent=2))
