"""What a record can hold, made of what an agent shaped (a page it changed, a request it sent, its
trajectory): JSON and JavaScript can spell a lone UTF-16 surrogate that UTF-8 cannot hold, and
nest deeper than pydantic reads back. Either, left in a record, made it unwritable or unreadable,
and its trial errored (and its pair dropped) rather than graded."""

from __future__ import annotations

from typing import Any

MAX_NESTING = 64  # levels of lists and objects in a value an agent shaped: pydantic reads no JSON past 200


def well_formed(value: Any) -> Any:
    """Text or a JSON value the agent could shape (a page it changed, a request it sent, its
    transcript), made one a record can hold and read back: each lone UTF-16 surrogate replaced by
    U+FFFD (JSON and JavaScript may spell one, "\\ud800", but UTF-8 cannot hold it), and any list or
    object nested deeper than MAX_NESTING replaced by a note (a record deeper than pydantic reads
    would be written and then be unreadable). The value itself when it needs neither."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return _well_formed(value, 0)


def nesting(value: Any, limit: int = MAX_NESTING) -> int:
    """How deep lists and objects nest in a JSON value, counted no further than limit + 1."""
    if not isinstance(value, (dict, list)) or limit < 0:
        return 0
    return 1 + max((nesting(v, limit - 1) for v in (value.values() if isinstance(value, dict) else value)), default=0)


def _well_formed(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return well_formed(value)
    if not isinstance(value, (dict, list)):
        return value
    if depth >= MAX_NESTING:
        return f"(cut: nested deeper than {MAX_NESTING} levels)"
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    made = [(well_formed(k) if isinstance(k, str) else k, _well_formed(v, depth + 1), k, v) for k, v in pairs]
    if all(k is k0 and v is v0 for k, v, k0, v0 in made):
        return value
    return {k: v for k, v, _, _ in made} if isinstance(value, dict) else [v for _, v, _, _ in made]
