"""Merging the experiment directories of a sharded run (`--shard I/N` on N machines) into one.

The shards must be one run: the same experiment ID (so the same pair order), suite files, runner,
model, attempts, arms and pairing, every shard 1..N present once, and no trial in two shards.
The merged directory gets one manifest (the whole plan, in run order), every trial's record
(superseded ones too), their index and its Harbor folder, and then the report over the whole run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..design.pairing import TrialKey, broken_pairs, order_trials
from ..results.record_index import rebuild_index
from ..results.claims import ExperimentExists, claim_experiment_dir
from ..results.records import RunManifest, read_manifest, write_manifest

SAME = ("experiment_id", "suite", "runner", "model", "browser", "environment", "attempts", "arms", "paired", "content_hashes")


class MergeError(Exception):
    pass


def merge_shards(out_dir: Path, shard_dirs: list[Path]) -> RunManifest:
    manifests = []
    for directory in shard_dirs:
        try:
            manifests.append(read_manifest(directory))
        except FileNotFoundError as exc:
            raise MergeError(str(exc)) from None
    first = manifests[0]
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
    if seen != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(seen))
        twice = sorted({i for i in seen if seen.count(i) > 1})
        raise MergeError(f"shards of {count}: missing {missing or 'none'}, given twice {twice or 'none'}")
    owner: dict[str, Path] = {}
    for directory, manifest in zip(shard_dirs, manifests):
        for trial in manifest.trials:
            if trial.trial_id in owner:
                raise MergeError(f"trial {trial.trial_id} is in both {owner[trial.trial_id]} and {directory}")
            owner[trial.trial_id] = directory

    try:
        out = claim_experiment_dir(out_dir.parent, out_dir.name)
    except ExperimentExists as exc:
        raise MergeError(str(exc)) from None
    for directory in shard_dirs:
        for sub in ("trials", "jobs"):
            if (directory / sub).is_dir():
                shutil.copytree(directory / sub, out / sub, dirs_exist_ok=True)
    rebuild_index(out)  # each shard's index was copied over the last one's: one index from all the records
    planned = {t.trial_id: t for m in manifests for t in m.trials}
    # the order an unsharded run collects in: suite task order, attempts, arms; then pairs balanced
    every = [TrialKey(task, attempt, arm) for task, limits in first.task_limits.items() for attempt in range(1, first.attempts + 1)
             for arm in first.arms if limits.has_arm(arm)]
    keys = order_trials([k for k in every if k.trial_id in planned], first.experiment_id, first.paired, first.attempts)
    merged = first.model_copy(update={
        "shard": None, "trials": [planned[k.trial_id] for k in keys],
        "broken_pairs": broken_pairs(keys, {t for t, lim in first.task_limits.items() if not lim.paired}) if first.paired else [],
        "created_at": min(m.created_at for m in manifests),
    })
    write_manifest(out, merged)
    return merged
