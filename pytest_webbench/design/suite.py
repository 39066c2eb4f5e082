"""Suite and task files: pydantic models, loading, and errors that name the file and field.

A suite is a folder with `suite.toml` (its arms and sites) and `tasks/<name>/`, each a Harbor
task directory (`task.toml`, `instruction.md`, `solution/`) whose `[metadata.webbench]` table
says how the task is graded and limited. Harbor's own `TaskConfig` validates every task.toml.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import rtoml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from .checks import FieldRule, PageCheck, RequestCheck  # noqa: F401 - FieldRule re-exported
from .harbor_sections import bad_limit, unknown_key
from .arms import ARM_POLICIES, ArmName, ArmPolicy, arm_policy
from .clawbench import LIVE_INBOX, ClawBenchError, ClawBenchSource
from .pairing import TrialKey
from .suite_cache import content_hashes, kept_or_loaded, read_file

GradingMode = Literal["page", "pinned", "format", "request", "verifier"]
# What a task's [metadata.webbench] table must hold, for the message that asks for it.
NEEDED_KEYS = ("site (one of the suite's sites), grading (page, pinned, format, request, or verifier: the task's own "
               "Harbor verifier, tests/test.sh), turn_cap, spend_limit_usd, tool_batch (or placebo = true, or arms "
               "without treatment), and [metadata.webbench.answer.<field>] rules unless grading is request or verifier")
TASK_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class SuiteError(Exception):
    """A broken suite or task file: says which file and which field."""

    def __init__(self, path: Path, field: str, message: str):
        super().__init__(f"{path}: {field}: {message}")
        self.path, self.field = path, field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  # "30" is no turn cap, "no" no boolean


class WebbenchMeta(_Strict):
    site: str
    start_path: str = Field("/", pattern=r"^/[^\s\\]*$")  # a path on the site: "@host" or "x" after its origin would leave it
    grading: GradingMode
    answer: dict[str, FieldRule] = Field(default_factory=dict)  # not for request or verifier grading
    page: PageCheck | None = None
    request: RequestCheck | None = None  # grading "request": the submission the browser intercepts
    turn_cap: int = Field(gt=0, description="browser calls the proxy lets through")
    spend_limit_usd: float = Field(ge=0, allow_inf_nan=False)
    token_limit: int | None = Field(None, gt=0, description="model tokens (input + output) the gateway lets through")
    placebo: bool = False
    # Whether the injected batch offers a shortcut over control's own tools. False where the site's
    # native WebMCP tools already do the task or the batch adds nothing to it: there no difference
    # between the arms is expected (a control for "tools help only where they add something").
    shortcut: bool = True
    tool_batch: str | None = None  # the site whose injected batch covers this task
    # Answer fields on which a pair's two answers should agree (the report's answer agreement).
    agree_on: list[str] = Field(default_factory=list)
    # The arms this task runs in (default: the run's). A task no injected batch covers has no
    # treatment: there it would be control again (ClawBench's sites without a batch).
    arms: list[ArmName] | None = None
    # A ClawBench case whose schema is the package's placeholder: no request can ever match, so it
    # is planned only when asked for and reported apart, never as a failure of an arm.
    ungradable: bool = False
    group: str | None = None  # the report's grouping of tasks (ClawBench's metaclass)
    # A ClawBench case's hidden context for its strict judge (rubric, reference_solution, source_task_yaml)
    judge_context: dict[str, Any] | None = None
    start_blank: bool = False  # the agent starts on about:blank and is told the start page (ClawBench's cases)
    submit_page: bool = False  # ClawBench's runtime submit page is served at 127.0.0.1:7878/submit (claw-eval's cases)
    # The trial's own e-mail account (ClawBench's email_credentials.json): LIVE_INBOX, made on the
    # live service where the run has its key, or the suite's site that stands in for it.
    inbox: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> WebbenchMeta:
        if not self.answer and self.grading not in ("request", "verifier"):
            raise ValueError("answer: at least one field rule is needed")
        if (self.grading == "request") != (self.request is not None):
            raise ValueError("grading 'request' goes with a [metadata.webbench.request] check, and only with it")
        pinned = [k for k, r in self.answer.items() if r.pins_a_value]
        if self.grading == "pinned" and not pinned:
            raise ValueError("grading 'pinned' needs an answer field with equals or one_of")
        if self.grading == "format" and (pinned or self.page):
            raise ValueError("grading 'format' checks shape only: no equals, one_of or page check")
        if self.grading == "page" and self.page is None:
            raise ValueError("grading 'page' needs a [metadata.webbench.page] check")
        for key in self.agree_on:
            if key not in self.answer:
                raise ValueError(f"agree_on: {key!r} is not an answer field")
        for key, rule in self.answer.items():
            if rule.from_page and self.page is None:
                raise ValueError(f"answer.{key}.from_page needs a page check")
        if self.placebo and self.tool_batch:
            raise ValueError("a placebo task is one no injected tool covers: drop tool_batch")
        if self.arms is not None and (not self.arms or len(set(self.arms)) != len(self.arms)):
            raise ValueError("arms: list each arm once, at least one")
        if not self.placebo and not self.tool_batch and self.has_arm("treatment"):
            raise ValueError("tool_batch: name the site whose injected tools cover this task (or set placebo = true, "
                             "or leave treatment out of arms)")
        if self.tool_batch and not self.has_arm("treatment"):
            raise ValueError("tool_batch: a task without the treatment arm injects no batch")
        return self

    def has_arm(self, arm: str) -> bool:
        return self.arms is None or arm in self.arms


class SiteSpec(_Strict):
    title: str
    modelled_on: str
    app: str | None = None  # a bundled site: Python file with create_app(), served on 127.0.0.1
    host: str | None = None  # the bundled site's host name in the browser (a *.localhost name)
    base_url: str | None = None  # a public site
    tool_batch: str | None = None  # JS file in Kernel's custom-tool form
    namespace: str | None = None

    @model_validator(mode="after")
    def _where(self) -> SiteSpec:
        if bool(self.app) == bool(self.base_url):
            raise ValueError("give exactly one of app (a bundled site) or base_url (a public site)")
        if self.app and not (self.host and self.host.endswith(".localhost")):
            raise ValueError("host: a bundled site needs a *.localhost host name")
        return self


class SuiteFile(_Strict):
    name: str
    description: str = ""
    arms: list[ArmName]
    sites: dict[str, SiteSpec]
    tasks_dir: str = "tasks"
    default_runner: str = "reference"  # --runner when none is given (public suites: codex)
    # The tasks are ClawBench's cases, read from the installed package (design/clawbench.py), not tasks_dir.
    clawbench: ClawBenchSource | None = None

    @field_validator("arms")
    @classmethod
    def _arms(cls, arms: list[str]) -> list[str]:
        if not arms:
            raise ValueError("empty; a suite runs in at least one arm")
        if len(set(arms)) != len(arms):
            raise ValueError("an arm is listed twice")
        if unknown := set(arms) - set(ARM_POLICIES):
            raise ValueError(f"unknown {sorted(unknown)}")
        return arms


class Task(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    path: Path
    instruction: str
    meta: WebbenchMeta
    timeout_sec: float
    # Harbor's network policy for the agent phase, as the task declares it (`[agent] network_mode`,
    # else `[environment]`'s): a sandbox enforces it, widened only by the run's own host.
    agent_network_mode: str = "public"
    agent_allowed_hosts: tuple[str, ...] = ()

    def arms(self, run_arms) -> tuple[str, ...]:
        """The run's arms this task runs in."""
        return tuple(a for a in run_arms if self.meta.has_arm(a))

    @property
    def paired(self) -> bool:
        """Whether its control and treatment run, both of them, as pairs (by its own arms)."""
        return self.meta.has_arm("control") and self.meta.has_arm("treatment")

    @property
    def agent_has_own_network(self) -> bool:
        """The agent phase reaches more than the run adds (public, or an allowlist of its own)."""
        return self.agent_network_mode != "no-network"


class Suite(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    path: Path
    spec: SuiteFile
    tasks: list[Task]
    case_set: str | None = None  # a ClawBench suite: the package's case set its tasks came from
    ungradable: bool = False  # ... with its placeholder cases too
    # the task files loading read (their keys' bytes), so the suite's digest need not read them again
    _files_read: dict[str, bytes] = PrivateAttr(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    def task(self, name: str) -> Task:
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(name)

    def tool_batch_path(self, site: str) -> Path | None:
        batch = self.spec.sites[site].tool_batch
        return self.path / batch if batch else None

    @cached_property
    def content_hashes(self) -> dict[str, str]:
        """sha256 of the suite's definition files and of each tool batch, for the manifest."""
        hashes = content_hashes(self.path, self.spec, self._files_read)
        self._files_read = {}
        return hashes


def _field_path(error: dict) -> str:
    return ".".join(str(part) for part in error["loc"]) or "(file)"


def _validation_error(path: Path, exc: ValidationError, prefix: str = "") -> SuiteError:
    first = exc.errors()[0]
    field = ".".join(filter(None, [prefix, _field_path(first)]))
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return SuiteError(path, field, first["msg"] + more)


def _read_toml(path: Path) -> dict:
    # rtoml, not the standard library's tomllib: 12 ms against 147 ms for 1,000 task files, the
    # largest part of collecting a big suite (benchmarks/collection_scale.py); the same dicts for
    # every file of the bundled suites (tests/test_suite_loading.py)
    try:
        return rtoml.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteError(path, "(file)", "missing") from None
    except (rtoml.TomlParsingError, UnicodeDecodeError) as exc:
        raise SuiteError(path, "(file)", f"not valid TOML: {exc}") from None
    except OSError as exc:  # a folder where the file should be, a link to itself
        raise SuiteError(path, "(file)", f"cannot be read: {exc.strerror or exc}") from None


def _read_instruction(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SuiteError(path, "(file)", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise SuiteError(path, "(file)", f"cannot be read: {exc.strerror or exc}") from None
    if not text.strip():
        raise SuiteError(path, "(file)", "empty: the agent would be given no task")
    return text


def task_inputs(task_dir: Path) -> list[tuple[str, bytes | bool]]:
    """Every file `load_task` reads of a task folder, and whether each file it looks for is there:
    the key its loaded task is kept under (design/suite_cache.py; a test holds this list to the
    files load_task touches)."""
    folder = str(task_dir)  # strings and plain system calls: pathlib's cost ~40 ms of 1,000 tasks
    return [("task.toml", read_file(f"{folder}/task.toml")), ("instruction.md", read_file(f"{folder}/instruction.md")),
            ("tests/test.sh", os.path.isfile(f"{folder}/tests/test.sh"))]


def load_task(task_dir: Path, suite: SuiteFile) -> Task:
    from harbor.models.task.config import TaskConfig as HarborTaskConfig

    config_path = task_dir / "task.toml"
    raw = _read_toml(config_path)
    if problem := unknown_key(raw, HarborTaskConfig):  # before Harbor's validators rename legacy keys in it
        raise SuiteError(config_path, *problem)
    try:
        harbor_config = HarborTaskConfig.model_validate(raw)
    except ValidationError as exc:
        raise _validation_error(config_path, exc) from None
    if problem := bad_limit(harbor_config):
        raise SuiteError(config_path, *problem)
    webbench = harbor_config.metadata.get("webbench")
    if not isinstance(webbench, dict):
        raise SuiteError(config_path, "metadata.webbench", f"missing: every task needs a [metadata.webbench] table with {NEEDED_KEYS}")
    try:
        meta = WebbenchMeta.model_validate(webbench)
    except ValidationError as exc:
        raise _validation_error(config_path, exc, prefix="metadata.webbench") from None
    if meta.site not in suite.sites:
        raise SuiteError(config_path, "metadata.webbench.site", f"{meta.site!r} is not a site of the suite ({', '.join(suite.sites)})")
    if meta.inbox not in (None, LIVE_INBOX) and not (meta.inbox in suite.sites and suite.sites[meta.inbox].app):
        raise SuiteError(config_path, "metadata.webbench.inbox", f"{meta.inbox!r} is neither \"purelymail\" nor a bundled "
                         "site of the suite (one that speaks PurelyMail's account API)")
    if meta.tool_batch and meta.tool_batch not in suite.sites:
        raise SuiteError(config_path, "metadata.webbench.tool_batch", f"{meta.tool_batch!r} is not a site of the suite")
    if meta.tool_batch and not suite.sites[meta.tool_batch].tool_batch:
        raise SuiteError(config_path, "metadata.webbench.tool_batch", f"site {meta.tool_batch!r} has no tool batch")
    if meta.grading == "verifier" and not (task_dir / "tests" / "test.sh").is_file():
        raise SuiteError(task_dir / "tests" / "test.sh", "(file)", "missing: grading 'verifier' runs the task's own Harbor "
                         "verifier, which writes its reward to /logs/verifier/reward.txt")
    instruction_path = task_dir / "instruction.md"
    if not instruction_path.is_file():
        raise SuiteError(instruction_path, "(file)", "missing: every task needs its instruction")
    name = task_dir.name
    agent_policy = harbor_config.agent.explicit_phase_policy() or harbor_config.environment.resolve_baseline()
    if not TASK_NAME.match(name):
        raise SuiteError(task_dir, "(name)", "task folder names are lowercase letters, digits and hyphens")
    return Task(
        name=name, path=task_dir, instruction=_read_instruction(instruction_path), meta=meta,
        timeout_sec=harbor_config.agent.timeout_sec or 600.0,
        agent_network_mode=agent_policy.network_mode.value, agent_allowed_hosts=tuple(agent_policy.allowed_hosts),
    )


def load_suite(path: Path, case_set: str | None = None, ungradable: bool = False) -> Suite:
    """A suite folder's tasks; for a ClawBench suite, those of `case_set` (its default set if None)
    built from the installed package, with its placeholder cases only if `ungradable`."""
    suite_file = path / "suite.toml" if path.is_dir() else path
    root = suite_file.parent
    try:
        spec = SuiteFile.model_validate(_read_toml(suite_file))
    except ValidationError as exc:
        raise _validation_error(suite_file, exc) from None
    for site_name, site in spec.sites.items():
        for attr in ("app", "tool_batch"):
            rel = getattr(site, attr)
            if rel and not (root / rel).is_file():
                raise SuiteError(suite_file, f"sites.{site_name}.{attr}", f"no file {root / rel}")
    if spec.clawbench is None and (case_set or ungradable):
        raise SuiteError(suite_file, "clawbench", "--clawbench-set and --clawbench-ungradable choose ClawBench's cases: "
                         "this suite's tasks are its own")
    if spec.clawbench is not None:
        from .clawbench import DEFAULT_CASE_SET, tasks_folder

        own = root / spec.clawbench.cases if spec.clawbench.cases else None
        if (inbox := spec.clawbench.inbox_site) is not None and not (inbox in spec.sites and spec.sites[inbox].app):
            raise SuiteError(suite_file, "clawbench.inbox_site", f"{inbox!r} is not a bundled site of this suite")
        if own is not None and case_set:
            raise SuiteError(suite_file, "clawbench.cases", f"--clawbench-set {case_set}: this suite's cases are its own ({own})")
        case_set = "own" if own is not None else case_set or DEFAULT_CASE_SET
        batches = {name: site.tool_batch for name, site in spec.sites.items()}
        try:
            tasks_dir, sites = tasks_folder(case_set, ungradable, spec.clawbench, batches, own=own)
        except ClawBenchError as exc:
            raise SuiteError(suite_file, "clawbench", str(exc)) from None
        # a site of suite.toml (one with a batch) wins over the one derived from the cases
        spec = spec.model_copy(update={"sites": {**{k: SiteSpec(**v) for k, v in sites.items()}, **spec.sites}})
    else:
        tasks_dir = root / spec.tasks_dir
    task_dirs = sorted(p for p in tasks_dir.iterdir() if p.is_dir()) if tasks_dir.is_dir() else []
    if not task_dirs:
        raise SuiteError(suite_file, "tasks_dir", f"no task folders in {tasks_dir}")
    files_read: dict[str, bytes] = {}
    if spec.clawbench is not None:  # its tasks come from the installed package, converted into a cache of their own
        tasks = [load_task(d, spec) for d in task_dirs]
    else:
        tasks = kept_or_loaded(task_dirs, spec.model_dump_json(), task_inputs,
                               lambda: [load_task(d, spec) for d in task_dirs], _task_list(), files_read)
    suite = Suite(path=root, spec=spec, tasks=tasks, case_set=case_set if spec.clawbench else None, ungradable=ungradable)
    suite._files_read = files_read
    return suite


@functools.cache
def _task_list():
    from pydantic import TypeAdapter

    return TypeAdapter(list[Task])


def resolve_suite_path(name_or_path: str, search_roots: list[Path]) -> Path:
    """`--suite` takes a path, or the name of a folder under `suites/` of the project."""
    given = Path(name_or_path)
    candidates = [given] + [root / "suites" / name_or_path for root in search_roots]
    for candidate in candidates:
        if (candidate / "suite.toml").is_file() or (candidate.is_file() and candidate.name == "suite.toml"):
            return candidate if candidate.is_dir() else candidate.parent
    looked = ", ".join(str(c) for c in candidates)
    raise SuiteError(given, "--suite", f"no suite.toml found (looked in {looked})")


@dataclass(frozen=True)
class TrialSpec:
    """One pytest item: a task, an attempt, an arm, and its place in its pair."""

    key: TrialKey
    task: Task
    pair_position: int | None

    @property
    def trial_id(self) -> str:
        return self.key.trial_id

    @property
    def pair_id(self) -> str | None:
        return self.key.pair_id if self.pair_position is not None else None

    @property
    def policy(self) -> ArmPolicy:
        return arm_policy(self.key.arm)
