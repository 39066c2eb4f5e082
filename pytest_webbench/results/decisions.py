"""A sequential run's decisions on disk (`decisions/<task>.json`), and the rule the run used as its
manifest records it. Written by planning/stopping.py as a task is decided, read by the scheduler,
a worker about to run a trial, and the report."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from ..design.pairing import TrialKey

DECISIONS = "decisions"


class SequentialPlan(BaseModel):
    """The rule a sequential run uses, as the manifest records it."""

    max_pairs: int
    alpha: float = 0.05  # the chance of any false claim about a task, over both endpoints
    alpha_per_endpoint: float | None = None  # pass/fail and speed each (None: a run before the split)
    futility_below: float
    description: str


class TaskDecision(BaseModel):
    task: str
    outcome: Literal["effect", "futility"]  # pass/fail: a difference shown, or none to be shown within the cap
    favours: Literal["treatment", "control"] | None = None
    speed: Literal["effect", "futility"]
    speed_favours: Literal["treatment", "control"] | None = None
    pairs: int  # tested pairs (both trials ended) the decision rests on
    # where each walk first stopped (the task runs on until both have): None in decisions written before
    pass_fail_stopped_at: int | None = None
    speed_stopped_at: int | None = None
    # their attempts: under -n they end out of order, so the pairs seen are not always 1..pairs
    attempts: list[int] = Field(default_factory=list)
    last_attempt: int  # the highest attempt whose pair had run when it was decided
    control_only: int
    treatment_only: int
    treatment_faster: int
    control_faster: int
    # anytime-valid p-values of the two walks (stats/sequential.py anytime_p), for Holm over tasks
    p_value: float | None = None
    speed_p_value: float | None = None
    decided_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())


def read_decision(experiment_dir: Path, task: str) -> TaskDecision | None:
    try:
        return TaskDecision.model_validate_json((experiment_dir / DECISIONS / f"{task}.json").read_bytes())
    except (OSError, ValidationError, ValueError):
        return None


def read_decisions(experiment_dir: Path) -> dict[str, TaskDecision]:
    out = {}
    for path in sorted((experiment_dir / DECISIONS).glob("*.json")):
        if (decision := read_decision(experiment_dir, path.stem)) is not None:
            out[decision.task] = decision
    return out


def write_decision(experiment_dir: Path, decision: TaskDecision) -> TaskDecision:
    """Written with an exclusive create, so of two workers deciding at once the first wins: the
    decision on disk is returned either way."""
    folder = experiment_dir / DECISIONS
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with open(folder / f"{decision.task}.json", "x", encoding="utf-8") as f:
            f.write(decision.model_dump_json(indent=2))
            f.flush()
            os.fsync(f.fileno())
    except FileExistsError:
        return read_decision(experiment_dir, decision.task) or decision
    return decision


def not_run(key: TrialKey, decision: TaskDecision | None) -> bool:
    """Whether the trial falls after its task was decided (its pair, or its playwright round)."""
    return decision is not None and key.attempt > decision.last_attempt
