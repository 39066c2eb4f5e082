"""Per arm: the arm x task table (outcomes, exact interval, pass@k, stop reasons, medians) and the
arm's usage (time, tokens, cost, browser calls, WebMCP). Each is one pass over its records: a run
of 100,000 trials has tens of thousands of rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pydantic import BaseModel, Field

from ..results.records import RunManifest, TrialRecord
from ..stats import pass_at_k, pass_hat_k
from .rates import Rate, median_of_present, rate
from .trial_lists import cli_disagrees, toolset_invalid


class ArmTaskRow(BaseModel):
    arm: str
    task: str
    grading: str
    placebo: bool
    passed: int
    failed: int
    errored: int
    missing: int
    rate: Rate
    pass_at_k: dict[int, float] = Field(default_factory=dict)  # over ended trials (passed + failed)
    pass_hat_k: dict[int, float] = Field(default_factory=dict)
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    median_agent_sec: float | None = None
    median_calls: float | None = None  # browser calls the proxy forwarded, per recorded trial
    shortcut: bool = True  # the batch offers a shortcut here (suite: shortcut, and not a placebo)
    trials: dict[str, str] = Field(default_factory=dict)  # trial id -> outcome, for the report's links


class ArmUsage(BaseModel):
    arm: str
    trials: int
    median_agent_sec: float | None
    median_model_sec: float | None = None  # of the agent's time: waiting on its model (the gateway's requests)
    median_tool_sec: float | None = None  # in browser calls (the proxy's)
    metered_by_gateway: int = 0  # trials whose tokens the gateway counted (the rest: as the runner reported)
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    tokens_reported: int  # trials whose runner reported tokens
    cost_usd: float
    priced: int  # trials whose cost could be priced (model-cost coverage)
    browser_calls: int
    median_browser_calls: float | None
    webmcp: dict[str, int] = Field(default_factory=dict)  # injected/native x tried/completed
    trials_with_rejections: int
    cap_hits: int
    over_spend: int
    toolset_invalid: int  # a trial that used WebMCP tools its arm should not have had
    cli_disagrees: int = 0  # trials whose CLI reported other token counts than the gateway metered


def arm_usage(arm: str, records: list[TrialRecord]) -> ArmUsage:
    """One pass over the arm's records, in locals (at 100,000 trials a pass per figure, or a dict
    of sums, cost seconds)."""
    webmcp: dict[str, int] = {}
    agent, model, tool, calls = [], [], [], []
    gateway = disagrees = input_tokens = cached = output = reported = priced = browser_calls = 0
    rejections = cap_hits = over_spend = invalid_tools = 0
    cost = 0.0
    for r in records:
        timings, tokens, used = r.timings, r.tokens, r.calls
        if invokes := used.webmcp_invokes:
            for key, count in invokes.items():
                origin, status = key.split(":", 1) if ":" in key else ("unknown", key)
                webmcp[f"{origin}:tried"] = webmcp.get(f"{origin}:tried", 0) + count
                if status == "completed":
                    webmcp[f"{origin}:completed"] = webmcp.get(f"{origin}:completed", 0) + count
            invalid_tools += toolset_invalid(r) is not None  # never without invocations
        if (value := timings.agent_sec) is not None:
            agent.append(value)
        if (value := timings.model_sec) is not None:
            model.append(value)
        if (value := timings.tool_sec) is not None:
            tool.append(value)
        calls.append(used.forwarded)
        browser_calls += used.forwarded
        if tokens.source == "gateway":
            gateway += 1
            disagrees += r.tokens_cli is not None and cli_disagrees(r) is not None
        inputs, outputs = tokens.input, tokens.output
        if inputs is not None:
            input_tokens += inputs
        if outputs is not None:
            output += outputs
        if inputs is not None or outputs is not None:
            reported += 1
        cached += tokens.cached or 0
        if tokens.cost_usd is not None:
            priced += 1
            cost += tokens.cost_usd
        rejections += used.rejected > 0
        cap_hits += used.cap_hit
        over_spend += r.stop_reason == "over_spend"
    return ArmUsage(
        arm=arm, trials=len(records), median_agent_sec=median_of_present(agent), median_model_sec=median_of_present(model),
        median_tool_sec=median_of_present(tool), metered_by_gateway=gateway, cli_disagrees=disagrees,
        input_tokens=input_tokens, cached_tokens=cached, output_tokens=output, tokens_reported=reported,
        cost_usd=round(cost, 6), priced=priced, browser_calls=browser_calls, median_browser_calls=median_of_present(calls),
        webmcp=dict(sorted(webmcp.items())), trials_with_rejections=rejections, cap_hits=cap_hits, over_spend=over_spend,
        toolset_invalid=invalid_tools,
    )


@dataclass
class ArmTaskTable:
    rows: list[ArmTaskRow]
    headline_counts: dict[str, list[tuple[int, int]]]  # per arm, (passes, trials) per headline task
    format_counts: dict[str, list[tuple[int, int]]]  # per arm, the same over the format-graded tasks
    stop_reasons: dict[str, dict[str, int]]  # per arm, why its trials did not pass (missing included)


@lru_cache(maxsize=4096)  # a handful of distinct (ended, passed) over tens of thousands of rows
def _k_rates(ended: int, passed: int) -> tuple[dict[int, float], dict[int, float]]:
    """pass@k and pass^k over the ended trials, for the k the row has enough of (copied into each row)."""
    ks = [k for k in (1, 2, 3, 5, 10) if k <= ended]
    return ({k: round(pass_at_k(ended, passed, k), 6) for k in ks}, {k: round(pass_hat_k(ended, passed, k), 6) for k in ks})


def arm_task_rows(manifest: RunManifest, by_arm_task: dict[tuple[str, str], list[TrialRecord | None]]) -> ArmTaskTable:
    """A row per arm and task (None: a planned trial without a record, counted missing), in the
    run's arm order; placebo tasks are rows, but in neither summary's counts."""
    arm_order = {a: i for i, a in enumerate(manifest.arms)}
    rows: list[ArmTaskRow] = []
    headline: dict[str, list[tuple[int, int]]] = {}
    formats: dict[str, list[tuple[int, int]]] = {}
    by_arm_reasons: dict[str, dict[str, int]] = {}
    for arm, task in sorted(by_arm_task, key=lambda k: (arm_order.get(k[0], 99), k[1])):
        limits = manifest.task_limits[task]
        recs = by_arm_task[(arm, task)]
        passed = failed = errored = missing = 0
        reasons: dict[str, int] = {}
        agent: list[float] = []
        calls: list[int] = []
        trials: dict[str, str] = {}
        for r in recs:  # one pass per row
            if r is None:
                missing += 1
                reasons["missing"] = reasons.get("missing", 0) + 1
                continue
            outcome = r.outcome
            trials[r.trial_id] = outcome
            if (seconds := r.timings.agent_sec) is not None:
                agent.append(seconds)
            calls.append(r.calls.forwarded)
            if outcome == "passed":
                passed += 1
                continue
            if outcome == "failed":
                failed += 1
            elif outcome == "errored":
                errored += 1
            reason = r.stop_reason or outcome
            reasons[reason] = reasons.get(reason, 0) + 1
        arm_reasons = by_arm_reasons.setdefault(arm, {})
        for reason, count in reasons.items():
            arm_reasons[reason] = arm_reasons.get(reason, 0) + count
        ended = passed + failed
        at_k, hat_k = _k_rates(ended, passed)
        rows.append(ArmTaskRow(
            arm=arm, task=task, grading=limits.grading, placebo=limits.placebo, passed=passed, failed=failed,
            errored=errored, missing=missing, rate=rate(passed, len(recs)), stop_reasons=dict(sorted(reasons.items())),
            pass_at_k=at_k, pass_hat_k=hat_k,
            median_agent_sec=median_of_present(agent), median_calls=median_of_present(calls),
            shortcut=limits.shortcut and not limits.placebo, trials=trials,
        ))
        if limits.placebo:
            continue  # a placebo measures the batch's presence, not the tasks: left out of both summaries
        (formats if limits.grading == "format" else headline).setdefault(arm, []).append((passed, len(recs)))
    return ArmTaskTable(rows=rows, headline_counts=headline, format_counts=formats, stop_reasons={
        arm: dict(sorted(v.items())) for arm, v in sorted(by_arm_reasons.items(), key=lambda kv: arm_order.get(kv[0], 99)) if v})
