"""What a run leaves on disk: the manifest and one record per trial.

These files are the only interface between running and reporting: the report is built from
them alone, so it can be re-rendered, merged and resumed. Every write is atomic (write, then
rename), and an experiment directory is claimed with one `mkdir`, so of two runs started with one
ID exactly one proceeds.
"""

from __future__ import annotations

import contextlib
import os
import threading
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from .decisions import SequentialPlan

# 2: a record's harbor_trial_dir is relative to the experiment directory (1: absolute), so a
# results folder can be moved, copied off a CI machine or merged.
RECORD_SCHEMA = 2
RecordSchema = Literal[1, 2]
Outcome = Literal["passed", "failed", "errored"]
StopReason = Literal[
    "wrong_answer", "no_answer", "bot_block", "site_error", "backend_error", "unreadable_page", "call_cap",
    "over_spend", "agent_error", "agent_timeout", "error_before_grading", "no_browser_call", "browser_crashed",
    "upstream_error", "worker_crashed", "output_refused", "wall_breached", "no_submission", "wrong_submission",
    "judge_error", "verifier_error", "model_error",
]


class JudgeVerdict(BaseModel):
    match: bool
    reason: str = ""


class JudgeRecord(BaseModel):
    """The LLM judge's verdicts on a write task's submission (grading/judge.py): ClawBench's strict
    and lenient rubrics; the lenient one grades."""

    model: str
    strict: JudgeVerdict | None = None
    lenient: JudgeVerdict | None = None
    error: str | None = None
    requests: int = 0  # through its gateway route
    cost_usd: float | None = None


class PlannedTrial(BaseModel):
    """Which trial: shared by the manifest's plan and each trial's record."""

    trial_id: str
    task: str
    attempt: int
    arm: str
    pair_id: str | None = None
    pair_position: int | None = None


def planned_trials(keys, run_id: str, attempts: int, paired: bool, lone_tasks=frozenset()) -> list[PlannedTrial]:
    """The plan's entries for these trials: a pair and its order where the run is paired and the
    task has pairs (a task in `lone_tasks` runs control alone)."""
    from ..design.pairing import pair_position

    # dicts validated as one list: 24 ms for 10,000 entries against 48 ms made one model at a time,
    # even unvalidated (model_construct), the largest part of writing the manifest
    return _planned_list().validate_python([
        {"trial_id": k.trial_id, "task": k.task, "attempt": k.attempt, "arm": k.arm,
         "pair_id": k.pair_id if paired and k.task not in lone_tasks else None,
         "pair_position": pair_position(k, run_id, attempts) if paired and k.task not in lone_tasks else None}
        for k in keys])


@cache
def _planned_list() -> TypeAdapter:
    return TypeAdapter(list[PlannedTrial])


class TaskLimits(BaseModel):
    grading: str
    turn_cap: int
    spend_limit_usd: float
    placebo: bool
    tool_batch: str | None
    timeout_sec: float
    shortcut: bool = True  # the batch offers a shortcut over control's tools (suite.WebbenchMeta)
    agree_on: list[str] = Field(default_factory=list)
    arms: list[str] | None = None  # the arms the task runs in, where not every arm of the run
    ungradable: bool = False  # a ClawBench placeholder case: reported apart, never as an arm's failure
    group: str | None = None
    judged: bool = False  # a write task its judge grades (ClawBench's cases): ClawBench's figures cover it

    def has_arm(self, arm: str) -> bool:
        return self.arms is None or arm in self.arms

    @property
    def paired(self) -> bool:
        """Its control and treatment run as pairs (suite.Task.paired, as the plan recorded it)."""
        return self.has_arm("control") and self.has_arm("treatment")


class RunManifest(BaseModel):
    schema_version: RecordSchema = RECORD_SCHEMA
    experiment_id: str
    created_at: str
    suite: str
    suite_path: str
    runner: str
    model: str | None
    runner_preset: dict[str, Any] = Field(default_factory=dict)  # the resolved preset: agent, CLI pin, options
    cli_version: str | None = None  # what is installed, as run
    model_base_url: str | None = None
    model_price: str | None = None  # --model-price, when given
    allow_unpriced: bool = False
    browser: str
    environment: str = "host"  # where agents ran: host, or a Harbor environment type
    trace: bool = True  # browser traces recorded (--no-trace turns them off)
    isolation: str | None = None  # the agents' walls: mount+net (sealed), none (unsealed), sandbox:<type>[+open] (manifest.py)
    attempts: int
    arms: list[str]
    paired: bool
    shard: str | None = None  # "I/N": this directory holds one shard's trials (merge them into one run)
    plan: list[str] | None = None  # a shard's: every shard's trial IDs in run order, so a merge knows what a missing one held
    sequential: SequentialPlan | None = None  # --sequential: the stopping rule (stopping.py)
    trials: list[PlannedTrial]
    broken_pairs: list[str] = Field(default_factory=list)
    task_limits: dict[str, TaskLimits]
    judge_model: str | None = None  # the judge of write tasks whose check does not decide (None: no such task)
    judge_named: bool | None = None  # given as --judge-model (else the run's own model, at its endpoint and price)
    judge_base_url: str | None = None
    case_set: str | None = None  # a ClawBench suite: the package's case set (clawbench-eval's version is in versions)
    ungradable: bool = False  # ... with its placeholder cases planned
    content_hashes: dict[str, str]
    git_revision: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)


class Timings(BaseModel):
    trial_sec: float = 0.0
    agent_sec: float | None = None
    model_sec: float | None = None  # the agent's time waiting on its model: the gateway's request durations
    tool_sec: float | None = None  # its time in browser calls: the proxy's forwarded calls


class Tokens(BaseModel):
    turns: int | None = None  # model responses, from the agent's trajectory
    input: int | None = None
    cached: int | None = None
    output: int | None = None
    cost_usd: float | None = None  # None: could not be priced
    reasoning: int | None = None  # part of output, where the API says
    source: Literal["gateway", "cli"] | None = None  # metered by the model gateway, or as the CLI reported


class BrowserCalls(BaseModel):
    forwarded: int = 0
    rejected: int = 0
    cap_hit: bool = False
    rejected_rules: dict[str, int] = Field(default_factory=dict)
    webmcp_invokes: dict[str, int] = Field(default_factory=dict)  # "injected:completed" -> n
    unreadable_log_lines: int = 0
    upstream_failures: int = 0  # calls the browser server failed to answer
    tool_sec: float = 0.0  # summed duration of the forwarded browser calls


class BrowserTrace(BaseModel):
    """What shows the trial's browser: Playwright's trace (local), Kernel's live view and replay."""
    file: str | None = None  # in the trial's Harbor folder: trace.zip, for `playwright show-trace`
    live_view_url: str | None = None
    replay_url: str | None = None
    error: str | None = None  # why the trace could not be had
    bounded: str | None = None  # what was left out of it to keep its bound (browsers/trace_zip.py): flagged


class Wall(BaseModel):
    """One route around the walls the hostile runner tried (runners/hostile.py, grading/walls.py)."""

    route: str  # what was tried, e.g. "shell: the harness's keys"
    status: Literal["held", "breached", "not probed"]
    evidence: str = ""  # what was seen: the proof of a breach, or what a held route answered


class TrialRecord(PlannedTrial):
    schema_version: RecordSchema = RECORD_SCHEMA
    experiment_id: str
    runner: str
    model: str | None = None
    grading: str
    placebo: bool = False
    outcome: Outcome
    stop_reason: StopReason | None = None
    reward: float = 0.0
    detail: str = ""
    answer: Any = None
    answer_raw: str | None = None
    expected: Any = None
    page_value: Any = None
    instruction: str = ""
    timings: Timings = Field(default_factory=Timings)
    tokens: Tokens = Field(default_factory=Tokens)
    tokens_cli: Tokens | None = None  # what the CLI itself reported, where the gateway metered the trial
    model_requests: int | None = None  # requests through the gateway (None: the runner has no model)
    model_refused: int = 0  # requests the gateway refused at the trial's cap
    calls: BrowserCalls = Field(default_factory=BrowserCalls)
    # Trajectory-scan findings (a call that reached the site, the backend or the task's files
    # outside the arm's browser tools). A flag is reported; it never changes the score.
    flags: list[str] = Field(default_factory=list)
    harbor_trial_dir: str | None = None  # relative to the experiment directory (see trial_dir)
    trace: BrowserTrace | None = None  # None: traces were off, or the trial ended before its agent ran
    walls: list[Wall] | None = None  # the hostile runner's trials: each route it tried, held or breached
    verifier_rewards: dict[str, float] | None = None  # grading "verifier": what the task's own Harbor verifier wrote
    submissions: int | None = None  # a write task: the requests its check matched, blocked in the browser
    judge: JudgeRecord | None = None  # a judged write task: the judge's verdicts on its submission
    agent_tool_calls: int | None = None  # every tool call in the agent's trajectory (ClawBench's count), browser or not
    claims_done: bool | None = None  # a write task: its final message claims success (ClawBench's self-report pattern)
    inbox: str | None = None  # the trial's own e-mail account (ClawBench's email_credentials.json): address (provider)
    worker: str = Field(default_factory=lambda: os.environ.get("PYTEST_XDIST_WORKER", "main"))
    started_at: str | None = None
    finished_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())


# In a trial's Harbor folder, the page as the agent left it, lossless: WebP (trial/browser_session.py),
# or the backend's PNG as it came if that could not be converted.
SCREENSHOT_TYPES = {"final-screenshot.webp": "image/webp", "final-screenshot.png": "image/png"}


def screenshot_name(image: bytes) -> str:
    """The file a final screenshot goes to, by what its bytes are."""
    return "final-screenshot.webp" if image[:4] == b"RIFF" and image[8:12] == b"WEBP" else "final-screenshot.png"


def final_screenshot(folder: Path) -> Path | None:
    """A trial's final screenshot, if it has one (its type: SCREENSHOT_TYPES[path.name])."""
    return next((folder / name for name in SCREENSHOT_TYPES if (folder / name).exists()), None)


def harbor_folder(experiment_dir: Path, arm: str, trial_id: str) -> Path:
    """A trial's Harbor folder (its logs, trajectory, screenshot, trace): jobs/<arm>/<trial>."""
    return experiment_dir / "jobs" / arm / trial_id


def trial_dir(experiment_dir: Path, record: BaseModel) -> Path | None:
    """A record's Harbor trial folder (its logs, trajectory, screenshot), wherever the experiment
    directory now is; an absolute path (schema 1 records) is taken as it stands."""
    relative = getattr(record, "harbor_trial_dir", None)
    return experiment_dir / relative if relative else None


def atomic_write(path: str | os.PathLike, text: str | bytes, staging: str | os.PathLike | None = None) -> None:
    """The whole file or none of it: written beside its place (or in `staging`, a folder on the
    same file system: where the place is a folder of 100,000 files, each entry made there costs),
    then renamed over it. The name is this thread's own (a thread writes one file at a time), not
    mkstemp's random one: a third of the cost where a report writes 133,000 pages. Whatever is at
    that name (a crash's leftover, a link) is removed and the file made anew, exclusively."""
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    # strings and plain system calls, not pathlib and a file object: a third of the cost a page
    path = os.fspath(path)
    folder = os.fspath(staging) if staging is not None else (os.path.dirname(path) or ".")
    tmp = f"{folder}/.w{os.getpid()}.{threading.get_ident()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileExistsError:  # a crash's leftover, or a link planted there
        os.unlink(tmp)
        fd = os.open(tmp, flags, 0o600)
    except FileNotFoundError:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(tmp).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, flags, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def trial_record_path(experiment_dir: Path, trial_id: str) -> Path:
    return experiment_dir / "trials" / f"{trial_id}.json"


def supersede_record(experiment_dir: Path, trial_id: str) -> None:
    _supersede(experiment_dir, trial_record_path(experiment_dir, trial_id), trial_id, ".json")


def supersede_trial_dir(experiment_dir: Path, trial_dir: Path) -> None:
    """A trial run again (--resume, a crashed worker's rerun) starts in an empty Harbor folder: the
    earlier one, with its answer file, logs and screenshot, moves to trials/superseded/<id>[.n]/,
    so nothing stale is graded and nothing is lost."""
    if trial_dir.exists():
        _supersede(experiment_dir, trial_dir, trial_dir.name, "")


def _supersede(experiment_dir: Path, source: Path, trial_id: str, suffix: str) -> None:
    """Moves a record (suffix .json) or a trial folder (no suffix) to trials/superseded/, numbered
    after the ones of its kind already there."""
    target_dir = experiment_dir / "trials" / "superseded"
    target_dir.mkdir(parents=True, exist_ok=True)
    earlier = [p for p in target_dir.glob(f"{trial_id}*{suffix}") if p.is_dir() == (suffix == "")]
    os.replace(source, target_dir / f"{trial_id}{'' if not earlier else f'.{len(earlier)}'}{suffix}")


def write_manifest(experiment_dir: Path, manifest: RunManifest) -> None:
    atomic_write(experiment_dir / "manifest.json", manifest.model_dump_json(indent=2))


class ManifestError(ValueError):
    """A manifest that is there but cannot be read: names the file, the field and what to do."""


def read_manifest(experiment_dir: Path) -> RunManifest:
    path = experiment_dir / "manifest.json"
    try:
        return RunManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no manifest: is this an experiment directory?") from None
    except (ValidationError, UnicodeDecodeError, OSError) as exc:
        if isinstance(exc, ValidationError):
            first = exc.errors()[0]
            why = f"{'.'.join(map(str, first['loc'])) or '(the file)'}: {first['msg']}"
        else:
            why = str(exc)
        raise ManifestError(
            f"{path}: not a readable manifest ({why}). It is the run's plan, written once when the run "
            "started: restore it from a copy of the results (a shard, CI's artifact), or start a new run; "
            "the trial records beside it are untouched") from None


def read_trial_records(experiment_dir: Path, model: type[BaseModel] = TrialRecord) -> tuple[list[Any], list[str]]:
    """All readable records (as `model`, which may be a subset of TrialRecord's fields), and a
    note for each file that could not be read.

    The files are validated as one JSON array in one call, which is several times faster than
    one call per file; if that fails (a broken file), each file is validated alone to say which.
    """
    trials_dir = experiment_dir / "trials"
    try:
        names = sorted(e.name for e in os.scandir(trials_dir) if e.name.endswith(".json") and not e.name.startswith("."))
    except FileNotFoundError:
        return [], []
    # One buffer, not a list of blobs and then a joined copy: half the memory at 100,000 records.
    joined, readable, problems = bytearray(b"["), [], []
    for name in names:
        try:
            with open(trials_dir / name, "rb") as f:
                blob = f.read()
        except OSError as exc:
            problems.append(f"{trials_dir / name}: unreadable trial record ({type(exc).__name__})")
            continue
        if readable:
            joined += b","
        joined += blob
        readable.append(name)
    joined += b"]"
    try:
        batch = TypeAdapter(list[model]).validate_json(joined)
        if len(batch) == len(readable):
            return batch, problems
    except (ValidationError, ValueError):
        pass
    del joined
    records = []
    for name in readable:
        try:
            records.append(model.model_validate_json((trials_dir / name).read_bytes()))
        except (ValidationError, ValueError, OSError) as exc:
            problems.append(f"{trials_dir / name}: unreadable trial record ({type(exc).__name__})")
    return records, problems
