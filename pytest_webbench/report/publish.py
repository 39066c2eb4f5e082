"""`--publish braintrust`: the run as Braintrust experiments, one per arm, through its SDK.

Each planned trial becomes one row (missing ones too, scored 0, so Braintrust's averages keep the
report's denominators), with its grade as the `passed` score, the grading mode and stop reason in
its metadata, and timing, tokens and browser calls as metrics. Each experiment carries the run's
source revision (as Braintrust's repo info), the suite's and tool batches' content hashes, the
runner, model and versions. The API key comes from BRAINTRUST_API_KEY and goes only into the
SDK's Authorization header.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from ..results.records import RunManifest, TrialRecord, read_manifest, read_trial_records


class PublishError(Exception):
    pass


class PublishedExperiment(BaseModel):
    arm: str
    name: str
    rows: int
    url: str | None


def _row(trial, record: TrialRecord | None, grading: str, review: dict | None = None) -> dict:
    if record is None:
        return {"id": trial.trial_id, "input": {"task": trial.task, "attempt": trial.attempt}, "output": {"answer": None},
                "scores": {"passed": 0.0},
                "metadata": {"arm": trial.arm, "task": trial.task, "attempt": trial.attempt, "grading": grading,
                             "outcome": "missing", "stop_reason": "missing", "pair_id": trial.pair_id}}
    metrics = {k: v for k, v in {
        "agent_sec": record.timings.agent_sec, "trial_sec": record.timings.trial_sec,
        "prompt_tokens": record.tokens.input, "prompt_cached_tokens": record.tokens.cached,
        "completion_tokens": record.tokens.output, "estimated_cost": record.tokens.cost_usd,
        "browser_calls": record.calls.forwarded, "rejected_calls": record.calls.rejected,
    }.items() if v is not None}
    return {
        "id": record.trial_id,
        "input": {"task": record.task, "attempt": record.attempt, "instruction": record.instruction},
        "output": {"answer": record.answer}, "expected": {"answer": record.expected},
        "scores": {"passed": record.reward},
        "metrics": metrics,
        "metadata": {"arm": record.arm, "task": record.task, "attempt": record.attempt, "grading": record.grading,
                     "placebo": record.placebo, "outcome": record.outcome, "stop_reason": record.stop_reason,
                     "detail": record.detail[:2000], "pair_id": record.pair_id, "flags": record.flags,
                     "webmcp_invokes": record.calls.webmcp_invokes, "cap_hit": record.calls.cap_hit,
                     "runner": record.runner, "model": record.model,
                     **({"review": review} if review else {})},  # --review: a reading aid, never a score
    }


def _experiment_metadata(manifest: RunManifest, arm: str) -> dict:
    return {"webbench_experiment_id": manifest.experiment_id, "arm": arm, "suite": manifest.suite,
            "runner": manifest.runner, "model": manifest.model, "browser": manifest.browser, "attempts": manifest.attempts,
            "git_revision": manifest.git_revision, "content_hashes": manifest.content_hashes, "versions": manifest.versions,
            "grading_modes": {task: limits.grading for task, limits in sorted(manifest.task_limits.items())}}


def publish_braintrust(experiment_dir: Path, project: str | None = None) -> list[PublishedExperiment]:
    if not os.environ.get("BRAINTRUST_API_KEY"):
        raise PublishError("--publish braintrust: BRAINTRUST_API_KEY is not set (nothing was sent)")
    try:
        import braintrust
        from braintrust.git_fields import GitMetadataSettings, RepoInfo
        from braintrust.logger import BraintrustState
    except ImportError:
        raise PublishError("--publish braintrust needs the braintrust SDK: pip install 'pytest-webbench[publish]'") from None
    manifest = read_manifest(experiment_dir)
    records, problems = read_trial_records(experiment_dir)
    from ..review.records import read_reviews

    reviews = {r.trial_id: r.finding.model_dump() for r in read_reviews(experiment_dir)[1] if r.finding}
    if problems:
        raise PublishError("not publishing a run with unreadable records: " + "; ".join(problems))
    by_id = {r.trial_id: r for r in records}
    revision = manifest.git_revision or ""
    repo = RepoInfo(commit=revision.removesuffix("+dirty") or None, dirty=revision.endswith("+dirty") if revision else None)
    published = []
    state = BraintrustState()  # a login of our own: never a stale one from an earlier call in this process
    for arm in manifest.arms:
        trials = [t for t in manifest.trials if t.arm == arm]
        name = f"{manifest.experiment_id}-{arm}"
        try:
            experiment = braintrust.init(
                project=project or f"webbench-{manifest.suite}", experiment=name, metadata=_experiment_metadata(manifest, arm),
                repo_info=repo, git_metadata_settings=GitMetadataSettings(collect="none"), set_current=False, state=state,
            )
            experiment.id  # creation is lazy: make it happen here, where a refusal can be reported
        except Exception as exc:
            raise PublishError(f"Braintrust refused experiment {name!r}: {type(exc).__name__}: {_without_key(str(exc))}") from None
        for trial in trials:
            experiment.log(**_row(trial, by_id.get(trial.trial_id), manifest.task_limits[trial.task].grading,
                                  reviews.get(trial.trial_id)))
        summary = experiment.summarize(summarize_scores=False)  # flushes every row first
        published.append(PublishedExperiment(arm=arm, name=name, rows=len(trials), url=summary.experiment_url))
    return published


def _without_key(text: str) -> str:
    key = os.environ.get("BRAINTRUST_API_KEY")
    return text.replace(key, "[BRAINTRUST_API_KEY]") if key else text
