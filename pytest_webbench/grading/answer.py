"""Reading the agent's answer: one JSON object, from its answer file or its last message."""

from __future__ import annotations

import json
from typing import Any

from ..results.well_formed import MAX_NESTING, nesting, well_formed

MAX_ANSWER_BYTES = 1_000_000
MAX_STARTS = 1000  # braces of a prose answer tried as an object's start, the last first


class AnswerError(ValueError):
    """The agent gave no usable answer; the message says why, for the report."""


def parse_answer(raw: bytes | str | None) -> dict[str, Any]:
    if raw is None:
        raise AnswerError("the agent gave no answer (no answer.json and no final message)")
    if len(raw) > MAX_ANSWER_BYTES:
        raise AnswerError(f"the answer is {len(raw)} bytes, over the {MAX_ANSWER_BYTES}-byte limit")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AnswerError(f"the answer is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    text = raw.strip()
    try:
        value = json.loads(text)
    except RecursionError:  # nested past Python's own limit: no object a record could hold
        raise AnswerError(f"the answer nests deeper than {MAX_NESTING} levels") from None
    except ValueError:
        value = _last_json_object(text)
    if not isinstance(value, dict):
        raise AnswerError(f"the answer is not a JSON object: {text[:200]!r}")
    if nesting(value) > MAX_NESTING:
        raise AnswerError(f"the answer nests deeper than {MAX_NESTING} levels")
    if well_formed(value) is not value:
        raise AnswerError("the answer is not text: it spells a lone UTF-16 surrogate (such as \\ud800), which no record can hold")
    return value


def _last_json_object(text: str) -> Any:
    """Agents often wrap the JSON in prose or a code fence: take the last object in the text, whole
    (not the last object nested in it). Only the last MAX_STARTS braces are tried: each brace of a
    text such as '{"a":' * 40000 is a start that parses to the recursion limit before failing (6 s
    for 200 KB when all were tried)."""
    decoder = json.JSONDecoder()
    found, after = None, 0
    for start in [i for i, ch in enumerate(text) if ch == "{"][-MAX_STARTS:]:
        if start < after:
            continue  # inside the object found last
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            found, after = value, end
    if found is None:
        raise AnswerError(f"the answer is not JSON: {text[:200]!r}")
    return found
