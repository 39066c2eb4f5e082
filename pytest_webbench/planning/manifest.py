"""The run's plan, as the manifest records it: what was asked (suite, runner, model, arms,
attempts, pairing), the trials in run order, each task's limits, and what it ran with (the suite's
hashes, the git revision, package and CLI versions)."""

from __future__ import annotations

import importlib.metadata
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..design.pairing import TrialKey, broken_pairs
from ..results.records import RunManifest, TaskLimits, planned_trials, write_manifest
from .stopping import plan_for

if TYPE_CHECKING:
    from .state import WebbenchState

VERSIONED = ("pytest-webbench", "harbor", "mcp", "playwright", "pytest", "scipy", "clawbench-eval")


def build_manifest(st: WebbenchState, keys: list[TrialKey]) -> RunManifest:
    from ..runners import runner_spec
    from ..grading.grade import needs_judge
    from ..runners.install import installed_version

    opts = st.options
    runner = runner_spec(opts.runner)
    limits = {t.name: TaskLimits(grading=t.meta.grading, turn_cap=t.meta.turn_cap, spend_limit_usd=t.meta.spend_limit_usd,
                                 placebo=t.meta.placebo, shortcut=t.meta.shortcut, tool_batch=t.meta.tool_batch, timeout_sec=t.timeout_sec,
                                 agree_on=t.meta.agree_on, ungradable=t.meta.ungradable, group=t.meta.group,
                                 judged=needs_judge(t.meta), arms=list(t.meta.arms) if t.meta.arms is not None else None)
              for t in st.suite.tasks}
    lone = {t.name for t in st.suite.tasks if not t.paired}  # no pairs: control runs alone
    return RunManifest(
        experiment_id=opts.experiment_id, created_at=datetime.now(UTC).isoformat(), suite=st.suite.name,
        suite_path=str(st.suite.path), runner=opts.runner, model=runner.check_model(opts.model), browser=opts.browser,
        runner_preset=runner.model_dump(mode="json"), model_base_url=opts.model_base_url, environment=opts.environment,
        model_price=opts.model_price, allow_unpriced=opts.allow_unpriced, trace=opts.trace,
        cli_version=installed_version(runner.cli.package) if runner.cli else None,
        attempts=opts.attempts, arms=list(opts.arms or st.suite.spec.arms), paired=opts.paired,
        shard=f"{opts.shard[0]}/{opts.shard[1]}" if opts.shard else None, plan=st.whole_plan if opts.shard else None,
        sequential=plan_for(opts.attempts) if opts.sequential else None,
        isolation=_isolation(opts, [st.suite.task(name) for name in {k.task for k in keys}]),
        trials=planned_trials(keys, opts.experiment_id, opts.attempts, opts.paired, lone),
        broken_pairs=broken_pairs(keys, lone) if opts.paired else [], task_limits=limits,
        case_set=st.suite.case_set, ungradable=st.suite.ungradable,
        judge_model=st.judge.model if st.judge else None, judge_named=bool(opts.judge_model) if st.judge else None,
        judge_base_url=opts.judge_base_url if st.judge else None,
        content_hashes=st.suite.content_hashes, git_revision=git_revision(st.suite.path), versions=versions(),
    )


def _isolation(opts, tasks) -> str:
    """What walls the run's agents have: `mount+net` (each command sealed: own network, mount and PID
    namespaces), or `none` (unsealed, allowed with --allow-unsealed); `sandbox:<type>` for a Harbor
    sandbox holding every agent to the proxy's host, `sandbox:<type>+open` where a task of the run
    gave its agent network of its own (allowed with --allow-unsealed)."""
    if opts.environment != "host":
        from ..runners import runner_spec

        # the reference and nop runners run no command of an agent's: nothing in the sandbox to wall in
        open_network = runner_spec(opts.runner).agent_commands and any(task.agent_has_own_network for task in tasks)
        return f"sandbox:{opts.environment}" + ("+open" if open_network else "")
    from ..environments.seal import isolation

    return isolation()


def write_run_manifest(st: WebbenchState, keys: list[TrialKey]) -> None:
    write_manifest(st.experiment_dir, build_manifest(st, keys))


def git_revision(path: Path) -> str | None:
    try:
        rev = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--", "."], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if rev.returncode != 0:
        return None
    return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def versions() -> dict[str, str]:
    out = {}
    for dist in VERSIONED:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out
