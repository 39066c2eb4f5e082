"""ClawBench's own figures for a run's judged write tasks, computed as its tools compute them, so
a row can be set beside a ClawBench leaderboard row: every run counts (an errored trial is a run
that earned 0, as ClawBench has no "errored"), Reward is the judge's matches over all runs
(eval/rescore.py `aggregate_batch`: a judge that failed is 0), and eval/analyze.py's checks:
interception by category, interceptions with no browser action (an interceptor's false positive),
and the self-report gap (a final message claiming success on a run that did not pass).

`export_runs` writes the records as ClawBench's run folders (run-meta.json, judge.json for the
strict rubric, judge_llm.json for the lenient one, data/agent-messages.jsonl with the agent's final
message), so ClawBench's own rescore and analyze read this run too; tests hold the figures here
equal to theirs on that export."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from ..grading.judge import claims_success
from ..results.records import RunManifest, TrialRecord, atomic_write
from .writes import by_arm

RUBRIC_FILES = {"strict": "judge.json", "lenient": "judge_llm.json"}  # rescore.py's JUDGE_FILE


class ClawBenchFigures(BaseModel):
    arm: str
    runs: int
    intercepted: int
    match_lenient: int
    match_strict: int
    judge_errors_lenient: int  # intercepted, and the lenient judge gave no verdict: 0 in ClawBench's reward
    judge_errors_strict: int
    zero_action_intercepted: int  # analyze.py's interceptor false positives: should be 0
    claimed_success: int  # analyze.py's self-report: final messages claiming success
    claimed_but_failed: int
    by_category: dict[str, tuple[int, int]] = Field(default_factory=dict)  # category -> (runs, intercepted)

    @property
    def reward_lenient(self) -> float:
        return self.match_lenient / self.runs if self.runs else 0.0

    @property
    def reward_strict(self) -> float:
        return self.match_strict / self.runs if self.runs else 0.0

    @property
    def intercepted_rate(self) -> float:
        return self.intercepted / self.runs if self.runs else 0.0


def judged_write_tasks(manifest: RunManifest) -> set[str]:
    """The tasks ClawBench's way of scoring covers: write tasks its judge grades (no expected fields)."""
    return {t for t, limits in manifest.task_limits.items()
            if limits.grading == "request" and not limits.ungradable and limits.judged}


def _match(record: TrialRecord, rubric: str) -> bool | None:
    verdict = getattr(record.judge, rubric, None) if record.judge is not None else None
    return None if verdict is None else verdict.match


def _claims_success(record) -> bool:
    if record.claims_done is not None:
        return record.claims_done
    return claims_success(getattr(record, "answer_raw", None))  # a record written before the field


def clawbench_figures(manifest: RunManifest, records: Iterable[TrialRecord]) -> list[ClawBenchFigures]:
    rows = []
    for arm, recs in by_arm(manifest, records, judged_write_tasks(manifest), ended_only=False):  # every run counts
        caught = [r for r in recs if r.submissions]
        categories: dict[str, list[int]] = {}
        for r in recs:
            cell = categories.setdefault(manifest.task_limits[r.task].group or "uncategorized", [0, 0])
            cell[0] += 1
            cell[1] += bool(r.submissions)
        # analyze.py: a run failed when the strict judge said no, or nothing was intercepted and nothing judged
        failed = [r for r in recs if _match(r, "strict") is False or (_match(r, "strict") is None and not r.submissions)]
        rows.append(ClawBenchFigures(
            arm=arm, runs=len(recs), intercepted=len(caught),
            match_lenient=sum(_match(r, "lenient") is True for r in caught),
            match_strict=sum(_match(r, "strict") is True for r in caught),
            judge_errors_lenient=sum(_match(r, "lenient") is None for r in caught),
            judge_errors_strict=sum(_match(r, "strict") is None for r in caught),
            zero_action_intercepted=sum(r.calls.forwarded == 0 for r in caught),
            claimed_success=sum(_claims_success(r) for r in recs),
            claimed_but_failed=sum(_claims_success(r) for r in failed),
            by_category={k: (v[0], v[1]) for k, v in sorted(categories.items())},
        ))
    return rows


def export_runs(manifest: RunManifest, records: Iterable[TrialRecord], out: Path) -> dict[str, Path]:
    """Each arm's judged write-task trials as one ClawBench batch folder (out/<arm>/<trial>/...)."""
    tasks = judged_write_tasks(manifest)
    batches: dict[str, Path] = {}
    for r in records:
        if r.task not in tasks:
            continue
        folder = out / r.arm / r.trial_id
        batches[r.arm] = out / r.arm
        meta = {"test_case": r.task, "task_id": r.trial_id, "intercepted": bool(r.submissions),
                "metaclass": manifest.task_limits[r.task].group or "uncategorized",
                "result_category": "intercepted" if r.submissions else (r.stop_reason or r.outcome),
                "run_metrics": {"actions": r.calls.forwarded}, "outcome": r.outcome}
        atomic_write(folder / "run-meta.json", json.dumps(meta, indent=2))
        for rubric, name in RUBRIC_FILES.items():
            verdict = getattr(r.judge, rubric, None) if r.judge is not None else None
            if r.judge is not None:
                atomic_write(folder / name, json.dumps({"match": None if verdict is None else verdict.match,
                                                        "reason": verdict.reason if verdict else r.judge.error or ""}))
        messages = [{"role": "assistant", "content": r.answer_raw}] if r.answer_raw else []
        atomic_write(folder / "data" / "agent-messages.jsonl", "".join(json.dumps(m) + "\n" for m in messages))
    return batches
