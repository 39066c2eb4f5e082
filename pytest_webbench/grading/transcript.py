"""The transcript of record: what passed through the model gateway (gateway/meter.py's model log),
against the CLI's own trajectory, which the agent can write.

The gateway's log says how many model turns there were, what they cost and which tool calls the
model asked for; the record takes those. The CLI's ATIF trajectory (Harbor's conversion of the
CLI's session files, all of them under the agent's control) is kept as the agent's account. Where
it claims what the gateway never saw (a tool call no reply asked for, more model turns than were
answered) the trial is flagged, and its page says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..gateway.meter import ModelCall, read_model_log

MAX_SHOWN = 160


@dataclass
class Transcript:
    turns: int = 0  # model replies the gateway passed back (forwarded, not an error)
    calls: list[dict[str, str]] = field(default_factory=list)  # the tool calls they asked for, in order
    estimated: int = 0  # replies not metered whole, charged their worst case
    refused_requests: list[str] = field(default_factory=list)  # requests not forwarded: not the run's protocol
    final_text: str | None = None  # the last reply's words: the agent's final message of record


def read_transcript(model_log: Path) -> Transcript | None:
    """None when the trial had no gateway route (a runner that calls no model)."""
    if not model_log.exists():
        return None
    return transcript_of(read_model_log(model_log))


def transcript_of(lines: list[ModelCall]) -> Transcript:
    out = Transcript()
    for line in lines:
        if line.decision == "forwarded" and line.status < 400:
            out.turns += 1
            out.calls += line.tool_calls
            out.estimated += line.usage_estimated
            if line.reply_text and line.reply_text.strip():
                out.final_text = line.reply_text.strip()
        elif line.decision == "refused_request":
            out.refused_requests.append(f"{line.path}: {line.detail}")
    return out


def _canonical(arguments: Any) -> str:
    """Arguments as one comparable string: parsed where they are JSON text, keys sorted."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser: compared as text
            return arguments.strip()
    try:
        return json.dumps(arguments, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return repr(arguments)


def _trajectory_calls(steps: list[dict]) -> list[tuple[str, str]]:
    out = []
    for step in steps:
        for call in step.get("tool_calls") or []:
            if isinstance(call, dict):
                out.append((str(call.get("function_name", "")), _canonical(call.get("arguments"))))
    return out


def disagreements(record: Transcript, steps: list[dict]) -> list[str]:
    """Where the CLI's trajectory claims what the gateway never saw. A call matches by its
    arguments (converters rename tools: Codex's namespace, Claude's prefixes), each used once."""
    flags = []
    claimed_turns = sum(1 for step in steps if step.get("source") == "agent")
    if claimed_turns > record.turns:
        flags.append(f"the agent's trajectory shows {claimed_turns} model turns; the gateway answered {record.turns}")
    asked = [(call.get("name", ""), _canonical(call.get("arguments"))) for call in record.calls]
    unseen = []
    for name, arguments in _trajectory_calls(steps):
        match = next((i for i, (_, a) in enumerate(asked) if a == arguments), None)
        if match is None:
            unseen.append(f"{name} {arguments}")
        else:
            asked.pop(match)
    if unseen:
        flags.append(f"the agent's trajectory shows {len(unseen)} tool call(s) its model never asked for "
                     f"(the gateway's record), e.g. {_shown(unseen[0])}")
    if asked:  # a rollout replaced or cut: the calls the model did ask for are missing from it
        flags.append(f"the agent's trajectory omits {len(asked)} tool call(s) its model asked for "
                     f"(the gateway's record), e.g. {_shown(' '.join(asked[0]))}")
    return flags


def _shown(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."
