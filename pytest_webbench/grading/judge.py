"""The LLM judge of a write task's submission, as ClawBench's verifier asks it.

Where a task's check does not decide the grade (no `expect` fields: ClawBench's cases), the first
request the browser intercepted goes to a judge model with ClawBench's two rubrics, strict and
lenient (its prompts, unchanged, in judge_prompts/), and its user message built the same way. Both
verdicts are recorded; the grade is the lenient one, which is ClawBench's reward. The judge is
called by the harness, never by the agent, through the model gateway on a route of its own, so it
is metered, capped and logged like an agent (`judge/model-log.jsonl` in the trial's folder). A judge
that cannot answer after ClawBench's three tries (unreachable, refused at its cap, an unparseable
reply) errors the trial: the fault is the harness's, not the agent's (ClawBench scores it 0; the
report's ClawBench section does too).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..gateway.client import ModelCallError, ask_text, reply_text, request_for  # noqa: F401 - re-exported
from ..results.records import JudgeRecord, JudgeVerdict
from ..results.well_formed import well_formed

if TYPE_CHECKING:
    from ..gateway.meter import Price

RUBRICS = ("strict", "lenient")
MAX_TOKENS = {"strict": 4096, "lenient": 800}  # ClawBench's
ATTEMPTS = 3  # verify.py's call_judge_with_retries
BODY_CHARS = 6000


@dataclass(frozen=True)
class JudgeSetup:
    """The run's judge, decided once when the run is configured (planning/configure.py)."""

    model: str  # provider/model
    api: str  # the protocol it is asked in: "chat" (OpenAI's and OpenRouter's) or "messages" (Anthropic's)
    price: Price | None  # what its spend is counted at (None: unpriced, allowed)
    upstream: str | None  # its API's base URL (None: its provider's)


class JudgeError(Exception):
    """The judge gave no verdict: the trial errors (the harness's fault, not the agent's)."""


@cache
def rubric(name: str) -> str:
    return (resources.files("pytest_webbench.grading") / "judge_prompts" / f"{name}.txt").read_text(encoding="utf-8")


def user_message(instruction: str, submitted: dict[str, Any], judge_context: dict | None = None) -> str:
    """ClawBench's `build_user_msg`: the instruction and the intercepted request's URL, method and
    body (parsed where it was JSON or a form; its query rides in the URL), and for the strict
    rubric the case's hidden judge context (its rubric, reference solution, source task)."""
    body = submitted.get("body")
    if isinstance(body, (dict, list)):
        body_text = json.dumps(body, ensure_ascii=False, indent=2)[:BODY_CHARS]
    else:
        body_text = str(body)[:BODY_CHARS] if body is not None else "(empty)"
    context = ""
    if isinstance(judge_context, dict):
        pieces = [f"{key}:\n{value.strip()[:BODY_CHARS]}" for key in ("rubric", "reference_solution", "source_task_yaml")
                  if isinstance(value := judge_context.get(key), str) and value.strip()]
        if pieces:
            context = "\n\nHIDDEN JUDGE CONTEXT:\n" + "\n\n".join(pieces)
    # the URL and method are the agent's too, cut as the body is: a 300 KB query would blow the judge's cap
    return (f"INSTRUCTION:\n{instruction}\n\nINTERCEPTED REQUEST:\n  url: {str(submitted.get('url'))[:BODY_CHARS]}\n"
            f"  method: {str(submitted.get('method'))[:100]}\n  body:\n{body_text}\n{context}\n")


def parse_verdict(text: str) -> JudgeVerdict:
    """The single-line JSON object the rubrics ask for, tolerating a code fence around it. A reply
    without one is no match, as ClawBench scores it: the judge read the agent's submission, which can
    talk it out of its format, so a missing verdict must not error the trial (only a judge that
    could not be asked does)."""
    text = (text or "").strip()
    try:
        obj = json.loads(text[text.index("{"): text.rindex("}") + 1])
    except (ValueError, RecursionError):
        obj = None
    if not isinstance(obj, dict) or not isinstance(obj.get("match"), bool):
        return JudgeVerdict(match=False, reason=well_formed(f"no verdict in the judge's reply: {text[:200]!r}"))
    return JudgeVerdict(match=obj["match"], reason=well_formed(str(obj.get("reason", ""))[:500]))


def ask(base_url: str, token: str, api: str, model: str, rubric_name: str, user: str, timeout: float = 120,
        attempts: int = ATTEMPTS) -> JudgeVerdict:
    """One rubric's verdict, asked up to `attempts` times with ClawBench's waits between (1 s, 2 s)."""
    for attempt in range(attempts):
        try:
            return _ask_once(base_url, token, api, model, rubric_name, user, timeout)
        except JudgeError:
            if attempt == attempts - 1:
                raise
            time.sleep(2 ** attempt)
    raise AssertionError("unreachable")


def _ask_once(base_url: str, token: str, api: str, model: str, rubric_name: str, user: str, timeout: float) -> JudgeVerdict:
    try:
        text = ask_text(base_url, token, api, model, rubric(rubric_name), user, MAX_TOKENS[rubric_name], timeout,
                        f"the judge ({rubric_name})")
    except ModelCallError as exc:
        raise JudgeError(str(exc)) from None
    return parse_verdict(text)


def judge_submission(instruction: str, submitted: dict[str, Any], base_url: str, token: str, api: str, model: str,
                     judge_context: dict | None = None) -> JudgeRecord:
    """Both rubrics, one after the other (the route lets one request of a trial through at a time);
    the strict one with the case's hidden context, as verify.py asks them."""
    record = JudgeRecord(model=model)
    try:
        for name in RUBRICS:
            setattr(record, name, ask(base_url, token, api, model, name,
                                      user_message(instruction, submitted, judge_context if name == "strict" else None)))
    except JudgeError as exc:
        record.error = str(exc)
    return record


def claims_success(final_message: str | None) -> bool:
    """Whether the agent's final message claims the task done, by ClawBench's own pattern
    (eval/analyze.py, its self-report gap): the report sets the claim beside the grade."""
    from clawbench.eval.analyze import _CLAIM_RE

    return bool(final_message) and bool(_CLAIM_RE.search(json.dumps({"role": "assistant", "content": final_message},
                                                                    ensure_ascii=False)))
