"""pytest-webbench's options and hooks, all in one place; each delegates at once.

Without `--suite` the plugin does nothing, so a project's own tests run as usual.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from .pairing import TrialKey, broken_pairs, order_trials, pair_position
from .state import STATE_KEY, WebbenchState, state

BENCH_MODULE = Path(__file__).with_name("bench.py")
ARM_CHOICES = ("control", "treatment", "playwright")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("webbench", "benchmark browser agents on web tasks")
    group.addoption("--suite", help="suite to run: a name under suites/ or a path to a suite folder")
    group.addoption("--runner", help="agent runner preset: reference, nop, codex, claude, pi (default: ini webbench_runner, "
                    "else the suite's default_runner)")
    group.addoption("--model", help="provider/model for every selected arm (default: the runner preset's)")
    group.addoption("--model-base-url", help="the model API's base URL, for a gateway or a local endpoint (default: the provider's)")
    group.addoption("--attempts", type=int, help="attempts per task and arm (default 1)")
    group.addoption("--arms", help="comma-separated arms to run (default: the suite's arms)")
    group.addoption("--unpaired", action="store_true", help="run every arm independently (no control/treatment pairs)")
    group.addoption("--experiment-id", help="results go to RESULTS_DIR/ID (default: a new id); an existing id is refused")
    group.addoption("--resume", metavar="EXPERIMENT_ID", help="run only the planned trials of that experiment that have no result")
    group.addoption("--resume-errored", action="store_true", help="with --resume: run errored trials again too")
    group.addoption("--results-dir", help="where experiments are written (default: results)")
    group.addoption("--shard", metavar="I/N", help="run shard I of N (whole pairs dealt round-robin); give every machine "
                    "the same --experiment-id, then merge: python -m pytest_webbench.report merge OUT DIR...")
    group.addoption("--browser", choices=("local", "kernel"), help="browser backend (default local)")
    group.addoption("--environment", help="where agents run: host (default: this machine, isolated) or a Harbor "
                    "environment type (docker, daytona, modal, ...); a sandbox reaches the proxy at --proxy-url")
    group.addoption("--proxy-listen", metavar="HOST:PORT", help="the proxy's address (default 127.0.0.1 at a free port; "
                    "0.0.0.0:8765 for sandboxes; xdist workers take consecutive ports)")
    group.addoption("--proxy-url", metavar="URL", help="the proxy's base URL as agents reach it, '{port}' filled in "
                    "(e.g. http://host.docker.internal:{port}, or a tunnel's https URL)")
    group.addoption("--publish", choices=("braintrust",), help="after the report, publish the run (one experiment per arm; "
                    "needs BRAINTRUST_API_KEY)")
    group.addoption("--publish-project", help="Braintrust project (default: webbench-<suite>)")
    parser.addini("webbench_runner", "default --runner (empty: the suite's default_runner)", default="")
    parser.addini("webbench_attempts", "default --attempts", default="1")
    parser.addini("webbench_results_dir", "default --results-dir", default="results")
    parser.addini("webbench_browser", "default --browser", default="local")


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _options(config: pytest.Config):
    from .records import new_experiment_id
    from .options import RunOptions

    get = config.getoption
    arms = tuple(a.strip() for a in get("arms").split(",") if a.strip()) if get("arms") else None
    for arm in arms or ():
        if arm not in ARM_CHOICES:
            raise pytest.UsageError(f"--arms: unknown arm {arm!r}; choose from {', '.join(ARM_CHOICES)}")
    if get("resume") and get("experiment_id") and get("resume") != get("experiment_id"):
        raise pytest.UsageError("--resume names the experiment: drop --experiment-id")
    experiment_id = (config.workerinput.get("webbench_experiment_id") if _is_worker(config) else None) \
        or get("resume") or get("experiment_id") or new_experiment_id()
    shard = None
    if get("shard"):
        from .pairing import parse_shard

        try:
            shard = parse_shard(get("shard"))
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        if not (get("experiment_id") or get("resume")):
            raise pytest.UsageError("--shard needs --experiment-id: every shard must share the run ID (it fixes pair order)")
    environment = get("environment") or "host"
    listen = _proxy_listen(get("proxy_listen"))
    if environment != "host":
        _check_environment(environment, get("proxy_url"))
    results_dir = Path(get("results_dir") or config.getini("webbench_results_dir"))
    if not results_dir.is_absolute():
        results_dir = config.rootpath / results_dir
    try:
        return RunOptions(
            suite=get("suite"), runner=_runner_name(get("runner") or config.getini("webbench_runner")), model=get("model"),
            attempts=get("attempts") or int(config.getini("webbench_attempts")), arms=arms,
            paired=not get("unpaired"), experiment_id=experiment_id, results_dir=results_dir,
            model_base_url=get("model_base_url"), shard=shard, environment=environment, proxy_listen=listen,
            proxy_url=get("proxy_url"),
            browser=get("browser") or config.getini("webbench_browser"),
        )
    except ValueError as exc:
        raise pytest.UsageError(f"webbench options: {exc}") from None


def _proxy_listen(text: str | None) -> tuple[str, int]:
    if not text:
        return ("127.0.0.1", 0)
    host, _, port = text.rpartition(":")
    try:
        return (host or "127.0.0.1", int(port))
    except ValueError:
        raise pytest.UsageError(f"--proxy-listen {text!r}: give HOST:PORT, e.g. 0.0.0.0:8765") from None


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
    return str(Path(runner).resolve()) if runner.endswith(".toml") else runner


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("suite", None):
        return
    from .records import ExperimentExists, claim_experiment_dir
    from .runners import UnknownRunner, check_runner
    from .suite import SuiteError, load_suite, resolve_suite_path

    # Harbor imports litellm, which otherwise waits ~7 s on a price-map download it cannot make.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    options = _options(config)
    if config.getoption("publish", None) == "braintrust" and not os.environ.get("BRAINTRUST_API_KEY"):
        raise pytest.UsageError("--publish braintrust: BRAINTRUST_API_KEY is not set (set it, or drop --publish)")
    if options.browser == "kernel" and not _is_worker(config) and not config.option.collectonly:
        _check_kernel_access()
    try:
        suite = load_suite(resolve_suite_path(options.suite, [config.rootpath, Path.cwd()]))
        options = options.model_copy(update={"runner": options.runner or suite.spec.default_runner})
        # Collecting only checks the plan: the CLI and Kernel access are checked when trials run.
        check_runner(options.runner, options.model, require_cli=not config.option.collectonly)
    except (UnknownRunner, SuiteError) as exc:
        raise pytest.UsageError(str(exc)) from None
    dist = config.getoption("dist", "no")
    if options.paired and dist not in ("no", "load"):
        raise pytest.UsageError(
            f"--dist {dist}: webbench schedules each control/treatment pair onto one worker itself; "
            "use -n N with the default --dist load (or --unpaired)"
        )
    experiment_dir = options.results_dir / options.experiment_id
    skip: set[str] = set()
    if config.getoption("resume", None):
        skip = _resume(config, options, suite, experiment_dir)
    elif not _is_worker(config):
        try:
            experiment_dir = claim_experiment_dir(options.results_dir, options.experiment_id)
        except ExperimentExists as exc:
            raise pytest.UsageError(str(exc)) from None
    from . import fixtures

    config.pluginmanager.register(fixtures, "webbench-fixtures")  # the trial's fixtures, only for a --suite run
    config.stash[STATE_KEY] = WebbenchState(options, suite, experiment_dir)
    state(config).skip = skip
    config.args[:] = [str(BENCH_MODULE)]  # collect the trials, and nothing else
    if config.pluginmanager.hasplugin("html"):
        from .report.pytest_html import HtmlColumns

        config.pluginmanager.register(HtmlColumns(), "webbench-html")


def _resume(config: pytest.Config, options, suite, experiment_dir: Path) -> set[str]:
    """The trials already done (the controller decides and tells the workers, so all agree)."""
    if _is_worker(config):
        return set(config.workerinput.get("webbench_skip", []))
    from .records import read_manifest
    from .resume import ResumeError, check_plan, trials_to_skip
    from .runners import runner_spec

    try:
        manifest = read_manifest(experiment_dir)
        check_plan(manifest, suite.name, suite.content_hashes, options.runner, runner_spec(options.runner).check_model(options.model),
                   options.attempts, list(options.arms or suite.spec.arms), options.paired,
                   f"{options.shard[0]}/{options.shard[1]}" if options.shard else None, options.environment)
        return trials_to_skip(experiment_dir, config.getoption("resume_errored"))
    except (FileNotFoundError, ResumeError) as exc:
        raise pytest.UsageError(str(exc)) from None


def _check_kernel_access() -> None:
    """A missing or bad key, or no network, is one clear error before any trial, not one per trial."""
    import asyncio

    from .browsers.base import BackendError
    from .browsers.kernel import KernelBackend

    async def check() -> None:
        backend = KernelBackend()
        try:
            await backend.check_access()
        finally:
            await backend.close()

    try:
        asyncio.run(check())
    except BackendError as exc:
        raise pytest.UsageError(f"--browser kernel: {exc}") from None


@pytest.hookimpl(optionalhook=True)  # an xdist hook: the plugin also loads without xdist
def pytest_configure_node(node) -> None:
    """xdist: every worker uses the controller's experiment id, so they compute one pair order."""
    if STATE_KEY in node.config.stash:
        node.workerinput["webbench_experiment_id"] = state(node.config).options.experiment_id
        node.workerinput["webbench_skip"] = sorted(state(node.config).skip)


def _trial_keys(st: WebbenchState) -> list[TrialKey]:
    arms = st.options.arms or tuple(st.suite.spec.arms)
    return [TrialKey(task.name, attempt, arm)
            for task in st.suite.tasks for attempt in range(1, st.options.attempts + 1) for arm in arms]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "webbench_trial" not in metafunc.fixturenames or STATE_KEY not in metafunc.config.stash:
        return
    from .suite import TrialSpec

    st = state(metafunc.config)
    tasks = {t.name: t for t in st.suite.tasks}
    ids = []
    for key in _trial_keys(st):
        position = pair_position(key, st.options.experiment_id, st.options.attempts) if st.options.paired else None
        st.specs[key.trial_id] = TrialSpec(key, tasks[key.task], position)
        ids.append(key.trial_id)
    metafunc.parametrize("webbench_trial", ids, ids=ids, indirect=True)


def _item_key(item: pytest.Item) -> TrialKey | None:
    trial_id = getattr(getattr(item, "callspec", None), "params", {}).get("webbench_trial")
    if trial_id is None:
        return None
    spec = state(item.config).specs.get(trial_id) if STATE_KEY in item.config.stash else None
    return spec.key if spec else TrialKey.parse(trial_id)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """After -k and any shuffling: each pair back to back, in the order fixed by the run ID."""
    if STATE_KEY not in config.stash:
        return
    st = state(config)
    if st.skip:  # --resume: what already has a result does not run again
        done = [item for item in items if (k := _item_key(item)) and k.trial_id in st.skip]
        if done:
            config.hook.pytest_deselected(items=done)
            done_ids = set(map(id, done))
            items[:] = [item for item in items if id(item) not in done_ids]
    keyed = [(k, item) for item in items if (k := _item_key(item))]
    by_id = {k.trial_id: item for k, item in keyed}
    keys = [k for k, _ in keyed]
    ordered = order_trials(keys, st.options.experiment_id, st.options.paired, st.options.attempts)
    if st.options.shard:
        from .pairing import shard_trials

        mine = {k.trial_id for k in shard_trials(ordered, *st.options.shard)}
        if others_shards := [by_id[k.trial_id] for k in ordered if k.trial_id not in mine]:
            config.hook.pytest_deselected(items=others_shards)
        ordered = [k for k in ordered if k.trial_id in mine]
    trials = set(map(id, by_id.values()))
    others = [item for item in items if id(item) not in trials]
    items[:] = [by_id[k.trial_id] for k in ordered] + others


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.getoption("resume", None):
        return  # the manifest holds the original plan
    if STATE_KEY in session.config.stash and not _is_worker(session.config) and not _xdist_controller(session.config):
        _write_manifest(session.config, [k for item in session.items if (k := _item_key(item))])


def _xdist_controller(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and config.getoption("dist", "no") != "no"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    config = node.config
    if STATE_KEY not in config.stash or (state(config).experiment_dir / "manifest.json").exists():
        return  # written already (or kept as planned, when resuming)
    keys = [TrialKey.parse(i.rsplit("[", 1)[1].rstrip("]")) for i in ids if "[" in i]
    opts = state(config).options
    _write_manifest(config, order_trials(keys, opts.experiment_id, opts.paired, opts.attempts))


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report, sched) -> None:
    """xdist: a worker died mid-trial (SIGKILL, out of memory). The trial it was running gets an
    errored record from the controller, so it is counted, reported and rerun by --resume-errored."""
    config = sched.config
    if STATE_KEY not in config.stash or "[" not in crashitem:
        return
    from .records import TrialRecord, read_manifest, trial_record_path, write_trial_record

    st = state(config)
    trial_id = crashitem.rsplit("[", 1)[1].rstrip("]")
    if trial_record_path(st.experiment_dir, trial_id).exists():
        return  # it finished writing before the worker died
    manifest = read_manifest(st.experiment_dir)
    planned = next((t for t in manifest.trials if t.trial_id == trial_id), None)
    if planned is None:
        return
    limits = manifest.task_limits[planned.task]
    write_trial_record(st.experiment_dir, TrialRecord(
        **planned.model_dump(), experiment_id=manifest.experiment_id, runner=manifest.runner, model=manifest.model,
        grading=limits.grading, placebo=limits.placebo, outcome="errored", stop_reason="worker_crashed",
        detail=f"the pytest-xdist worker running it died: {report.longreprtext[-1000:]}", worker="controller",
    ))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if STATE_KEY not in config.stash or not state(config).options.paired:
        return None
    from .scheduling import PairScheduling

    return PairScheduling(config, log)


def _write_manifest(config: pytest.Config, keys: list[TrialKey]) -> None:
    from .records import PlannedTrial, RunManifest, TaskLimits, write_manifest
    from .runners import runner_spec
    from .runners.install import installed_version

    st = state(config)
    opts = st.options
    runner = runner_spec(opts.runner)
    limits = {t.name: TaskLimits(grading=t.meta.grading, turn_cap=t.meta.turn_cap, spend_limit_usd=t.meta.spend_limit_usd,
                                 placebo=t.meta.placebo, tool_batch=t.meta.tool_batch, timeout_sec=t.timeout_sec,
                                 agree_on=t.meta.agree_on)
              for t in st.suite.tasks}
    manifest = RunManifest(
        experiment_id=opts.experiment_id, created_at=datetime.now(UTC).isoformat(), suite=st.suite.name,
        suite_path=str(st.suite.path), runner=opts.runner, model=runner.check_model(opts.model), browser=opts.browser,
        runner_preset=runner.model_dump(mode="json"), model_base_url=opts.model_base_url, environment=opts.environment,
        cli_version=installed_version(runner.cli.package) if runner.cli else None,
        attempts=opts.attempts, arms=list(opts.arms or st.suite.spec.arms), paired=opts.paired,
        shard=f"{opts.shard[0]}/{opts.shard[1]}" if opts.shard else None,
        trials=[PlannedTrial(trial_id=k.trial_id, task=k.task, attempt=k.attempt, arm=k.arm, pair_id=k.pair_id if opts.paired else None,
                             pair_position=pair_position(k, opts.experiment_id, opts.attempts) if opts.paired else None)
                for k in keys],
        broken_pairs=broken_pairs(keys) if opts.paired else [], task_limits=limits,
        content_hashes=st.suite.content_hashes, git_revision=_git_revision(st.suite.path), versions=_versions(),
    )
    write_manifest(st.experiment_dir, manifest)


def _git_revision(path: Path) -> str | None:
    try:
        rev = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--", "."], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if rev.returncode != 0:
        return None
    return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _versions() -> dict[str, str]:
    out = {}
    for dist in ("pytest-webbench", "harbor", "mcp", "playwright", "pytest", "scipy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    report = yield
    if report.failed and report.when in ("setup", "call") and STATE_KEY in item.config.stash:
        from .fixtures import record_if_missing

        record_if_missing(item, report)
    if STATE_KEY in item.config.stash:
        from .fixtures import RECORDER_KEY
        from .report.pytest_html import attach

        recorder = item.stash.get(RECORDER_KEY, None)
        html_active = item.config.pluginmanager.hasplugin("html") and bool(item.config.getoption("htmlpath", None))
        attach(item, report, recorder.written if recorder else None, html_active)
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if STATE_KEY not in config.stash or _is_worker(config):
        return
    st = state(config)
    if not (st.experiment_dir / "manifest.json").exists():
        return  # collection failed or nothing was selected: no run to report
    if config.option.collectonly:
        return  # a plan, nothing ran: the manifest is the result
    from .harbor_jobs import write_job_results
    from .report import write_report

    write_job_results(st.experiment_dir, st.options.experiment_id)
    st.report = write_report(st.experiment_dir)
    if config.getoption("publish", None) == "braintrust":
        from .report.publish import PublishError, publish_braintrust

        try:
            st.published = publish_braintrust(st.experiment_dir, config.getoption("publish_project", None))
        except PublishError as exc:  # the results are on disk; `python -m pytest_webbench.report --publish` retries
            st.published = str(exc)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if STATE_KEY not in config.stash or _is_worker(config):
        return
    report = getattr(state(config), "report", None)
    if report is None:
        return
    from .report.render import headline_lines, paired_lines

    terminalreporter.write_sep("=", "webbench")
    for line in headline_lines(report) + paired_lines(report):
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"report: {state(config).experiment_dir / 'report.md'} (and report.html, report.json)")
    published = getattr(state(config), "published", None)
    if isinstance(published, str):
        terminalreporter.write_line(f"publish failed: {published}", red=True)
    elif published:
        for experiment in published:
            terminalreporter.write_line(f"published {experiment.name} ({experiment.rows} rows): {experiment.url}")
