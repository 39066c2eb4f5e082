"""ClawBench's cases, read from the installed `clawbench-eval` package at its pinned version.

A case (`<set>/<case>/task.json`) is an instruction, metadata, a time limit, files the agent is
given (`extra_info`) and an `eval_schema`: the request that completes the task (a URL regex, a
method, and optional body and query fields that must match exactly), which ClawBench's runtime
intercepts and blocks before it reaches the site, and grades. Each file is checked against the
package's own `task.schema.json` (with the `jsonschema` library) and then read into the models
below, so a broken case is one error naming its file and field. A case whose `url_pattern` is the
package's placeholder can never be intercepted, so ClawBench's own verifier can only score it 0:
it is counted apart as ungradable, never planned by default.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .arms import GIVEN_FOLDER  # in the task folder: what the agent is given, uploaded to its my-info/
from .checks import RequestCheck

PACKAGE = "clawbench-eval"
PINNED_VERSION = "0.11.0"
CASE_SETS = ("v2", "v1", "v1-lite", "environmental-observation", "claw-eval")
DEFAULT_CASE_SET = "v2"  # every v2 case carries a real schema; 82 of v1's 152 carry the placeholder
PLACEHOLDER = "__PLACEHOLDER_WILL_NOT_MATCH__"


class ClawBenchError(Exception):
    """A case or the installed package that cannot be used, naming the file and the field."""


class EvalSchema(RequestCheck):
    """The request that completes the task, as ClawBench's interceptor matches it: the same check
    as a `request`-graded task's (url_pattern, method, body, params), which it becomes."""

    @property
    def gradable(self) -> bool:
        return self.url_pattern != PLACEHOLDER


class ExtraFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    description: str


class CaseMetadata(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    task_id: int
    metaclass: str
    class_: str = Field(alias="class")
    description: str
    sites_involved: list[str]
    platform: str


class ClawBenchCase(BaseModel):
    """One `task.json`, and where it was read from."""

    model_config = ConfigDict(extra="ignore")
    name: str  # the case's folder
    case_set: str
    folder: Path
    instruction: str
    metadata: CaseMetadata | None = None
    eval_schema: EvalSchema
    time_limit: float = Field(ge=1, allow_inf_nan=False)  # minutes
    extra_info: list[ExtraFile] = Field(default_factory=list)
    judge_context: dict[str, Any] | None = None  # the strict judge's hidden context (verify.py)

    @property
    def gradable(self) -> bool:
        return self.eval_schema.gradable


def installed_root() -> Path:
    """The package's bundled cases, after checking the installed version is the pinned one."""
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        raise ClawBenchError(f"{PACKAGE} is not installed: pip install '{PACKAGE}=={PINNED_VERSION}'") from None
    if version != PINNED_VERSION:
        raise ClawBenchError(f"{PACKAGE} {version} is installed; this harness reads the cases of {PINNED_VERSION}, "
                             f"whose counts and schema it was checked against: pip install '{PACKAGE}=={PINNED_VERSION}'")
    return Path(str(resources.files("clawbench") / "_bundled" / "test-cases"))


def _schema_validator(root: Path):
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads((root / "task.schema.json").read_text()))


def _field(path) -> str:
    return ".".join(str(p) for p in path) or "(the file)"


def load_case(folder: Path, case_set: str, validator) -> ClawBenchCase:
    path = folder / "task.json"
    try:
        raw = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ClawBenchError(f"{path}: not readable as JSON: {exc}") from None
    errors = sorted(validator.iter_errors(raw), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        raise ClawBenchError(f"{path}: {_field(first.absolute_path)}: {first.message} (ClawBench's task.schema.json)")
    try:
        return ClawBenchCase.model_validate({**raw, "name": folder.name, "case_set": case_set, "folder": folder})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ClawBenchError(f"{path}: {_field(first['loc'])}: {first['msg']}") from None


def load_cases(case_set: str = DEFAULT_CASE_SET, root: Path | None = None, own: Path | None = None) -> list[ClawBenchCase]:
    """Every case of a set, in name order; a broken one stops the load with its file and field.
    `own`: a folder of cases in ClawBench's format (a suite's own), checked by the same schema."""
    if own is None and case_set not in CASE_SETS:
        raise ClawBenchError(f"ClawBench case set {case_set!r}: choose one of {', '.join(CASE_SETS)}")
    root = root or installed_root()
    validator = _schema_validator(root)
    where = own if own is not None else root / case_set
    folders = sorted(p.parent for p in where.glob("*/task.json"))
    if not folders:
        raise ClawBenchError(f"{where}: no cases (task.json) found")
    return [load_case(folder, case_set, validator) for folder in folders]


# -- a case as a Harbor task folder -----------------------------------------------------------------
#
# Each gradable case becomes a Harbor task folder (task.toml written by Harbor's own TaskConfig,
# instruction.md, given/): the same loader, models and trial path as every other suite, as Harbor's
# adapters do for the benchmarks they import. The folders are a pure function of the package, the
# case set and the suite's [clawbench] table, so they are built once into a cache and shared by
# every worker and every run; the cases stay the source.

SHARED_USER = ("runtime", "shared", "alex_green_personal_info.json")  # the dummy user every case acts for
CONVERTER_VERSION = "7"  # bump when the folders below change shape
LIVE_INBOX = "purelymail"  # a task's `inbox` made on purelymail.com (trial/inbox.py), not on a suite's twin


class ClawBenchSource(BaseModel):
    """suite.toml's [clawbench] table: the limits ClawBench's cases do not carry."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    turn_cap: int = Field(200, gt=0)
    spend_limit_usd: float = Field(5.0, ge=0, allow_inf_nan=False)
    docker_image: str = "node:22-bookworm"
    # A folder of the suite's own cases in ClawBench's format (each may add a solution/ for the
    # reference runner), instead of the package's case sets.
    cases: str | None = None
    # The suite's bundled site that stands in for PurelyMail (its account API and a webmail): each
    # trial's e-mail account is made there. Without it, on purelymail.com where the run has its key.
    inbox_site: str | None = None


def _slug(text: str) -> str:
    """Lowercase letters, digits and hyphens, as every suite's site and task names are."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


def site_name(platform: str) -> str:
    return _slug(platform) or "site"


def task_name(case: ClawBenchCase) -> str:
    """The case's Harbor task (and folder) name (claw-eval's cases carry capitals,
    environmental-observation's underscores)."""
    return _slug(case.name)


# the first host a pattern names, its dots and hyphens escaped or not
_PATTERN_HOST = re.compile(r"https?://((?:(?:[a-z0-9]|\\?-)+\\?\.)+[a-z]{2,})(?![a-z0-9-])", re.IGNORECASE)


def case_site(case: ClawBenchCase) -> tuple[str, str, str]:
    """(site name, title, host) where the case's agent starts: the first site its metadata names, under
    its platform's name; a case without metadata (environmental-observation's), the host its request
    pattern names."""
    if case.metadata is not None and case.metadata.sites_involved:
        host = case.metadata.sites_involved[0].removeprefix("https://").removeprefix("http://").strip("/")
        return site_name(case.metadata.platform), case.metadata.platform, host
    if found := _PATTERN_HOST.search(case.eval_schema.url_pattern):
        host = found.group(1).replace("\\", "").lower()
        return site_name(host), host, host
    raise ClawBenchError(f"{case.folder / 'task.json'}: metadata.sites_involved: no site, and eval_schema.url_pattern "
                         "names no host to start at")


def case_sites(cases: list[ClawBenchCase]) -> dict[str, dict]:
    """A public site per platform (or host), at the first host a case of it involves (where its agent starts)."""
    sites: dict[str, dict] = {}
    for case in cases:
        name, title, host = case_site(case)
        sites.setdefault(name, {"title": title, "modelled_on": f"https://{host}", "base_url": f"https://{host}"})
    return sites


def _task_dict(case: ClawBenchCase) -> dict[str, Any]:
    return {"instruction": case.instruction, "extra_info": [item.model_dump() for item in case.extra_info]}


def case_instruction(case: ClawBenchCase) -> str:
    """ClawBench's own instruction for the case: its text and the package's assistant preamble
    (browser only, no confirmation, stop where information is missing, the my-info/ files), by the
    package's `build_instruction`. Harbor's adapter adds its runtime's CDP lines after it; this
    harness gives its browser through its tools instead, and names the start page (design/arms.py)."""
    from clawbench.runner.run_support.task import build_instruction

    return build_instruction(_task_dict(case))


def personal_files_for(folder: Path, email: str, password: str) -> list[tuple[Path, str]]:
    """The dummy user's files for an address, as the package prepares them (`prepare_personal_info`):
    the personal details without their online accounts, and the resume PDF, each naming the address.
    Its e-mail credentials are written by the trial that has an account (trial/inbox.py)."""
    from clawbench.runner.run_support.task import prepare_personal_info

    shared = installed_root().parents[1].joinpath(*SHARED_USER).parent
    made, _ = prepare_personal_info(shared, email, password, folder)
    return [(made / "alex_green_personal_info.json", "alex_green_personal_info.json"),
            (made / "alex_green_resume.pdf", "alex_green_resume.pdf")]


def personal_files(folder: Path) -> list[tuple[Path, str, str]]:
    """The user's files every case gives, made once for the user's own address. A trial with an
    e-mail account gets them again for its address, with its credentials (trial/inbox.py); a run
    with no account to give (no PurelyMail key, no inbox twin) gives these, without credentials."""
    shared = installed_root().parents[1].joinpath(*SHARED_USER).parent
    email = json.loads((shared / SHARED_USER[-1]).read_text())["contact"]["email"]
    described = {"alex_green_personal_info.json": "name, address, phone, date of birth, financial info",
                 "alex_green_resume.pdf": "professional resume"}
    return [(path, name, described[name]) for path, name in personal_files_for(folder, email, "")]


SUBMIT_PAGE_URLS = ("http://127.0.0.1:7878/submit", "http://localhost:7878/submit")  # what claw-eval's cases open


def runtime_submit_page() -> str:
    """The page ClawBench's runtime serves at 127.0.0.1:7878/submit (claw-eval's cases submit their
    answer there), taken from the installed runtime-server/server.py: its `submit_page` returns it."""
    import ast

    path = installed_root().parents[1] / "runtime" / "runtime-server" / "server.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = next((n for n in tree.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "submit_page"), None)
    returned = found.body[-1] if found is not None else None
    if not (isinstance(returned, ast.Return) and isinstance(returned.value, ast.Constant) and isinstance(returned.value.value, str)):
        raise ClawBenchError(f"{path}: submit_page no longer returns its page as one string")
    return returned.value.value


def case_task(case: ClawBenchCase, source: ClawBenchSource, batches: dict[str, str | None],
              personal: list[tuple[Path, str, str]]) -> tuple[dict, str, list]:
    """The case's task.toml (as a dict for Harbor's TaskConfig), its instruction and the files it
    gives its agent ((source path, name, description) each): `personal`, the dummy user's
    (`personal_files`), then the case's own."""
    meta = case.metadata
    site = case_site(case)[0]
    given = list(personal)
    for item in case.extra_info:
        path = case.folder / item.path
        # what the agent is given stays inside the case's folder: no `..`, no link out of it
        if path.is_symlink() or not path.resolve().is_relative_to(case.folder.resolve()):
            raise ClawBenchError(f"{case.folder / 'task.json'}: extra_info: {item.path!r} is not a file inside the case's folder")
        given.append((path, Path(item.path).name, item.description))
    batch = batches.get(site)
    request = case.eval_schema.model_dump(exclude_none=True, exclude={"expect"})
    webbench = {
        "site": site, "start_path": "/", "grading": "request", "answer": {}, "request": request,
        "turn_cap": source.turn_cap, "spend_limit_usd": source.spend_limit_usd,
        # treatment only where an injected batch covers the site: elsewhere it would be control again
        "arms": ["control", "treatment", "playwright"] if batch else ["control", "playwright"],
        "ungradable": not case.gradable, "group": meta.metaclass if meta else None,
        "judge_context": case.judge_context, "start_blank": True,  # ClawBench's agent starts on about:blank
        "submit_page": any(url in case.instruction for url in SUBMIT_PAGE_URLS),
        "inbox": source.inbox_site or LIVE_INBOX,  # every case's agent gets an e-mail account (trial/inbox.py)
    }
    if batch:
        webbench["tool_batch"] = site
    config = {
        "schema_version": "1.4",
        "task": {"name": f"clawbench/{task_name(case)}", "description": (meta.description if meta else case.instruction)[:500]},
        "agent": {"timeout_sec": case.time_limit * 60, "network_mode": "no-network"},
        "environment": {"docker_image": source.docker_image, "workdir": "/app"},
        "metadata": {"webbench": {k: v for k, v in webbench.items() if v is not None},
                     "clawbench": {"case_set": case.case_set, **({"task_id": meta.task_id, "class": meta.class_,
                                   "platform": meta.platform, "sites_involved": meta.sites_involved} if meta else {})}},
    }
    return config, case_instruction(case), given


def _write_case(case: ClawBenchCase, folder: Path, source: ClawBenchSource, batches: dict[str, str | None],
                personal: list[tuple[Path, str, str]]) -> None:
    from harbor.models.task.config import TaskConfig as HarborTaskConfig

    config, instruction, given = case_task(case, source, batches, personal)
    (folder / GIVEN_FOLDER).mkdir(parents=True)
    (folder / "task.toml").write_text(HarborTaskConfig.model_validate(config).model_dump_toml())
    (folder / "instruction.md").write_text(instruction)
    for path, name, _ in given:
        if not path.is_file():
            raise ClawBenchError(f"{case.folder / 'task.json'}: extra_info: {path} is not there")
        shutil.copyfile(path, folder / GIVEN_FOLDER / name)
    if (case.folder / "solution").is_dir():  # a suite's own case: its reference solution
        shutil.copytree(case.folder / "solution", folder / "solution", ignore=shutil.ignore_patterns("__pycache__"))


def _digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def tasks_folder(case_set: str, ungradable: bool, source: ClawBenchSource, batches: dict[str, str | None],
                 cache: Path | None = None, own: Path | None = None) -> tuple[Path, dict[str, dict]]:
    """The case set (or a suite's `own` cases) as Harbor task folders, built once, atomically, into
    the cache, and its sites."""
    cases = [c for c in load_cases(case_set, own=own) if ungradable or c.gradable]
    if not cases:
        raise ClawBenchError(f"ClawBench case set {case_set!r} has no gradable case (add --clawbench-ungradable)")
    named: dict[str, ClawBenchCase] = {}
    for case in cases:
        if not task_name(case):
            raise ClawBenchError(f"{case.folder / 'task.json'}: its folder's name {case.name!r} has no letter or digit a "
                                 "task name can keep (a-z, 0-9)")
        if (other := named.setdefault(task_name(case), case)) is not case:
            raise ClawBenchError(f"{case.folder / 'task.json'}: its task name {task_name(case)!r} is also "
                                 f"{other.folder / 'task.json'}'s: each case needs a name of its own")
    key = hashlib.sha256(json.dumps([PINNED_VERSION, CONVERTER_VERSION, case_set, ungradable, source.model_dump(),
                                     sorted(batches.items(), key=str), _digest(own) if own else None],
                                    default=str).encode()).hexdigest()[:16]
    cache = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-webbench" / "clawbench"
    final = cache / f"{case_set}-{key}"
    if not final.is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f".{case_set}-", dir=cache))
        try:
            personal = personal_files(building)  # made once: every case gives the same files
            for case in cases:
                _write_case(case, building / task_name(case), source, batches, personal)
            shutil.rmtree(building / ".my-info-tmp")  # copied into each case's given/
            os.rename(building, final)  # another process may have won the race: its folders are the same
        except OSError:
            if not final.is_dir():
                raise
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return final, case_sites(cases)
