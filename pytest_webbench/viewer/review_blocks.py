"""The reviewer's findings on a trial's page and a pair's (--review, review/records.py): what it
said happened, beside the harness's own account above it, and labelled as a reading aid."""

from __future__ import annotations

import os
from html import escape
from pathlib import Path

from pydantic import ValidationError

from ..review.records import REVIEWS, PairReview, ReviewRun, TrialReview

AID = "a model's reading of the harness's account above: a reading aid, not the verdict"


def _read(name: str | Path, model):
    """A review file of the run's own: a regular file, not a link (records.read_reviews is the same)."""
    try:
        if not os.path.lexists(name):  # most trials have none: one look by a plain string, not three
            return None
        path = Path(name)
        if path.parent.is_symlink() or path.is_symlink() or not path.is_file():
            return None
        return model.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None


def trial_review_html(experiment_dir: Path, trial_id: str) -> str:
    review = _read(f"{os.fspath(experiment_dir)}/{REVIEWS}/{trial_id}.json", TrialReview)
    if review is None:
        return ""
    e = escape
    head = f"<h3>Review ({e(AID)})</h3><p>Reviewed because {e(review.why)}, by <code>{e(review.model)}</code>.</p>"
    f = review.finding
    if f is None:
        return head + f"<p>No finding: {e(review.error or '')}</p>"
    rules = "kept its arm's rules" if f.arm_rules_kept else f"<b>broke its arm's rules</b>: {e(f.breach or '')}"
    return head + (f"<p>Failure mode: <b>{e(f.failure_mode)}</b> (confidence {e(f.confidence)}); the agent {rules}.</p>"
                   f"<p>{e(f.summary)}</p>")


def pair_review_html(experiment_dir: Path, pair_id: str) -> str:
    """`pair_id` is <task>-a<attempt>, as the pair review's file is named."""
    review = _read(f"{os.fspath(experiment_dir)}/{REVIEWS}/pairs/{pair_id}.json", PairReview)
    if review is None:
        return ""
    e = escape
    said = (f"{e(review.finding.difference)} (the injected tools helped: {e(review.finding.tools_helped)})"
            if review.finding else f"no finding: {e(review.error or '')}")
    return f"<h2>Review of the pair ({e(AID)})</h2><p>{e(review.passed)} passed. {said}</p>"


def review_stamps(experiment_dir: Path) -> dict[str, float]:
    """Trial ids and pair ids (pair-<id>) with a review, and when it was written: their pages are
    written again when a review is newer than they are; and so are the pages an earlier review had
    and this one does not (run.json's `replaced`), at the time of run.json."""
    out: dict[str, float] = {}
    if (experiment_dir / REVIEWS).is_symlink():
        return out
    run_file = experiment_dir / REVIEWS / "run.json"
    run = _read(run_file, ReviewRun)
    if run is not None:
        stamp = run_file.stat().st_mtime
        out.update({name: stamp for name in run.replaced})
        out["run.json"] = stamp
    for folder, prefix in ((experiment_dir / REVIEWS, ""), (experiment_dir / REVIEWS / "pairs", "pair-")):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".json") and entry.name != "run.json" and entry.is_file(follow_symlinks=False):
                out[prefix + entry.name[:-5]] = entry.stat().st_mtime
    return out
