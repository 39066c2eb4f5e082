"""A run's options: the `RunOptions` model, and reading it from pytest's command line and ini.

Kept apart from the services in run.py, so that planning a run imports no web server. Every
option that cannot do what was asked is refused here with a `pytest.UsageError`, never turned into
something else: `--attempts 0`, half a pair in `--arms`, test paths beside `--suite`. Under
`--resume ID` the run's own options come from its manifest; one given again must agree with it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from ..design.pairing import PAIRED_ARMS

ARM_CHOICES = ("control", "treatment", "playwright")
BROWSER_CHOICES = ("local", "kernel")


class RunOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    suite: str
    runner: str = "reference"
    model: str | None = None
    model_base_url: str | None = None
    attempts: int = Field(1, ge=1)
    arms: tuple[str, ...] | None = None
    paired: bool = True
    sequential: bool = False  # pairs in rounds, each task stopped once decided (stopping.py)
    experiment_id: str
    results_dir: Path
    browser: Literal["local", "kernel"] = "local"
    shard: tuple[int, int] | None = None  # (I, N): this machine runs shard I of N
    # Where agents run: "host" (this machine, a private mount namespace) or a Harbor environment
    # type (docker, daytona, modal, ...), whose sandboxes reach the proxy at proxy_url.
    environment: str = "host"
    proxy_listen: tuple[str, int] = ("127.0.0.1", 0)
    proxy_url: str | None = None  # what agents are given, "{port}" filled in; None: the listening address
    allow_unsealed: bool = False  # run agents on this host without a mount namespace where none can be made
    model_price: str | None = None  # --model-price IN,OUT[,CACHED] ($ per million tokens) for the gateway
    allow_unpriced: bool = False  # let a model without a price run (its spend cap cannot hold)
    trace: bool = True  # a browser trace per trial (Playwright's trace.zip locally, Kernel's replay)
    judge_model: str | None = None  # the judge of write tasks whose check does not decide (grading/judge.py)
    judge_base_url: str | None = None
    clawbench_set: str | None = None  # a ClawBench suite's case set (None: its default)
    clawbench_ungradable: bool = False  # ... and its placeholder cases


# An experiment ID names a folder under --results-dir: a bounded, safe alphabet, so no ID is a path.
EXPERIMENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_experiment_id(value: str, option: str) -> None:
    if not EXPERIMENT_ID.fullmatch(value) or ".." in value:
        shown = value if len(value) <= 60 else value[:60] + f"... ({len(value)} characters)"
        raise pytest.UsageError(
            f"{option} {shown!r}: an experiment ID is 1 to 100 letters, digits, '.', '_' or '-', starting with a letter "
            "or digit and without '..' (it names a folder under --results-dir, never a path)")


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def results_dir(config: pytest.Config) -> Path:
    """--results-dir relative to where pytest was started (as --html and --junitxml are); the ini
    value relative to the project's root. The root is no guide for an option: the plugin's own test
    module is among pytest's arguments, so the root can be the package's folder."""
    if (given := config.getoption("results_dir")) is not None:
        if not given.strip():  # not the project's root, nor the ini's default: refused
            raise pytest.UsageError("--results-dir is empty: name the folder the results go to")
        return config.invocation_params.dir / given
    if not (ini := config.getini("webbench_results_dir")).strip():
        raise pytest.UsageError("webbench_results_dir (ini) is empty: name the folder the results go to")
    return config.rootpath / ini


def options_from_config(config: pytest.Config) -> RunOptions:
    from ..results.claims import new_experiment_id

    get = config.getoption
    if get("resume") and get("experiment_id") and get("resume") != get("experiment_id"):
        raise pytest.UsageError("--resume names the experiment: drop --experiment-id")
    if not is_worker(config) and config.option.file_or_dir:
        raise pytest.UsageError(
            f"test paths are not run with --suite or --resume (got {' '.join(config.option.file_or_dir)}): the suite's "
            "trials are the run; pick them with -k. (Give --results-dir as --results-dir=DIR: as a separate word an "
            "existing directory is read as a test path.)")
    for option, needs in (("resume_errored", "resume"), ("publish_project", "publish")):
        if get(option) and not get(needs):  # it would do nothing, silently
            raise pytest.UsageError(f"--{option.replace('_', '-')} goes with --{needs}")
    attempts = get("attempts")
    if attempts is not None and attempts < 1:
        raise pytest.UsageError(f"--attempts {attempts}: a run needs at least 1 attempt per task and arm")
    arms = _arms(get("arms"))
    given = dict(
        suite=get("suite"), runner=get("runner"), model=get("model"), attempts=attempts, arms=arms,
        paired=False if get("unpaired") else None, sequential=True if get("sequential") else None,
        model_base_url=get("model_base_url"), browser=get("browser"),
        environment=get("environment"), shard=_shard(get("shard")), model_price=get("model_price"),
        allow_unpriced=True if get("allow_unpriced") else None, trace=False if get("no_trace") else None,
        clawbench_set=get("clawbench_set"), clawbench_ungradable=True if get("clawbench_ungradable") else None,
        judge_model=get("judge_model"), judge_base_url=get("judge_base_url"),
    )
    for option in ("resume", "experiment_id"):
        if get(option) is not None:
            check_experiment_id(get(option), "--" + option.replace("_", "-"))
    experiment_id = (config.workerinput.get("webbench_experiment_id") if is_worker(config) else None) \
        or get("resume") or get("experiment_id") or new_experiment_id()
    if given["shard"] and not (get("experiment_id") or get("resume")):
        raise pytest.UsageError("--shard needs --experiment-id: every shard must share the run ID (it fixes pair order)")
    if get("resume"):
        given = _from_manifest(get("resume"), results_dir(config), given)
    environment = given["environment"] or "host"
    if environment != "host":
        _check_environment(environment, get("proxy_url"))
    try:
        return RunOptions(
            suite=given["suite"],
            runner=_runner_name(given["runner"] or config.getini("webbench_runner")),
            model=given["model"], attempts=given["attempts"] or _ini_attempts(config),
            arms=given["arms"], paired=given["paired"] is not False, sequential=bool(given["sequential"]),
            experiment_id=experiment_id,
            results_dir=results_dir(config), model_base_url=given["model_base_url"], shard=given["shard"],
            environment=environment, proxy_listen=_proxy_listen(get("proxy_listen")), proxy_url=_proxy_url(get("proxy_url")),
            allow_unsealed=bool(get("allow_unsealed")), model_price=given.get("model_price"),
            allow_unpriced=bool(given.get("allow_unpriced")), trace=given.get("trace") is not False,
            browser=given["browser"] or config.getini("webbench_browser"),
            clawbench_set=given.get("clawbench_set"), clawbench_ungradable=bool(given.get("clawbench_ungradable")),
            judge_model=given.get("judge_model"), judge_base_url=given.get("judge_base_url"),
        )
    except ValueError as exc:
        raise pytest.UsageError(f"webbench options: {exc}") from None


def _ini_attempts(config: pytest.Config) -> int:
    text = config.getini("webbench_attempts")
    try:
        attempts = int(text)
    except ValueError:
        attempts = 0
    if attempts < 1:
        raise pytest.UsageError(f"webbench_attempts (ini) = {text!r}: give a whole number of attempts, at least 1")
    return attempts


def check_sequential(options: RunOptions, arms: tuple[str, ...], resuming: bool = False) -> None:
    if options.sequential and not options.paired:
        raise pytest.UsageError("--sequential decides each task on its control/treatment pairs: drop --unpaired")
    if options.sequential and not resuming and not set(PAIRED_ARMS) <= set(arms):
        raise pytest.UsageError(f"--sequential decides each task on its control/treatment pairs, and the run's arms "
                                f"({','.join(arms)}) make none")
    if options.sequential:
        from .stopping import ALPHA, smallest_cap

        if options.attempts < (least := smallest_cap()):
            raise pytest.UsageError(
                f"--sequential --attempts {options.attempts}: the most pairs a task may get must be at least {least}: "
                f"with fewer, not even every pair favouring one arm could show an effect at alpha {ALPHA:g} "
                f"(split over pass/fail and speed), so the run could only ever stop for futility")


def check_arms(arms: tuple[str, ...], paired: bool) -> None:
    """A paired run with one arm of the pair would mark every pair broken: refused, not run."""
    chosen = [a for a in PAIRED_ARMS if a in arms]
    if paired and len(chosen) == 1:
        missing = next(a for a in PAIRED_ARMS if a not in arms)
        raise pytest.UsageError(
            f"--arms {','.join(arms)}: control and treatment run as pairs, and {missing} is not selected, so no pair "
            f"could be tested; add {missing}, or pass --unpaired to run the arms as independent samples")


def _arms(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    arms = tuple(a.strip() for a in text.split(",") if a.strip())
    if not arms:  # "--arms ," is no arm, not every arm
        raise pytest.UsageError(f"--arms {text!r}: no arm named; choose from {', '.join(ARM_CHOICES)}")
    for arm in arms:
        if arm not in ARM_CHOICES:
            raise pytest.UsageError(f"--arms: unknown arm {arm!r}; choose from {', '.join(ARM_CHOICES)}")
    if len(set(arms)) != len(arms):
        raise pytest.UsageError(f"--arms {text}: an arm is named twice")
    return arms


def _shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    from ..design.pairing import parse_shard

    try:
        return parse_shard(text)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _named_judge(manifest) -> str | None:
    """The judge as --judge-model gave it, or None where it was the run's own model (which a resumed
    run then takes again with the run's endpoint and price, as the first run did)."""
    if manifest.judge_named is None:  # written before the manifest said: a judge other than the model was named
        return manifest.judge_model if manifest.judge_model != manifest.model else None
    return manifest.judge_model if manifest.judge_named else None


def _from_manifest(experiment_id: str, results: Path, given: dict) -> dict:
    """The resumed run's own options, from its manifest; a value given again must be the same."""
    from ..results.records import ManifestError, read_manifest

    try:
        manifest = read_manifest(results / experiment_id)
    except (FileNotFoundError, ManifestError) as exc:
        raise pytest.UsageError(str(exc)) from None
    recorded = dict(
        suite=manifest.suite_path, runner=manifest.runner, model=manifest.model, attempts=manifest.attempts,
        arms=tuple(manifest.arms), paired=manifest.paired, sequential=manifest.sequential is not None,
        model_base_url=manifest.model_base_url,
        browser=manifest.browser, environment=manifest.environment, model_price=manifest.model_price,
        allow_unpriced=True if manifest.allow_unpriced else None, trace=manifest.trace,
        clawbench_set=manifest.case_set, clawbench_ungradable=True if manifest.ungradable else None,
        judge_model=_named_judge(manifest), judge_base_url=manifest.judge_base_url,
        shard=tuple(int(x) for x in manifest.shard.split("/")) if manifest.shard else None,
    )
    for name, value in given.items():
        if value is None or name == "suite":  # the suite is checked by its name and file hashes (resume.check_plan)
            continue
        if value != recorded[name]:
            shown = ",".join(value) if name == "arms" else value
            raise pytest.UsageError(f"--resume {experiment_id}: {name} was {_shown(recorded[name])}, now {_shown(shown)}; "
                                    "leave it out to take the run's own, or start a new run")
    return {**recorded, "suite": given["suite"] or recorded["suite"]}


def _shown(value) -> str:
    if isinstance(value, tuple) and value and isinstance(value[0], str):
        return repr(",".join(value))
    return repr(value)


def _proxy_listen(text: str | None) -> tuple[str, int]:
    if not text:
        return ("127.0.0.1", 0)
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise pytest.UsageError(f"--proxy-listen {text!r}: give HOST:PORT, a port from 0 to 65535, e.g. 0.0.0.0:8765")
    return (host or "127.0.0.1", number)


def _proxy_url(text: str | None) -> str | None:
    """What agents are given for the proxy: an http(s) URL whose only placeholder is {port}."""
    if text is None:
        return None
    try:
        filled = text.format(port=8765)
    except (KeyError, IndexError, ValueError) as exc:
        raise pytest.UsageError(f"--proxy-url {text!r}: its one placeholder is {{port}} ({exc!r} is not)") from None
    if not re.fullmatch(r"https?://[^/\s]+(/\S*)?", filled):
        raise pytest.UsageError(f"--proxy-url {text!r}: give an http:// or https:// URL, e.g. http://host.docker.internal:{{port}}")
    return text


def _check_environment(environment: str, proxy_url: str | None) -> None:
    """A Harbor environment type, and a proxy address its sandboxes can reach."""
    from harbor.environments.factory import EnvironmentFactory

    names = EnvironmentFactory.registered_names()
    if environment not in names:
        raise pytest.UsageError(f"--environment {environment}: not a Harbor environment type; choose host or one of "
                                f"{', '.join(names)}")
    if not proxy_url:
        raise pytest.UsageError(f"--environment {environment}: agents in a sandbox cannot reach 127.0.0.1; give --proxy-url "
                                "(and --proxy-listen 0.0.0.0:PORT), e.g. http://host.docker.internal:{port} or a tunnel")


def _runner_name(runner: str) -> str:
    """A preset file is named by its absolute path, so workers and a later --resume find it."""
    from ..runners import is_preset_file

    return str(Path(runner).resolve()) if is_preset_file(runner) else runner
