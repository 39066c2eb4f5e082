"""A trial's judge: its own route through the model gateway, opened for the judge's two calls and
closed after, so the judge's tokens and spend are metered and capped apart from the agent's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..results.records import JudgeRecord

# A judge reads one request and writes one line: a cap far above two such calls, still a cap.
JUDGE_SPEND_LIMIT_USD = 0.50
JUDGE_TOKEN_LIMIT = 60_000
JUDGE_FOLDER = "judge"  # in the trial's Harbor folder: the judge's model log


def judge_trial(st, spec, services, value: Any, trial_dir: Path) -> JudgeRecord | None:
    """The judge's verdicts on the trial's first intercepted request, where its task needs a judge
    and the trial submitted something (None otherwise: nothing to judge)."""
    from ..gateway.wiring import open_gateway_route
    from ..grading.grade import needs_judge
    from ..grading.judge import judge_submission

    submitted = value.get("submitted") if isinstance(value, dict) else None
    judge = st.judge
    if not needs_judge(spec.task.meta) or not isinstance(submitted, dict) or judge is None:
        return None
    if submitted.get("clawbench") is False and (spec.task.meta.request.body or spec.task.meta.request.params):
        return None  # no ClawBench submission: graded wrong_submission without a judge (grade.py)
    route_name = f"{spec.trial_id}-judge"
    handle = open_gateway_route(services.gateway, services.proxy_base_url, route_name, judge.model, judge.upstream,
                                judge.price, JUDGE_SPEND_LIMIT_USD, JUDGE_TOKEN_LIMIT, trial_dir / JUDGE_FOLDER, api=judge.api)
    try:
        record = judge_submission(spec.task.instruction, submitted, handle.url, handle.token, judge.api,
                                  handle.route.model or judge.model, spec.task.meta.judge_context)
    finally:
        services.gateway.remove(route_name)
    meter = handle.meter
    return record.model_copy(update={"requests": meter.requests,
                                     "cost_usd": round(meter.charged_usd, 8) if meter.price is not None else None})
