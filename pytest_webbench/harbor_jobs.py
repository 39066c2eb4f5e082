"""Gathers each arm's Harbor trials into a Harbor-shaped job directory (`jobs/<arm>/result.json`),
so Harbor's own tools can read a webbench run."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

from .records import atomic_write


def write_job_results(experiment_dir: Path, experiment_id: str) -> list[Path]:
    from harbor.models.job.result import JobResult, JobStats
    from harbor.models.trial.result import TrialResult

    written = []
    for arm_dir in sorted(p for p in (experiment_dir / "jobs").glob("*") if p.is_dir()):
        trials = []
        for result_path in sorted(arm_dir.glob("*/result.json")):
            try:
                trials.append(TrialResult.model_validate_json(result_path.read_text()))
            except ValueError:
                continue  # a trial cut off mid-write: the webbench record still counts it
        started = min((t.started_at for t in trials if t.started_at), default=datetime.now(UTC))
        job = JobResult(
            id=uuid.uuid5(uuid.NAMESPACE_URL, f"webbench:{experiment_id}:{arm_dir.name}"),
            started_at=started, finished_at=datetime.now(UTC), n_total_trials=len(trials),
            stats=JobStats(
                n_completed_trials=sum(t.exception_info is None for t in trials),
                n_errored_trials=sum(t.exception_info is not None for t in trials),
            ),
            trial_results=trials,
        )
        atomic_write(arm_dir / "result.json", job.model_dump_json(indent=2))
        written.append(arm_dir / "result.json")
    return written
