"""Gathers each arm's Harbor trials into a Harbor-shaped job directory (`jobs/<arm>/result.json`),
so Harbor's own tools can read a webbench run.

A trial result that cannot be read (cut off mid-write, say) still counts in the job's totals, as
errored, and is named in `jobs/problems.json`, which the report shows; the webbench record of the
trial is what the report counts either way.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

from .records import atomic_write

PROBLEMS = "problems.json"


def write_job_results(experiment_dir: Path, experiment_id: str) -> list[str]:
    """Writes every arm's job result; returns what could not be read (also kept in jobs/problems.json)."""
    from harbor.models.job.result import JobResult, JobStats
    from harbor.models.trial.result import TrialResult

    problems: list[str] = []
    jobs_dir = experiment_dir / "jobs"
    for arm_dir in sorted(p for p in jobs_dir.glob("*") if p.is_dir()):
        trials, unreadable = [], []
        for result_path in sorted(arm_dir.glob("*/result.json")):
            try:
                trials.append(TrialResult.model_validate_json(result_path.read_text()))
            except (ValueError, OSError) as exc:
                unreadable.append(result_path)
                problems.append(f"{result_path.relative_to(experiment_dir)}: unreadable Harbor trial result "
                                f"({type(exc).__name__}); counted as errored in jobs/{arm_dir.name}/result.json")
        started = min((t.started_at for t in trials if t.started_at), default=datetime.now(UTC))
        job = JobResult(
            id=uuid.uuid5(uuid.NAMESPACE_URL, f"webbench:{experiment_id}:{arm_dir.name}"),
            started_at=started, finished_at=datetime.now(UTC), n_total_trials=len(trials) + len(unreadable),
            stats=JobStats(
                n_completed_trials=sum(t.exception_info is None for t in trials),
                n_errored_trials=sum(t.exception_info is not None for t in trials) + len(unreadable),
            ),
            trial_results=trials,
        )
        atomic_write(arm_dir / "result.json", job.model_dump_json(indent=2))
    if problems or (jobs_dir / PROBLEMS).exists():
        atomic_write(jobs_dir / PROBLEMS, json.dumps(problems, indent=2))
    return problems


def read_job_problems(experiment_dir: Path) -> list[str]:
    try:
        problems = json.loads((experiment_dir / "jobs" / PROBLEMS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [str(p) for p in problems] if isinstance(problems, list) else []
