"""How a value is shown in a page's cell: JSON as json spells it, code as code, a path as the run sees it."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

import msgspec


def json_cell(value: Any) -> str:
    """A value as json writes it with one space an indent (ASCII only, so no look-alike or hidden
    character passes for another; NaN as NaN; what is not JSON as its str()), cut at 4,000
    characters. json's C encoder writes it and msgspec indents it: json's own indenting encoder is
    pure Python, five times slower, and a sixth of a first render's work. msgspec refuses to indent
    what strict JSON does not allow (NaN, an escaped lone surrogate): json indents those itself."""
    try:
        shown = msgspec.json.format(json.dumps(value, default=str).encode(), indent=1).decode()
    except msgspec.DecodeError:
        shown = json.dumps(value, indent=1, default=str)
    return escape(shown[:4000])


def under_run(experiment_dir: Path, path: Path) -> Path:
    """A path as the run's folder sees it; whole where it lies outside (a schema 1 record's absolute folder)."""
    return path.relative_to(experiment_dir) if path.is_relative_to(experiment_dir) else path


def arguments_cell(value: Any) -> str:
    """A call's arguments; code shown as code, not as an escaped JSON string."""
    if isinstance(value, dict) and isinstance(value.get("code"), str):
        rest = {k: v for k, v in value.items() if k != "code"}
        return f"<pre>{json_cell(rest)}</pre><pre>{escape(value['code'][:4000])}</pre>"
    return f"<pre>{json_cell(value)}</pre>"
