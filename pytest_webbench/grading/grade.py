"""The verdict of one trial, from its answer, its page value and its proxy log."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..design.checks import FieldRule
from ..design.suite import WebbenchMeta
from .answer import AnswerError, parse_answer


@dataclass
class Grade:
    passed: bool
    stop_reason: str | None
    detail: str
    answer: Any = None
    expected: dict[str, Any] = field(default_factory=dict)

    @property
    def reward(self) -> float:
        return 1.0 if self.passed else 0.0


def expected_values(meta: WebbenchMeta, page_value: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, rule in meta.answer.items():
        if rule.equals is not None:
            out[key] = rule.equals
        elif rule.one_of is not None:
            out[key] = {"one_of": rule.one_of}
        elif rule.from_page and isinstance(page_value, dict):
            out[key] = page_value.get(rule.from_page)
        else:
            out[key] = {"type": rule.type, **({"pattern": rule.pattern} if rule.pattern else {})}
    if meta.page:
        out["(page)"] = meta.page.expect
    if meta.request:
        out["(submission)"] = meta.request.expect
    return out


def _same(a: Any, b: Any, casefold: bool) -> bool:
    if casefold and isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold()
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return a == b


def check_field(key: str, rule: FieldRule, value: Any, page_value: Any) -> str | None:
    """None when the field passes, else what is wrong with it."""
    if value is None:
        return f"{key}: missing"
    if not rule.is_of_type(value):
        return f"{key}: expected a {rule.type}, got {value!r}"
    if rule.pattern is not None and (not isinstance(value, str) or not re.fullmatch(rule.pattern, value)):
        return f"{key}: {value!r} does not match {rule.pattern!r}"
    if rule.minimum is not None and value < rule.minimum:
        return f"{key}: {value!r} is below {rule.minimum}"
    if rule.maximum is not None and value > rule.maximum:
        return f"{key}: {value!r} is above {rule.maximum}"
    if rule.min_items is not None and len(value) < rule.min_items:
        return f"{key}: {len(value)} items, at least {rule.min_items} needed"
    if rule.equals is not None and not _same(value, rule.equals, rule.casefold):
        return f"{key}: expected {rule.equals!r}, got {value!r}"
    if rule.one_of is not None and not any(_same(value, v, rule.casefold) for v in rule.one_of):
        return f"{key}: expected one of {rule.one_of!r}, got {value!r}"
    if rule.from_page is not None:
        shown = page_value.get(rule.from_page) if isinstance(page_value, dict) else None
        if not _same(value, shown, rule.casefold):
            return f"{key}: the page shows {shown!r}, the answer says {value!r}"
    return None


def grade_trial(
    meta: WebbenchMeta, answer_raw: bytes | str | None, forwarded_calls: int, cap_hit: bool = False,
    page_value: Any = None, page_error: str | None = None, judge=None, verifier: tuple[dict | None, str | None] = (None, None),
) -> Grade:
    expected = expected_values(meta, page_value)
    if meta.grading == "verifier":  # the task's own Harbor verifier, run after the agent
        return grade_by_verifier(*verifier, expected)
    if forwarded_calls == 0:
        return Grade(False, "no_browser_call", "no permitted browser call reached the browser: reward 0", expected=expected)
    if meta.request is not None:
        return grade_submission(meta, answer_raw, page_value, page_error, expected, judge)
    try:
        answer = parse_answer(answer_raw)
    except AnswerError as exc:
        reason = "call_cap" if cap_hit else "no_answer"
        return Grade(False, reason, str(exc), expected=expected)
    problems = [p for key, rule in meta.answer.items() if (p := check_field(key, rule, answer.get(key), page_value))]
    if meta.page is not None:
        if page_error is not None:
            return Grade(False, "unreadable_page", f"the page check failed: {page_error}", answer, expected)
        if not isinstance(page_value, dict):
            return Grade(False, "unreadable_page", f"the page check returned {page_value!r}, not an object", answer, expected)
        for key, want in meta.page.expect.items():
            if page_value.get(key) != want:
                problems.append(f"page {key}: expected {want!r}, the page shows {page_value.get(key)!r}")
    if problems:
        return Grade(False, "call_cap" if cap_hit else "wrong_answer", "; ".join(problems), answer, expected)
    return Grade(True, None, "answer matches" + (" and the page agrees" if meta.page else ""), answer, expected)


def _fields(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def needs_judge(meta: WebbenchMeta) -> bool:
    """A write task whose check does not decide the grade: no field a right submission carries
    (`expect`). There the judge decides, as ClawBench's verifier does for every case: a body or
    query in the check only chooses which request is intercepted, never what it should say."""
    check = meta.request
    return check is not None and not check.expect


def grade_submission(meta: WebbenchMeta, answer_raw: bytes | str | None, value: Any, error: str | None,
                     expected: dict[str, Any], judge=None) -> Grade:
    """A write task, as ClawBench grades one: the first request the browser blocked for matching the
    task's check is the submission; no such request is a failure (`no_submission`); one whose body
    or query lacks a field the task expects is `wrong_submission`, and where the task expects none,
    the judge's lenient verdict decides (`judge`: grading/judge.py's record; no verdict is a
    `judge_error`). An answer, where the task asks for one, is checked too. The agent's claim that
    it submitted counts for nothing."""
    if error is not None or not isinstance(value, dict):
        return Grade(False, "unreadable_page", f"the browser's intercepted requests could not be read: {error}", expected=expected)
    submitted = value.get("submitted")
    if not value.get("submissions") or not isinstance(submitted, dict):
        return Grade(False, "no_submission", "no request matching the task's submission reached the browser's interceptor",
                     expected=expected)
    # the body is what the agent sent: a list, a string or a number holds no fields
    fields = {**_fields(submitted.get("query")), **_fields(submitted.get("body"))}
    problems = [f"submission {key}: expected {want!r}, it carried {fields.get(key)!r}"
                for key, want in meta.request.expect.items()
                if not (_same(fields.get(key), want, False) or (isinstance(fields.get(key), str) and fields.get(key) == str(want)))]
    answer = None
    if meta.answer:
        try:
            answer = parse_answer(answer_raw)
        except AnswerError as exc:
            problems.append(str(exc))
        else:
            problems += [p for key, rule in meta.answer.items() if (p := check_field(key, rule, answer.get(key), value))]
    if (meta.request.body or meta.request.params) and submitted.get("clawbench") is False:
        # blocked as a spelling of the submission (a case, a space, an encoding ClawBench's check reads otherwise):
        # ClawBench's runtime would not have intercepted it, so it is no ClawBench submission, judged or not
        problems.append("the blocked request matches the task's check only as the site would read it, not as "
                        "ClawBench's check reads it")
    extra = f" ({value['submissions']} matching requests: the first is graded)" if value["submissions"] > 1 else ""
    if needs_judge(meta) and not problems:
        if judge is None or judge.error or judge.lenient is None:
            why = judge.error if judge is not None and judge.error else "no judge was asked"
            return Grade(False, "judge_error", f"the judge gave no verdict on the submission: {why}", answer, expected)
        said = f"judge {judge.model}: lenient {judge.lenient.match} ({judge.lenient.reason})" + (
            f", strict {judge.strict.match} ({judge.strict.reason})" if judge.strict else "")
        if not judge.lenient.match:
            return Grade(False, "wrong_submission", said, answer, expected)
        return Grade(True, None, said + extra, answer, expected)
    if problems:
        return Grade(False, "wrong_submission", "; ".join(problems), answer, expected)
    return Grade(True, None, "the submission carries what the task asks" + extra, answer, expected)


def grade_by_verifier(rewards: dict | None, error: str | None, expected: dict[str, Any]) -> Grade:
    """A task graded by its own Harbor verifier (tests/test.sh, run after the agent with its answer
    and the page it left): a pass is a full reward (1); a verifier that wrote none failed itself."""
    if error is not None or not rewards:
        return Grade(False, "verifier_error", f"the task's verifier gave no reward: {error or 'no reward written'}", expected=expected)
    reward = rewards.get("reward", min(rewards.values()))
    if reward >= 1:
        return Grade(True, None, f"the task's verifier: {rewards}", expected=expected)
    return Grade(False, "wrong_answer", f"the task's verifier: {rewards}", expected=expected)
