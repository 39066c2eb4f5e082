"""What a task checks: the rules for the agent's JSON answer, the live page read after the agent
stops, and the request a write task's submission must be (ClawBench's `eval_schema`)."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "array": (list,), "object": (dict,),
}




class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  # "30" is no minimum, "no" no boolean


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

    def is_of_type(self, value: Any) -> bool:
        """JSON's types as the rule names them: true is no number, though Python's bool is an int, and
        nor are NaN and Infinity, which Python's JSON reader takes (NaN passes every bound)."""
        if self.type in ("integer", "number"):
            return isinstance(value, JSON_TYPES[self.type]) and not isinstance(value, bool) and math.isfinite(value)
        return isinstance(value, JSON_TYPES[self.type])

    @model_validator(mode="after")
    def _some_answer_can_pass(self) -> "FieldRule":
        """A rule no answer could meet would fail every agent, the right ones included, as a wrong
        answer; a pattern Python cannot compile would error every trial after the agent ran."""
        if self.pattern is not None:
            if self.type != "string":
                raise ValueError(f"pattern: only a string can match one, and this field is a {self.type}")
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern {self.pattern!r}: not a regular expression ({exc})") from None
        for name in ("minimum", "maximum"):
            if (bound := getattr(self, name)) is not None:
                if self.type not in ("integer", "number"):
                    raise ValueError(f"{name}: only a number has one, and this field is a {self.type}")
                if not math.isfinite(bound):
                    raise ValueError(f"{name}: {bound} is not a finite number")
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise ValueError(f"minimum {self.minimum} is above maximum {self.maximum}: no answer could pass")
        if self.min_items is not None and (self.type != "array" or self.min_items < 0):
            raise ValueError(f"min_items: {self.min_items} on a {self.type} (only an array has items, at least 0 of them)")
        if self.one_of is not None and not self.one_of:
            raise ValueError("one_of: an empty list, so no answer could pass")
        for value in [self.equals] if self.equals is not None else self.one_of or []:
            # with casefold the answer is compared folded, but the pattern reads it as written: any case may pass
            why = (f"is not a {self.type}" if not self.is_of_type(value)
                   else f"does not match the pattern {self.pattern!r}"
                   if self.pattern is not None and not self.casefold and not re.fullmatch(self.pattern, value)
                   else f"is below the minimum {self.minimum}" if self.minimum is not None and value < self.minimum
                   else f"is above the maximum {self.maximum}" if self.maximum is not None and value > self.maximum
                   else None)
            if why:
                raise ValueError(f"{'equals' if self.equals is not None else 'one_of'}: {value!r} {why}, so no answer can ever "
                                 "match it")
        return self


class PageCheck(_Strict):
    """Read the live page after the agent stops: open `path` in the trial's browser context and
    run `script` (a function body returning a JSON value)."""

    path: str
    script: str
    expect: dict[str, Any] = Field(default_factory=dict)  # keys the page value must equal


class RequestCheck(_Strict):
    """The request that completes a write task (ClawBench's `eval_schema`): the harness blocks
    every request matching it (grading/write_match.py) and the trial is graded on the first, never on
    what reached the site (nothing does). `url_pattern` is a Python regular expression searched in
    the URL, as ClawBench's runtime searches it; `body` and `params` choose which request is the
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
