"""The proxy's call log: one JSON object per line, appended as calls finish.

Readers (the grader, the report) must survive a log cut off by a crash or a stray line, so
`read_call_log` skips what it cannot parse and says how much it skipped.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

MAX_ARGUMENT_CHARS = 4000


class CallRecord(BaseModel):
    time: float
    trial: str
    seq: int
    method: str
    tool: str | None = None
    arguments: Any = None
    decision: Literal["forwarded", "rejected"]
    rule: str | None = None
    outcome: Literal["ok", "tool_error", "error", "rejected"] = "ok"
    detail: str | None = None
    latency_ms: float = 0.0
    webmcp: dict[str, Any] | None = None
    cap_reached: bool = False


def bounded(value: Any, limit: int = MAX_ARGUMENT_CHARS) -> Any:
    """Arguments are logged whole when small, else as a truncated JSON string."""
    text = json.dumps(value, default=str)
    if len(text) <= limit:
        return value
    return {"truncated": True, "chars": len(text), "head": text[:limit]}


class CallLog:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write(self, record: CallRecord) -> None:
        line = record.model_dump_json() + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(line)


class CallLogContents(BaseModel):
    records: list[CallRecord] = Field(default_factory=list)
    unreadable_lines: int = 0


def read_call_log(path: Path) -> CallLogContents:
    contents = CallLogContents()
    if not path.exists():
        return contents
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            contents.records.append(CallRecord.model_validate_json(line))
        except (ValidationError, ValueError):
            contents.unreadable_lines += 1
    return contents
