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

import json
from importlib import metadata, resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .suite import RequestCheck

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
    time_limit: float = Field(ge=1)  # minutes
    extra_info: list[ExtraFile] = Field(default_factory=list)

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


def load_cases(case_set: str = DEFAULT_CASE_SET, root: Path | None = None) -> list[ClawBenchCase]:
    """Every case of a set, in name order; a broken one stops the load with its file and field."""
    if case_set not in CASE_SETS:
        raise ClawBenchError(f"ClawBench case set {case_set!r}: choose one of {', '.join(CASE_SETS)}")
    root = root or installed_root()
    validator = _schema_validator(root)
    folders = sorted(p.parent for p in (root / case_set).glob("*/task.json"))
    if not folders:
        raise ClawBenchError(f"{root / case_set}: no cases (task.json) found")
    return [load_case(folder, case_set, validator) for folder in folders]
