"""What a task checks: the rules for the agent's JSON answer, the live page read after the agent
stops, and the request a write task's submission must be (ClawBench's `eval_schema`)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FieldRule(_Strict):
    """How one field of the agent's JSON answer is checked."""

    type: Literal["string", "integer", "number", "boolean", "array", "object"]
    equals: Any = None
    one_of: list[Any] | None = None
    pattern: str | None = None  # full match, strings only
    minimum: float | None = None
    maximum: float | None = None
    min_items: int | None = None
    casefold: bool = False  # compare strings ignoring case and surrounding space
    from_page: str | None = None  # must equal this key of the page check's value
    # computed from what the pages show (a sum, a count): no single result shows it, so the
    # answer-evidence check (grading/evidence.py) does not look for it
    derived: bool = False

    @property
    def pins_a_value(self) -> bool:
        return self.equals is not None or self.one_of is not None


class PageCheck(_Strict):
    """Read the live page after the agent stops: open `path` in the trial's browser context and
    run `script` (a function body returning a JSON value)."""

    path: str
    script: str
    expect: dict[str, Any] = Field(default_factory=dict)  # keys the page value must equal


class RequestCheck(_Strict):
    """The request that completes a write task (ClawBench's `eval_schema`): the browser blocks the
    first request matching it, on the harness's own connection, and the trial is graded on what it
    carried, never on what reached the site (nothing does). `url_pattern` is searched in the URL as
    a JavaScript regular expression; `body` and `params` must match exactly to count as the
    submission; `expect` are the fields (of the body or the query) a right submission carries."""

    url_pattern: str
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    body: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    expect: dict[str, Any] = Field(default_factory=dict)

    @field_validator("url_pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value
