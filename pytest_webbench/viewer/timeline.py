"""One trial as one ordered list of events, read from its files on disk.

Model turns come from the gateway's `model-log.jsonl` (every runner with a model goes through it),
browser calls from the proxy's `proxy-log.jsonl` (arguments, what came back, duration, whether it
was rejected and by which rule, WebMCP invokes marked injected or native), the agent's own messages
from its ATIF trajectory where Harbor wrote one, and each call's screenshot from the browser trace.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..browsers.base import TRACE_FILE
from ..gateway.meter import read_model_log
from ..grading.trajectory_scan import load_trajectory_steps
from ..proxy.log import read_call_log
from ..results.records import TrialRecord, final_screenshot
from .frames import nearest_frame, read_trace

AGENT_TEXT_CHARS = 1500


class TimelineEvent(BaseModel):
    time: float  # when it ended, seconds since the epoch
    kind: Literal["model", "browser", "agent"]
    title: str
    duration_ms: float | None = None
    arguments: Any = None
    result: str | None = None
    decision: str | None = None  # forwarded, rejected (proxy), refused (gateway cap), ...
    rule: str | None = None
    webmcp_origin: str | None = None  # injected or native, for a WebMCP invoke
    frame: str | None = None  # the trace's screenshot nearest after the event


class Timeline(BaseModel):
    record: TrialRecord
    events: list[TimelineEvent] = Field(default_factory=list)
    trace_path: Path | None = None  # the trial's trace.zip, where it has one
    actions_traced: int = 0
    screenshot_path: Path | None = None


def build_timeline(experiment_dir: Path, record: TrialRecord) -> Timeline:
    # a trial that broke before grading names no folder, but its logs may be in the usual place
    # joined as trial_dir and harbor_folder join it (an absolute part taken as it stands), but looked
    # for by a plain string, not a Path (a third of the cost): records copied without jobs/ have no folder
    where = os.path.join(experiment_dir, record.harbor_trial_dir or os.path.join("jobs", record.arm, record.trial_id))
    timeline = Timeline(record=record)
    if not os.path.isdir(where):
        return timeline
    folder = Path(where)
    events = _browser_events(folder / "proxy-log.jsonl") + _model_events(folder / "model-log.jsonl") \
        + _agent_events(folder / "agent" / "trajectory.json")
    events.sort(key=lambda e: e.time)
    trace_file = (record.trace.file if record.trace else None) or TRACE_FILE
    if (trace := read_trace(folder / trace_file)) is not None:
        timeline.trace_path, timeline.actions_traced = folder / trace_file, len(trace.actions)
        for event in events:
            if event.kind == "browser" and (frame := nearest_frame(trace.frames, event.time)) is not None:
                event.frame = frame.member
    timeline.screenshot_path = final_screenshot(folder)
    timeline.events = events
    return timeline


def _browser_events(path: Path) -> list[TimelineEvent]:
    events = []
    for call in read_call_log(path).records:
        if call.method != "tools/call" and call.decision != "rejected":
            continue  # the handshake and tool listings are not the agent's steps
        webmcp = call.webmcp or {}
        title = call.tool or call.method
        if webmcp.get("action"):
            title += f" {webmcp['action']}" + (f" {webmcp['tool']}" if webmcp.get("tool") else "")
        events.append(TimelineEvent(
            time=call.time, kind="browser", title=title, duration_ms=round(call.latency_ms, 1), arguments=call.arguments,
            result=call.result or call.detail, decision=call.decision, rule=call.rule,
            webmcp_origin=webmcp.get("origin") if webmcp.get("action") == "invoke" else None,
        ))
    return events


def _model_events(path: Path) -> list[TimelineEvent]:
    events = []
    for call in read_model_log(path):
        usage = f"{call.input_tokens} in ({call.cached_tokens} cached) / {call.output_tokens} out"
        events.append(TimelineEvent(
            time=call.time, kind="model", title=f"{call.api} {call.model or ''}".strip(), duration_ms=round(call.latency_ms, 1),
            result=f"HTTP {call.status}; {usage}" + (f"; first byte after {call.ttft_ms:.0f} ms" if call.ttft_ms else "")
            + (f"; {call.detail}" if call.detail else ""),
            decision=call.decision,
        ))
    return events


def _agent_events(path: Path) -> list[TimelineEvent]:
    """The agent's own words (ATIF steps from the agent), which the logs do not hold."""
    events = []
    for step in load_trajectory_steps(path):  # read as grading reads it: what the agent wrote fails no reader
        message = step.get("message")
        if step.get("source") != "agent" or not isinstance(message, str) or not message.strip():
            continue
        try:
            when = datetime.fromisoformat(str(step.get("timestamp")).replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
        text = message if len(message) <= AGENT_TEXT_CHARS else message[:AGENT_TEXT_CHARS] + " ..."
        events.append(TimelineEvent(time=when, kind="agent", title="agent says", result=text))
    return events
