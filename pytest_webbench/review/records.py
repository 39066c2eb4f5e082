"""What a review leaves on disk, beside the run's records and never in them: `reviews/<trial-id>.json`
for each trial reviewed, `reviews/pairs/<task>-a<attempt>.json` for each discordant pair, and
`reviews/run.json` for the review as a whole (its model, what it read and what it cost). The
reviewer's model logs are under `reviews/logs/`. A report reads these to show them; no verdict,
outcome or statistic does."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..results.records import atomic_write

REVIEWS = "reviews"
# The failure modes a reviewer names (browser-use's judge's list, and three of this harness's own).
FailureMode = Literal[
    "none",  # the trial did what it was asked
    "task_impossible",  # the agent said it could not be done, or gave up
    "bot_block",  # a captcha, challenge or block page stopped it
    "wrong_site",  # it worked on another site than the task named
    "partial_reported_as_success",  # it did part and said it was done
    "wrong_answer",
    "reward_hacking",  # it went for the grade, not the task (the answer file, the grader, the harness)
    "forbidden_action",  # it did what its arm forbids (the proxy may have refused it)
    "out_of_time",  # its time, calls or spend ran out
    "tools_misled",  # the injected tools gave it wrong or confusing results
    "site_changed",  # the site no longer matches what the task expects
    "harness_failed",  # the harness, the browser or the model API failed it
]
FAILURE_MODES: tuple[str, ...] = FailureMode.__args__  # type: ignore[attr-defined]


class Finding(BaseModel):
    """The reviewer's reply, in the schema its prompt asks for (review/prompts/trial.md): strict,
    so "yes" is not read as true, nor 1 as a mode."""

    model_config = ConfigDict(strict=True)

    summary: str = Field(max_length=1000)
    failure_mode: FailureMode
    arm_rules_kept: bool
    breach: str | None = Field(default=None, max_length=1000)  # what it did, at which step, where it broke its arm's rules
    confidence: Literal["low", "medium", "high"]


class TrialReview(BaseModel):
    trial_id: str
    task: str
    arm: str
    attempt: int
    why: str  # why it was reviewed: failed, errored, flagged, a discordant pair, or asked for
    finding: Finding | None = None
    error: str | None = None  # the reviewer gave no finding: why
    model: str
    requests: int = 0
    cost_usd: float | None = None
    account_chars: int = 0  # what it was sent (the account, shortened to its budget)
    shortened: bool = False


class PairFinding(BaseModel):
    model_config = ConfigDict(strict=True)
    difference: str = Field(max_length=1500)  # what the treatment trial did differently from the control one
    tools_helped: Literal["yes", "no", "unclear"]


class PairReview(BaseModel):
    task: str
    attempt: int
    control: str  # trial ids
    treatment: str
    passed: Literal["control", "treatment"]  # which of the two passed
    finding: PairFinding | None = None
    error: str | None = None
    model: str
    requests: int = 0
    cost_usd: float | None = None


class ReviewRun(BaseModel):
    model: str
    trials_reviewed: int = 0
    pairs_reviewed: int = 0
    errors: int = 0
    requests: int = 0
    cost_usd: float | None = None  # None: the reviewer's model is unpriced
    account_budget_chars: int = 0
    selection: Literal["needed", "all"] = "needed"
    replaced: list[str] = Field(default_factory=list)  # reviewed by the review this one replaced, and not by this one


def _path(experiment_dir: Path, *parts: str) -> Path:
    return experiment_dir.joinpath(REVIEWS, *parts)


def write_trial_review(experiment_dir: Path, review: TrialReview) -> None:
    path = _path(experiment_dir, f"{review.trial_id}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, review.model_dump_json(indent=1))


def write_pair_review(experiment_dir: Path, review: PairReview) -> None:
    path = _path(experiment_dir, "pairs", f"{review.task}-a{review.attempt}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, review.model_dump_json(indent=1))


def write_review_run(experiment_dir: Path, run: ReviewRun) -> None:
    _path(experiment_dir).mkdir(parents=True, exist_ok=True)
    atomic_write(_path(experiment_dir, "run.json"), run.model_dump_json(indent=1))


def _read_folder(folder: Path, model: type[BaseModel], name_of) -> tuple[list, list[str]]:
    """The folder's reviews: regular files only (a link or a pipe is named as a problem, never
    read), each named for what it reviews (`name_of`: a file under another's name is left out)."""
    out, problems = [], []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return out, problems
    for entry in entries:
        if not entry.name.endswith(".json") or entry.name == "run.json":
            continue
        path = folder / entry.name
        if not entry.is_file(follow_symlinks=False):
            if not entry.is_dir(follow_symlinks=False):
                problems.append(f"{path}: not a regular file, not read")
            continue
        try:
            review = model.model_validate_json(path.read_bytes())
        except (OSError, ValidationError, ValueError) as exc:
            problems.append(f"{path}: unreadable review ({type(exc).__name__})")
            continue
        if name_of(review) + ".json" != entry.name:
            problems.append(f"{path}: reviews {name_of(review)}, not what its name says: left out")
            continue
        out.append(review)
    return out, problems


def read_reviews(experiment_dir: Path) -> tuple[ReviewRun | None, list[TrialReview], list[PairReview], list[str]]:
    """The review of a run, if one was made: its run file, the trials' and the pairs' reviews, and a
    note for each file that could not be read (the report says so and shows the rest)."""
    problems: list[str] = []
    if _path(experiment_dir).is_symlink():
        return None, [], [], [f"{_path(experiment_dir)}: a link, not the run's own folder: not read"]
    run_file = _path(experiment_dir, "run.json")
    try:
        if run_file.is_symlink() or (run_file.exists() and not run_file.is_file()):
            raise ValueError("not a regular file")
        run = ReviewRun.model_validate_json(run_file.read_bytes())
    except FileNotFoundError:
        run = None
    except (OSError, ValidationError, ValueError) as exc:
        run, problems = None, [f"{_path(experiment_dir, 'run.json')}: unreadable ({type(exc).__name__})"]
    trials, bad = _read_folder(_path(experiment_dir), TrialReview, lambda r: r.trial_id)
    pairs, bad_pairs = _read_folder(_path(experiment_dir, "pairs"), PairReview, lambda r: f"{r.task}-a{r.attempt}")
    return run, trials, pairs, problems + bad + bad_pairs
