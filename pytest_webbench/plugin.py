"""pytest-webbench's options and hooks, all in one place; each delegates at once.

Without `--suite` (or `--resume`) the plugin does nothing, so a project's own tests run as usual.
The hooks every process needs are here; those of the process that plans and reports the run are
on `controller.RunController`, registered only there.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from .design.pairing import TrialKey, order_trials, pair_position
from .planning.state import NEXT_ITEM_KEY, STATE_KEY, TRIAL_KEY, WebbenchState, item_key, state

BENCH_MODULE = Path(__file__).parent / "trial" / "bench.py"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("webbench", "benchmark browser agents on web tasks")
    group.addoption("--suite", help="suite to run: a name under suites/ or a path to a suite folder")
    group.addoption("--runner", help="agent runner preset: reference, nop, codex, claude, pi (default: ini webbench_runner, "
                    "else the suite's default_runner)")
    group.addoption("--model", help="provider/model for every selected arm (default: the runner preset's)")
    group.addoption("--model-base-url", help="the model API's base URL, for a gateway or a local endpoint (default: the provider's)")
    group.addoption("--clawbench-set", metavar="SET", help="--suite clawbench: the case set of the clawbench-eval package "
                    "(v2 by default; v1, v1-lite, environmental-observation, claw-eval)")
    group.addoption("--clawbench-ungradable", action="store_true", help="--suite clawbench: plan the placeholder cases "
                    "too (no request can match them; reported apart as ungradable)")
    group.addoption("--judge-model", metavar="PROVIDER/MODEL", help="the LLM judge of write tasks whose check does not "
                    "decide the grade (ClawBench's cases), called through the model gateway (default: --model where the "
                    "runner has one)")
    group.addoption("--judge-base-url", help="the judge model's API base URL (default: the provider's)")
    group.addoption("--review", action="store_true", help="after the trials, a reviewer model reads the harness's account "
                    "of each failed, errored, flagged or discordant-pair trial and says what happened, its failure mode and "
                    "whether the agent kept its arm's rules: shown beside the verdicts, never changing one (docs/report.md)")
    group.addoption("--review-all", action="store_true", help="--review, of every trial")
    group.addoption("--review-model", metavar="PROVIDER/MODEL", help="the reviewer, called through the model gateway "
                    "(default: the judge's model, else --model)")
    group.addoption("--review-base-url", help="the reviewer's API base URL (default: its provider's)")
    group.addoption("--attempts", type=int, help="attempts per task and arm (default 1)")
    group.addoption("--arms", help="comma-separated arms to run (default: the suite's arms)")
    group.addoption("--unpaired", action="store_true", help="run every arm independently (no control/treatment pairs)")
    group.addoption("--sequential", action="store_true", help="run pairs in rounds and stop each task once it is decided "
                    "(an anytime-valid rule with a futility bound); --attempts is the most pairs a task may get, and a cap "
                    "of 2n pairs has about the power of n fixed pairs, for half the pairs or fewer (docs/statistics.md); "
                    "a task stopped without an effect shows none, it does not show there is none")
    group.addoption("--experiment-id", help="results go to RESULTS_DIR/ID (default: a new id); an existing id is refused")
    group.addoption("--resume", metavar="EXPERIMENT_ID", help="run only the planned trials of that experiment that have no "
                    "result, with the run's own suite and options (from its manifest)")
    group.addoption("--resume-errored", action="store_true", help="with --resume: run errored trials again too")
    group.addoption("--results-dir", help="where experiments are written (default: results)")
    group.addoption("--shard", metavar="I/N", help="run shard I of N (whole pairs dealt round-robin); give every machine "
                    "the same --experiment-id, then merge: python -m pytest_webbench.report merge OUT/ID SHARD_DIR...")
    group.addoption("--browser", choices=("local", "kernel"), help="browser backend (default local)")
    group.addoption("--environment", help="where agents run: host (default: this machine, isolated) or a Harbor "
                    "environment type (docker, daytona, modal, ...); a sandbox reaches the proxy at --proxy-url")
    group.addoption("--proxy-listen", metavar="HOST:PORT", help="the proxy's address (default 127.0.0.1 at a free port; "
                    "0.0.0.0:8765 for sandboxes; xdist workers take consecutive ports)")
    group.addoption("--proxy-url", metavar="URL", help="the proxy's base URL as agents reach it, '{port}' filled in "
                    "(e.g. http://host.docker.internal:{port}, or a tunnel's https URL)")
    group.addoption("--model-price", metavar="IN,OUT[,CACHED]", help="the model's price in $ per million tokens, "
                    "for the gateway's spend cap (default: litellm's cost map)")
    group.addoption("--allow-unpriced", action="store_true", help="run a model the cost map does not price (its "
                    "spend limit cannot be enforced; the report counts such trials)")
    group.addoption("--allow-unsealed", action="store_true", help="where this machine cannot give agents a private mount "
                    "namespace, run them unsealed anyway (the report says so); without it such a run is refused")
    group.addoption("--no-trace", action="store_true", help="no browser trace per trial (Playwright's trace.zip on "
                    "the local backend, Kernel's replay); each trial still gets its timeline page")
    group.addoption("--publish", choices=("braintrust",), help="after the report, publish the run (one experiment per arm; "
                    "needs BRAINTRUST_API_KEY)")
    group.addoption("--publish-project", help="Braintrust project (default: webbench-<suite>)")
    parser.addini("webbench_runner", "default --runner (empty: the suite's default_runner)", default="")
    parser.addini("webbench_attempts", "default --attempts", default="1")
    parser.addini("webbench_results_dir", "default --results-dir", default="results")
    parser.addini("webbench_browser", "default --browser", default="local")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for option in ("suite", "resume"):  # given, but empty (a shell variable that was not set): not "no run"
        if (value := config.getoption(option, None)) is not None and not value.strip():
            raise pytest.UsageError(f"--{option} is empty: name a suite (or the experiment ID to resume)")
    if not (config.getoption("suite", None) or config.getoption("resume", None)):
        return
    # Loading the suite and collecting its items make tens of thousands of objects that live to
    # the session's end: the cyclic collector would re-scan them many times over (a tenth of
    # collecting 10,000 items). Off until collection ends, then they are frozen out of its way.
    gc.disable()
    from .planning.configure import configure_run

    st, controller = configure_run(config)
    config.stash[STATE_KEY] = st
    from .trial import fixtures

    config.pluginmanager.register(fixtures, "webbench-fixtures")  # the trial's fixtures, only for a --suite run
    if controller is not None:
        config.pluginmanager.register(controller, "webbench-controller")
    config.args[:] = [str(BENCH_MODULE)]  # collect the trials, and nothing else
    # Harbor's own trial code reads its deprecated Task.checksum: a warning per trial no user can act on
    config.addinivalue_line("filterwarnings", r"ignore:Task\.checksum will be deprecated:DeprecationWarning:harbor\.")
    if config.pluginmanager.hasplugin("html"):
        from .report.pytest_html import HtmlColumns

        config.pluginmanager.register(HtmlColumns(), "webbench-html")


def _trial_keys(st: WebbenchState) -> list[TrialKey]:
    arms = st.options.arms or tuple(st.suite.spec.arms)
    return [TrialKey(task.name, attempt, arm)
            for task in st.suite.tasks for attempt in range(1, st.options.attempts + 1) for arm in task.arms(arms)]


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj) -> list[pytest.Function] | None:
    """The bench module's test, one item per trial, each named `test_trial[<trial id>]` as a
    parametrization would name it. Made here rather than parametrized: an item with no callspec
    costs pytest's fixture reordering nothing, and collecting 10,000 trials took ~0.2 s less
    (benchmarks/collection_scale.py)."""
    if name != "test_trial" or STATE_KEY not in collector.config.stash or collector.path != BENCH_MODULE:
        return None
    from .design.suite import TrialSpec

    st = state(collector.config)
    tasks = {t.name: t for t in st.suite.tasks}
    fixtureinfo = collector.session._fixturemanager.getfixtureinfo(node=collector, func=obj, cls=None)
    items = []
    for key in _trial_keys(st):
        paired = st.options.paired and tasks[key.task].paired
        position = pair_position(key, st.options.experiment_id, st.options.attempts) if paired else None
        st.specs[key.trial_id] = TrialSpec(key, tasks[key.task], position)
        # the node ID from the whole name (pytest 9 builds it from originalname and a callspec, which this has not)
        item = pytest.Function.from_parent(collector, name=f"{name}[{key.trial_id}]", callobj=obj, fixtureinfo=fixtureinfo,
                                           keywords={key.trial_id: True})
        item.originalname = name
        item.stash[TRIAL_KEY] = key
        items.append(item)
    return items


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """After -k and any shuffling: each pair back to back, in the order fixed by the run ID."""
    if STATE_KEY not in config.stash:
        return
    st = state(config)
    if st.skip or st.planned is not None:  # --resume: only the plan's trials, and what has a result does not run again
        done = [item for item in items if (k := item_key(item))
                and (k.trial_id in st.skip or (st.planned is not None and k.trial_id not in st.planned))]
        if done:
            config.hook.pytest_deselected(items=done)
            done_ids = set(map(id, done))
            items[:] = [item for item in items if id(item) not in done_ids]
    keyed = [(k, item) for item in items if (k := item_key(item))]
    by_id = {k.trial_id: item for k, item in keyed}
    keys = [k for k, _ in keyed]
    if st.options.sequential:  # rounds: every task's attempt 1, then attempt 2, ... (a stable sort keeps task order)
        keys.sort(key=lambda k: k.attempt)
    ordered = order_trials(keys, st.options.experiment_id, st.options.paired, st.options.attempts)
    if st.options.shard:
        from .design.pairing import shard_trials

        st.whole_plan = [k.trial_id for k in ordered]
        if plan_file := getattr(config, "workerinput", {}).get("webbench_plan_file"):
            _hand_plan_to_controller(plan_file, st.whole_plan, config.workerinput["workerid"])
        mine = {k.trial_id for k in shard_trials(ordered, *st.options.shard)}
        if others_shards := [by_id[k.trial_id] for k in ordered if k.trial_id not in mine]:
            config.hook.pytest_deselected(items=others_shards)
        ordered = [k for k in ordered if k.trial_id in mine]
    trials = set(map(id, by_id.values()))
    others = [item for item in items if id(item) not in trials]
    items[:] = [by_id[k.trial_id] for k in ordered] + others


def _hand_plan_to_controller(path: str, plan: list[str], worker: str) -> None:
    """An xdist controller collects nothing, and a worker reports only its shard's items: the whole
    plan (which -k shaped) reaches the manifest through a file the controller named. Every worker
    computes the same plan; each replaces the file whole, so the controller reads one complete copy."""
    import json

    partial = f"{path}.{worker}"
    with open(partial, "w") as out:
        json.dump(plan, out)
    os.replace(partial, path)


def pytest_collection_finish(session: pytest.Session) -> None:
    if STATE_KEY in session.config.stash and not gc.isenabled():
        gc.freeze()  # what collection made stays (the items, the suite); the collector skips it from now on
        gc.enable()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Which trial comes next, so the browser it needs can start while this one runs."""
    item.stash[NEXT_ITEM_KEY] = nextitem


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """--sequential: a trial of a task already decided is not run (nothing of it is opened)."""
    if STATE_KEY in item.config.stash and state(item.config).options.sequential and (key := item_key(item)):
        from .planning.stopping import skip_if_decided

        skip_if_decided(state(item.config), key, item.config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    report = yield
    if STATE_KEY not in item.config.stash:
        return report
    from .trial.recorder import RECORDER_KEY, record_if_missing
    from .report.pytest_html import attach

    if report.failed and report.when in ("setup", "call"):
        record_if_missing(item, report, call.excinfo.value if call.excinfo else None)
    recorder = item.stash.get(RECORDER_KEY, None)
    html_active = item.config.pluginmanager.hasplugin("html") and bool(item.config.getoption("htmlpath", None))
    attach(item, report, recorder.written if recorder else None, html_active, state(item.config).experiment_dir)
    return report
