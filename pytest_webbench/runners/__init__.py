"""Runners: which Harbor agent plays each trial, as data (`presets/<name>.toml`).

`reference` replays each task's reference solution through the proxy, as an MCP client, so it
takes exactly the path a real agent takes; `nop` does nothing (every trial should fail); `codex`,
`claude` and `pi` run the real agent CLIs, pinned, through Harbor's installed agents. Choosing a
preset replaces the whole option set, so nothing carries over from one agent to another.
`--runner path/to/preset.toml` runs an agent of your own, described the same way.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class UnknownRunner(ValueError):
    pass


class CliPin(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    package: str  # the npm package
    version: str  # pinned: installed by `python -m pytest_webbench.runners.install`
    bin: str  # the executable it puts in node_modules/.bin
    node: str | None = None  # an npm-packaged Node this CLI needs (e.g. "22.23.3"); None: the system's


class RunnerSpec(BaseModel):
    """One preset: the Harbor agent, its pinned CLI, the models it can take and its options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    agent: str  # import path of the Harbor agent class
    description: str = ""
    takes_trial_context: bool = False  # our own agents take task_dir, arm, session id, start URL
    cli: CliPin | None = None
    default_model: str | None = None
    # `provider/model` prefixes this agent can run (empty: any, or no model at all)
    model_providers: list[str] = Field(default_factory=list)
    options: dict = Field(default_factory=dict)  # kwargs for the Harbor agent (its options model)
    # Harbor's ModelApiFormat to declare when --model-base-url points the agent at an endpoint
    endpoint_api_format: str | None = None
    # provider -> the model API the agent speaks to it (gateway/policy.py forwards only its endpoints)
    model_api: dict[str, Literal["responses", "messages", "chat"]] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)  # fixed environment for the agent's commands
    # Whether it runs commands of its own in the agent's environment (default: it does when it has a
    # CLI): those are sealed, and a run that cannot seal them is refused unless allowed.
    runs_commands: bool | None = None
    grades: Literal["task", "walls"] = "task"  # "walls": its trials are graded by the walls it tried (runners/hostile.py)

    @property
    def agent_commands(self) -> bool:
        return self.runs_commands if self.runs_commands is not None else self.cli is not None

    @property
    def uses_gateway(self) -> bool:
        """It calls a model (or probes the gateway): each trial gets a route through the model gateway."""
        return bool(self.model_api)

    def api_for(self, model: str | None) -> str | None:
        """The model API the agent speaks for this `provider/model` (None: not stated)."""
        provider = model.split("/", 1)[0] if model and "/" in model else None
        return self.model_api.get(provider) if provider else None

    def check_model(self, model: str | None) -> str | None:
        """The model this preset will run, or a clear error before any trial starts."""
        chosen = model or self.default_model
        if model and not self.model_providers and not self.default_model and not self.uses_gateway:
            raise UnknownRunner(f"--runner {self.name} runs no model: drop --model {model} (it would be recorded in the "
                                "manifest and report, and never used)")
        if not self.model_providers:
            return chosen
        if not chosen:
            raise UnknownRunner(f"--runner {self.name}: needs --model provider/name ({', '.join(self.model_providers)})")
        provider = chosen.split("/", 1)[0] if "/" in chosen else None
        if provider not in self.model_providers:
            raise UnknownRunner(
                f"--runner {self.name} cannot take --model {chosen!r}: give provider/name with provider "
                f"{' or '.join(self.model_providers)}"
            )
        return chosen


PRESETS_PACKAGE = "pytest_webbench.runners.presets"


@cache
def load_presets() -> dict[str, RunnerSpec]:
    out = {}
    for entry in resources.files(PRESETS_PACKAGE).iterdir():
        if not entry.name.endswith(".toml"):
            continue
        try:
            spec = RunnerSpec.model_validate(tomllib.loads(entry.read_text(encoding="utf-8")))
        except (ValidationError, tomllib.TOMLDecodeError) as exc:
            raise UnknownRunner(f"runner preset {entry.name}: {exc}") from None
        out[spec.name] = spec
    return dict(sorted(out.items()))


def is_preset_file(name: str) -> bool:
    """--runner names a preset file of the user's (a .toml path), else a bundled preset."""
    return name.endswith(".toml")


def runner_spec(name: str) -> RunnerSpec:
    if is_preset_file(name):
        return load_preset_file(Path(name))
    try:
        return load_presets()[name]
    except KeyError:
        raise UnknownRunner(f"--runner {name}: unknown runner; choose from {', '.join(load_presets())}, "
                            "or give a preset file (.toml)") from None


@cache
def load_preset_file(path: Path) -> RunnerSpec:
    """A preset of the user's own: the same fields as the bundled ones."""
    try:
        return RunnerSpec.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise UnknownRunner(f"--runner {path}: cannot read the preset: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UnknownRunner(f"--runner {path}: not TOML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UnknownRunner(f"--runner {path}: {'.'.join(map(str, first['loc'])) or 'preset'}: {first['msg']}") from None


def check_runner(name: str, model: str | None, require_cli: bool = True) -> RunnerSpec:
    """Everything that can be checked before a trial: the preset, its model, its options against
    the pinned Harbor agent's own options model, and its CLI being installed. A bundled preset's
    agent and options are this package's own, checked by its tests (tests/test_runners.py): its
    Harbor class loads with the first trial, not at planning (~80 ms of every collection)."""
    return check_preset(runner_spec(name), model, require_cli, load_agent=is_preset_file(name))


def check_preset(spec: RunnerSpec, model: str | None, require_cli: bool = True, load_agent: bool = True) -> RunnerSpec:
    name = spec.name
    spec.check_model(model)
    if load_agent:
        _check_agent(spec)
    if spec.cli is not None and require_cli:
        from .install import cli_problem

        if problem := cli_problem(spec.cli):
            raise UnknownRunner(f"--runner {name}: {problem}")
    return spec


def _check_agent(spec: RunnerSpec) -> None:
    """The preset's Harbor agent loads, and takes the preset's options."""
    name = spec.name
    module_name, colon, class_name = spec.agent.partition(":")
    try:
        agent_class = getattr(importlib.import_module(module_name), class_name) if colon and class_name else None
    except (ImportError, AttributeError) as exc:  # Harbor loads here, lazily
        raise UnknownRunner(f"--runner {name}: agent {spec.agent!r}: cannot be loaded ({exc})") from None
    if not isinstance(agent_class, type):
        raise UnknownRunner(f"--runner {name}: agent {spec.agent!r}: give MODULE:CLASS, a Harbor agent's class")
    cli = sys.modules.get(f"{__name__}.cli")  # loaded if the agent is one of its classes
    if cli is not None and issubclass(agent_class, cli.PinnedCli) and not spec.uses_gateway:
        raise UnknownRunner(f"--runner {name}: {class_name} runs only through the model gateway, which meters and "
                            "prices its calls: give the preset a [model_api] table (provider = \"responses\", "
                            "\"messages\" or \"chat\")")
    options_model = getattr(agent_class, "options_model", None)
    if options_model is not None and spec.options:
        try:
            options_model.model_validate(spec.options)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise UnknownRunner(f"--runner {name}: the pinned Harbor agent does not accept these options: {problems}") from None
    elif spec.options:
        accepted = set(inspect.signature(agent_class.__init__).parameters)
        unknown = set(spec.options) - accepted
        if unknown:
            raise UnknownRunner(f"--runner {name}: the agent does not accept options {sorted(unknown)}")
    if spec.options and callable(check := getattr(agent_class, "check_options", None)):
        try:
            check(spec.options)
        except ValueError as exc:
            raise UnknownRunner(f"--runner {name}: {exc}") from None
