"""Merging the experiment directories of a sharded run (`--shard I/N` on N machines) into one.

The shards must be one run: the same experiment ID (so the same pair order), suite files, runner,
model, attempts, arms and pairing, each shard at most once, and no trial in two shards. The merged
directory gets one manifest (the whole plan, in run order), every trial's record (superseded ones
too), their index and its Harbor folder, and then the report over the whole run.

A shard that never uploaded (its machine failed or timed out) is refused unless `partial` is
asked for: then its trials stay in the plan without a record, so the report counts them missing
and `pytest --resume ID` on the merged directory runs them. Each shard's manifest holds the whole
plan for that (`plan`), since -k may have shaped it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..design.pairing import TrialKey, broken_pairs, order_trials
from ..results.record_index import INDEX, rebuild_index
from ..results.claims import ExperimentExists, claim_experiment_dir, resume_command
from ..results.records import ManifestError, RunManifest, planned_trials, read_manifest, write_manifest
from ..results.run_notes import SUITE_CHECK, UNDELETED_DIR, SuiteCheck, write_suite_check

SAME = ("experiment_id", "suite", "runner", "model", "browser", "environment", "attempts", "arms", "paired", "content_hashes")


class MergeError(Exception):
    pass


def merge_shards(out_dir: Path, shard_dirs: list[Path], partial: bool = False) -> tuple[RunManifest, list[str]]:
    """The merged run's manifest, and the shards that were missing as "I/N" (none unless `partial`)."""
    manifests = [_read(directory) for directory in shard_dirs]
    first = manifests[0]
    if out_dir.name != first.experiment_id:  # --resume finds a run by its folder's name
        raise MergeError(f"{out_dir}: the merged run's folder must be named for its experiment, "
                         f"{out_dir.parent / first.experiment_id}, so that `pytest --resume` finds it")
    for directory, manifest in zip(shard_dirs, manifests):
        if manifest.shard is None:
            raise MergeError(f"{directory}: not a shard (its manifest has no shard); nothing to merge")
        for field in SAME:
            if getattr(manifest, field) != getattr(first, field):
                raise MergeError(f"{directory}: {field} is {getattr(manifest, field)!r}, but {shard_dirs[0]} has "
                                 f"{getattr(first, field)!r}: these are not shards of one run")
    counts = {m.shard.split("/")[1] for m in manifests}
    if len(counts) != 1:
        raise MergeError(f"the shards were cut differently: {sorted(m.shard for m in manifests)}")
    count = int(counts.pop())
    seen = sorted(int(m.shard.split("/")[0]) for m in manifests)
    twice = sorted({i for i in seen if seen.count(i) > 1})
    missing = sorted(set(range(1, count + 1)) - set(seen))
    if twice or (missing and not partial):
        raise MergeError(f"shards of {count}: missing {missing or 'none'}, given twice {twice or 'none'}"
                         + ("; --partial merges what there is (the missing shards' trials are reported missing, and "
                            f"`{resume_command(out_dir)}` runs them)" if missing and not twice else ""))
    owner: dict[str, Path] = {}
    for directory, manifest in zip(shard_dirs, manifests):
        for trial in manifest.trials:
            if trial.trial_id in owner:
                raise MergeError(f"trial {trial.trial_id} is in both {owner[trial.trial_id]} and {directory}")
            owner[trial.trial_id] = directory
    keys = _whole_plan(shard_dirs, manifests, set(owner), need_plan=bool(missing))
    _check_files_are_their_own(shard_dirs, owner)

    try:
        out = claim_experiment_dir(out_dir.parent, out_dir.name)
    except ExperimentExists as exc:
        raise MergeError(str(exc)) from None
    for directory in shard_dirs:
        for sub in ("trials", "jobs", UNDELETED_DIR):  # a billed browser a shard could not delete stays listed
            if (directory / sub).is_dir():
                shutil.copytree(directory / sub, out / sub, dirs_exist_ok=True)
    rebuild_index(out)  # each shard's index was copied over the last one's: one index from all the records
    if checks := _suite_checks(shard_dirs):
        write_suite_check(out, checks)
    lone = {t for t, limits in first.task_limits.items() if not limits.paired}
    merged = first.model_copy(update={
        "shard": None, "plan": None, "trials": planned_trials(keys, first.experiment_id, first.attempts, first.paired, lone),
        "broken_pairs": broken_pairs(keys, lone) if first.paired else [],
        "created_at": min(m.created_at for m in manifests),
    })
    write_manifest(out, merged)
    return merged, [f"{i}/{count}" for i in missing]


def _read(directory: Path) -> RunManifest:
    try:
        return read_manifest(directory)
    except (OSError, ManifestError) as exc:
        raise MergeError(str(exc)) from None


def _check_files_are_their_own(shard_dirs: list[Path], owner: dict[str, Path]) -> None:
    """Every trial's files come from one shard, and a shard's records are of its own trials: the
    copy lays the shards over each other, so a record or trial folder in two shards (a stray copy)
    would silently replace what the trial's own shard wrote. (Harbor's job-level files, one per arm
    in each shard, and the records' index are not a trial's: the last copy stands, the index is
    rebuilt.)"""
    origin: dict[str, Path] = {}  # by the path casefolded: on a case-insensitive disk Alpha and alpha are one file

    def claim(relative: Path, directory: Path) -> None:
        if (key := str(relative).casefold()) in origin:
            raise MergeError(f"{relative} is in both {origin[key]} and {directory}: each trial's files come "
                             "from the one shard that ran it; nothing was merged")
        origin[key] = directory

    for directory in shard_dirs:
        trials, jobs = directory / "trials", directory / "jobs"
        for path in sorted(trials.rglob("*")) if trials.is_dir() else ():
            if path.is_dir() or path.name == INDEX:
                continue
            claim(path.relative_to(directory), directory)
            if path.parent == trials and path.suffix == ".json":  # a record, not a superseded one
                if path.stem not in owner:
                    raise MergeError(f"{path}: a record of no trial of this run; nothing was merged")
                if owner[path.stem] != directory:
                    raise MergeError(f"{path}: a record of {path.stem}, which {owner[path.stem]} ran; nothing was merged")
        for trial_folder in sorted(jobs.glob("*/*")) if jobs.is_dir() else ():
            if trial_folder.is_dir():
                claim(trial_folder.relative_to(directory), directory)


def _suite_checks(shard_dirs: list[Path]) -> SuiteCheck | None:
    """One check of the suite's files for the merged run: a file that changed in any shard changed
    for the run. None (the report then says "not checked") unless every shard checked at its end."""
    checks = []
    for directory in shard_dirs:
        try:
            checks.append(SuiteCheck.model_validate_json((directory / SUITE_CHECK).read_bytes()))
        except (OSError, ValueError):
            return None
    before = checks[0].before
    after = dict(before)
    for check in checks:
        after.update({key: value for key, value in check.after.items() if before.get(key) != value})
        for gone in set(before) - set(check.after):  # a file removed during that shard
            after.pop(gone, None)
    return SuiteCheck(before=before, after=after)


def _whole_plan(shard_dirs: list[Path], manifests: list[RunManifest], present: set[str], need_plan: bool) -> list[TrialKey]:
    """The run's trials in the order an unsharded run runs them: the plan every shard recorded, or,
    for shards written before manifests held it, the shards' own trials put back in that order."""
    plans = {tuple(m.plan) for m in manifests if m.plan is not None}
    if len(plans) > 1:
        raise MergeError("the shards recorded different plans (was each run with the same -k and suite?): "
                         + ", ".join(f"{d} plans {len(m.plan or [])} trials" for d, m in zip(shard_dirs, manifests)))
    if plans:
        first = manifests[0]
        try:
            plan = [TrialKey.parse(trial_id) for trial_id in plans.pop()]
        except ValueError as exc:
            raise MergeError(f"{shard_dirs[0] / 'manifest.json'}: plan: {exc}") from None
        for key in plan:  # a plan is the shards' own account: it must name the run's tasks, attempts and arms
            limits = first.task_limits.get(key.task)
            if limits is None or key.arm not in first.arms or not limits.has_arm(key.arm) or not 1 <= key.attempt <= first.attempts:
                raise MergeError(f"{shard_dirs[0] / 'manifest.json'}: plan: {key.trial_id} is no trial of this run "
                                 f"(tasks, {first.attempts} attempt(s), arms {', '.join(first.arms)})")
        if stray := sorted(present - {k.trial_id for k in plan}):
            raise MergeError(f"trial {stray[0]} ran in a shard but is not in the run's plan")
        return plan
    if need_plan:
        raise MergeError("these shards' manifests do not record the whole plan (written by an older version), so "
                         "what a missing shard held is unknown: merge every shard")
    first = manifests[0]
    every = [TrialKey(task, attempt, arm) for task, limits in first.task_limits.items()
             for attempt in range(1, first.attempts + 1) for arm in first.arms if limits.has_arm(arm)]
    return order_trials([k for k in every if k.trial_id in present], first.experiment_id, first.paired, first.attempts)
