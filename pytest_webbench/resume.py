"""`--resume EXPERIMENT_ID`: run only the planned trials that have no result, into the same
experiment directory, so the run ends with one report over the whole plan.

The plan is the manifest's, not a new one: the suite files must hash as they did, and the run's
options (suite, runner, model, attempts, arms, pairing) must match. A pair that has only one
member recorded runs again whole, back to back as planned; the record it replaces is kept under
`trials/superseded/`, so nothing is lost. With `--resume-errored`, errored trials run again too.
"""

from __future__ import annotations

from pathlib import Path

from .records import RunManifest, read_manifest, read_trial_records, supersede_record


class ResumeError(Exception):
    pass


def check_plan(manifest: RunManifest, suite_name: str, content_hashes: dict[str, str], runner: str, model: str | None,
               attempts: int, arms: list[str], paired: bool, shard: str | None = None, environment: str = "host") -> None:
    wanted = {"suite": suite_name, "runner": runner, "model": model, "attempts": attempts, "arms": arms, "paired": paired,
              "shard": shard, "environment": environment}
    for field, value in wanted.items():
        if getattr(manifest, field) != value:
            raise ResumeError(f"--resume {manifest.experiment_id}: {field} was {getattr(manifest, field)!r}, "
                              f"now {value!r}; resume with the run's own options")
    changed = sorted(k for k in manifest.content_hashes if content_hashes.get(k) != manifest.content_hashes[k])
    if changed:
        raise ResumeError(f"--resume {manifest.experiment_id}: the suite changed since the run began ({', '.join(changed)}); "
                          "a run uses exactly the files it started with")


def trials_to_skip(experiment_dir: Path, rerun_errored: bool) -> set[str]:
    """Trial ids already done. Incomplete pairs are not done: their recorded member is moved
    aside (kept) so the pair runs again whole."""
    manifest = read_manifest(experiment_dir)
    records = {r.trial_id: r for r in read_trial_records(experiment_dir)[0]}
    done = {tid for tid, r in records.items() if not (rerun_errored and r.outcome == "errored")}
    members: dict[str, list[str]] = {}
    for trial in manifest.trials:
        if trial.pair_id:
            members.setdefault(trial.pair_id, []).append(trial.trial_id)
    for pair in members.values():
        if not all(tid in done for tid in pair):
            for tid in pair:
                if tid in records:
                    supersede_record(experiment_dir, tid)
                done.discard(tid)
    return done

