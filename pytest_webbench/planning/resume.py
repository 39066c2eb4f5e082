"""`--resume EXPERIMENT_ID`: run only the planned trials that have no result, into the same
experiment directory, so the run ends with one report over the whole plan.

The plan is the manifest's, not a new one: the run's options (runner, model, attempts, arms,
pairing, browser, environment, shard) are taken from it (options.py refuses one given again with
another value), and the suite must be the same suite with its files hashing as they did. A pair that has only one
member recorded runs again whole, back to back as planned; the record it replaces is kept under
`trials/superseded/`, so nothing is lost. With `--resume-errored`, errored trials run again too.
"""

from __future__ import annotations

from pathlib import Path

from ..results.record_index import rebuild_index
from ..results.records import RunManifest, read_manifest, read_trial_records, supersede_record


class ResumeError(Exception):
    pass


def check_plan(manifest: RunManifest, suite_name: str, content_hashes: dict[str, str]) -> None:
    if manifest.suite != suite_name:
        raise ResumeError(f"--resume {manifest.experiment_id}: suite was {manifest.suite!r}, now {suite_name!r}; "
                          "resume with the run's own suite (or leave --suite out)")
    changed = sorted(k for k in manifest.content_hashes if content_hashes.get(k) != manifest.content_hashes[k])
    if changed:
        raise ResumeError(f"--resume {manifest.experiment_id}: the suite changed since the run began ({', '.join(changed)}); "
                          "a run uses exactly the files it started with")


def trials_to_skip(experiment_dir: Path, rerun_errored: bool, move_aside: bool = True) -> set[str]:
    """Trial ids already done. Incomplete pairs are not done: their recorded member is moved
    aside (kept) so the pair runs again whole; without `move_aside` (--collect-only: what would
    run is listed, nothing runs) it stays where it is."""
    manifest = read_manifest(experiment_dir)
    records = {r.trial_id: r for r in read_trial_records(experiment_dir)[0]}
    done = {tid for tid, r in records.items()  # a record another run wrote (a file copied in) does not count
            if r.experiment_id == manifest.experiment_id and not (rerun_errored and r.outcome == "errored")}
    members: dict[str, list[str]] = {}
    for trial in manifest.trials:
        if trial.pair_id:
            members.setdefault(trial.pair_id, []).append(trial.trial_id)
    moved = False
    for pair in members.values():
        if not all(tid in done for tid in pair):
            for tid in pair:
                if tid in records and move_aside:
                    supersede_record(experiment_dir, tid)
                    moved = True
                done.discard(tid)
    if moved:
        rebuild_index(experiment_dir)  # so the index holds no line of a record moved aside
    return done


def resumed_trials(experiment_dir: Path, suite, rerun_errored: bool, move_aside: bool = True) -> tuple[set[str], set[str]]:
    """Checks the suite against the run's manifest, then says which trials the plan holds and
    which of them are done (the controller decides and tells the workers, so all agree)."""
    manifest = read_manifest(experiment_dir)
    check_plan(manifest, suite.name, suite.content_hashes)
    return {t.trial_id for t in manifest.trials}, trials_to_skip(experiment_dir, rerun_errored, move_aside)
