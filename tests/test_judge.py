"""The judge of write tasks (grading/judge.py) against ClawBench's own verifier: the same rubrics,
the same user message, the same reading of a verdict (the installed clawbench-eval is the oracle),
and how its verdicts become a grade and an outcome."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest

from pytest_webbench.design.clawbench import installed_root
from pytest_webbench.design.suite import WebbenchMeta
from pytest_webbench.grading.grade import grade_trial, needs_judge
from pytest_webbench.grading.judge import parse_verdict, request_for, reply_text, rubric, user_message
from pytest_webbench.grading.verdict import decide
from pytest_webbench.results.records import BrowserCalls, JudgeRecord, JudgeVerdict, Tokens


@pytest.fixture(scope="module")
def verify():
    path = installed_root().parents[1] / "runtime" / "harbor" / "verify.py"
    spec = importlib.util.spec_from_file_location("clawbench_verify", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_rubrics_are_clawbench_s_own(verify):
    assert rubric("strict") == verify.JUDGE_SYSTEM_STRICT
    assert rubric("lenient") == verify.JUDGE_SYSTEM_LENIENT


@pytest.mark.parametrize("body", [{"name": "Ada", "qty": 2}, [1, 2], "title=x&labels=bug", None, {"long": "x" * 9000}, ""])
def test_the_user_message_is_clawbench_s(verify, body):
    submitted = {"method": "POST", "url": "https://shop.example/checkout?ref=7", "body": body, "query": {"ref": "7"}}
    ours = user_message("Buy two mugs", submitted)
    theirs = verify.build_user_msg("Buy two mugs", {"request": submitted}, None)
    assert ours == theirs


@pytest.mark.parametrize("text", ['{"match": true, "reason": "right item"}', '```json\n{"match": false, "reason": "no"}\n```',
                                  'Sure. {"match": true} done', '{"match": "yes"}', "no verdict at all", ""])
def test_a_verdict_is_read_as_clawbench_reads_it_and_no_verdict_is_no_match(verify, text):
    match, _ = verify.parse_verdict(text)
    verdict = parse_verdict(text)
    if match is None:  # ClawBench scores it 0; the agent's submission can talk the judge out of its format
        assert verdict.match is False and "no verdict" in verdict.reason
    else:
        assert verdict.match is match


def test_the_agent_s_url_and_method_are_cut_as_its_body_is():
    """A 300 KB query in the submission's URL would blow the judge's token cap: the trial was errored."""
    message = user_message("Buy a mug", {"method": "POST" * 1000, "url": "https://shop.example/buy?q=" + "x" * 300_000, "body": None})
    assert len(message) < 7_000 and "https://shop.example/buy?q=xxx" in message


def test_a_verdict_s_reason_spelling_a_lone_surrogate_is_kept_as_text():
    """The judge's reply may quote the agent's submission, lone surrogates (JSON's "\\ud800") and all."""
    verdict = parse_verdict('{"match": false, "reason": "it sent \\ud800"}')
    assert verdict.reason == "it sent \ufffd" and JudgeRecord(model="m", lenient=verdict).model_dump_json()


def test_the_judge_calls_are_each_api_s_own_shape():
    path, body = request_for("chat", "gpt-4o-mini", "SYS", "USER", 800)
    assert path == "/chat/completions" and body["messages"][0] == {"role": "system", "content": "SYS"}
    assert body["stream"] is False and body["max_tokens"] == 800
    path, body = request_for("messages", "claude-x", "SYS", "USER", 800)
    assert path == "/v1/messages" and body["system"] == "SYS" and body["messages"] == [{"role": "user", "content": "USER"}]
    assert reply_text("chat", {"choices": [{"message": {"content": '{"match": true}'}}]}) == '{"match": true}'
    assert reply_text("messages", {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}) == "ab"


META = {"site": "s", "grading": "request", "answer": {}, "turn_cap": 5, "spend_limit_usd": 1, "arms": ["control", "playwright"]}
SUBMITTED = {"submissions": 1, "submitted": {"method": "POST", "url": "http://s/x", "body": {"a": "1"}, "query": {}}}


def meta(**request) -> WebbenchMeta:
    return WebbenchMeta.model_validate({**META, "request": {"url_pattern": "/x", "method": "POST", **request}})


def test_only_expected_fields_decide_without_the_judge():
    """verify.py judges every intercepted request: a body or query in the check only chose which
    request was intercepted (a rating with the wrong title matched its check and failed the judge)."""
    assert needs_judge(meta())
    assert needs_judge(meta(body={"a": "1"})) and needs_judge(meta(params={"r": "7"}))
    assert not needs_judge(meta(expect={"a": "1"}))


CONTEXT = {"rubric": "The rating must be for Prof. Ada, 5 stars.", "reference_solution": "  POST /graphql ... ",
           "source_task_yaml": "", "other": "not shown"}


@pytest.mark.parametrize("context", [CONTEXT, None, {"rubric": 7}, {}])
def test_the_strict_judge_sees_the_case_s_hidden_context_as_verify_py_shows_it(verify, context):
    submitted = {"method": "POST", "url": "https://r.example/graphql", "body": {"operationName": "Rate"}}
    assert user_message("Rate Ada", submitted, context) == verify.build_user_msg("Rate Ada", {"request": submitted}, context)


def test_a_judge_that_fails_is_asked_three_times_as_clawbench_asks_it():
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from pytest_webbench.grading.judge import judge_submission
    from pytest_webbench.service_loop import ServiceLoop

    seen: list[str] = []

    async def chat(request):
        seen.append((await request.json())["messages"][0]["content"].split("\n", 1)[0])
        if len(seen) in (1, 2, 4, 5, 6):  # the strict rubric once flaky, then the lenient one down for good
            return JSONResponse({"error": "overloaded"}, status_code=529)
        return JSONResponse({"choices": [{"message": {"content": '{"match": true, "reason": "ok"}'}}]})

    loop = ServiceLoop()
    try:
        url = loop.serve(Starlette(routes=[Route("/chat/completions", chat, methods=["POST"])]), "judge")
        record = judge_submission("Buy", {"method": "POST", "url": "http://s/x", "body": None}, url, "t", "chat", "m")
    finally:
        loop.close()
    assert record.strict is not None and record.strict.match and record.lenient is None
    assert "HTTP 529" in record.error and len(seen) == 6  # 3 strict (2 failed), 3 lenient (all failed)


def verdict(lenient: bool | None, strict: bool | None = True, error: str | None = None):
    judge = JudgeRecord(model="m", error=error,
                        lenient=None if lenient is None else JudgeVerdict(match=lenient, reason="l"),
                        strict=None if strict is None else JudgeVerdict(match=strict, reason="s"))
    grade = grade_trial(meta(), None, 3, page_value=SUBMITTED, judge=judge)
    outcome = SimpleNamespace(exception=None, scored_note=None, output_refused=None, tokens=Tokens())
    return grade, decide(outcome, grade, BrowserCalls(), None, None, 1.0)


def test_the_lenient_verdict_grades_and_the_strict_one_is_kept_beside_it():
    grade, v = verdict(lenient=True, strict=False)
    assert grade.passed and v.outcome == "passed" and "strict False" in v.detail
    grade, v = verdict(lenient=False, strict=False)
    assert (v.outcome, v.stop_reason) == ("failed", "wrong_submission")


def test_a_judge_that_gave_no_verdict_errors_the_trial_whatever_else():
    _, v = verdict(lenient=None, strict=None, error="the judge (strict) answered HTTP 502")
    assert (v.outcome, v.stop_reason) == ("errored", "judge_error") and "HTTP 502" in v.detail
    grade = grade_trial(meta(), None, 3, page_value=SUBMITTED, judge=None)
    assert grade.stop_reason == "judge_error"


def test_no_submission_is_a_failure_before_any_judge():
    grade = grade_trial(meta(), None, 3, page_value={"submissions": 0, "submitted": None}, judge=None)
    assert (grade.passed, grade.stop_reason) == (False, "no_submission")


def test_a_judged_case_s_request_blocked_only_in_another_spelling_is_no_clawbench_submission():
    """The matcher blocks spellings ClawBench's own check would let through ("  Webbench ", "qx417"):
    such a request is no submission in ClawBench's terms, so it fails without a judge, judged case or not."""
    value = {"submissions": 1, "submitted": {"method": "POST", "url": "http://s/x", "body": {"a": " 1 "}, "query": {},
                                             "clawbench": False}}
    graded = grade_trial(meta(body={"a": "1"}), None, 3, page_value=value, judge=None)
    assert (graded.passed, graded.stop_reason) == (False, "wrong_submission") and "ClawBench's check" in graded.detail
    # the same request as ClawBench reads it goes to the judge
    right = {**value, "submitted": {**value["submitted"], "clawbench": True}}
    assert grade_trial(meta(body={"a": "1"}), None, 3, page_value=right, judge=None).stop_reason == "judge_error"
