import pytest

from pytest_webbench.grading import AnswerError, grade_trial, parse_answer
from pytest_webbench.suite import WebbenchMeta


def meta(**kw):
    base = dict(site="s", grading="pinned", turn_cap=5, spend_limit_usd=1, tool_batch="s",
                answer={"number": {"type": "integer", "equals": 23}, "author": {"type": "string", "equals": "Ann", "casefold": True}})
    base.update(kw)
    return WebbenchMeta.model_validate(base)


def test_pinned_answer_passes_and_fails_with_a_message():
    assert grade_trial(meta(), '{"number": 23, "author": " ann "}', forwarded_calls=3).passed
    g = grade_trial(meta(), '{"number": 24, "author": "ann"}', forwarded_calls=3)
    assert not g.passed and g.stop_reason == "wrong_answer" and "expected 23, got 24" in g.detail


def test_no_permitted_browser_call_scores_zero_even_with_the_right_answer():
    g = grade_trial(meta(), '{"number": 23, "author": "ann"}', forwarded_calls=0)
    assert not g.passed and g.stop_reason == "no_browser_call" and g.reward == 0


@pytest.mark.parametrize("raw, why", [
    (None, "no answer"), (b"\xff\xfe", "not UTF-8"), ("just prose", "not JSON"), ("[1, 2]", "not a JSON object"),
    ("x" * 1_000_001, "limit"),
])
def test_bad_answers_are_clear_errors(raw, why):
    with pytest.raises(AnswerError, match=why):
        parse_answer(raw)
    g = grade_trial(meta(), raw, forwarded_calls=1)
    assert g.stop_reason == "no_answer" and why in g.detail


def test_json_inside_prose_is_found():
    assert parse_answer('Done! ```json\n{"number": 23}\n```') == {"number": 23}


def test_booleans_are_not_integers():
    g = grade_trial(meta(answer={"n": {"type": "integer", "equals": 1}}), '{"n": true}', forwarded_calls=1)
    assert not g.passed


def test_page_grading_checks_page_and_answer_against_it():
    m = meta(grading="page", answer={"total": {"type": "string", "from_page": "total"}},
             page={"path": "/cart", "script": "return 1", "expect": {"items": {"A": 2}}})
    page = {"items": {"A": 2}, "total": "$5.00"}
    assert grade_trial(m, '{"total": "$5.00"}', 2, page_value=page).passed
    g = grade_trial(m, '{"total": "$5.00"}', 2, page_value={"items": {"A": 1}, "total": "$5.00"})
    assert not g.passed and "page items" in g.detail
    g = grade_trial(m, '{"total": "$9.00"}', 2, page_value=page)
    assert not g.passed and "the page shows '$5.00'" in g.detail
    g = grade_trial(m, '{"total": "$5.00"}', 2, page_error="navigation")
    assert g.stop_reason == "unreadable_page"


def test_format_grading_checks_shape_only():
    m = meta(grading="format", answer={"title": {"type": "string", "pattern": r".*\S.*"}, "rows": {"type": "integer", "minimum": 1}})
    assert grade_trial(m, '{"title": "X", "rows": 2}', 1).passed
    assert not grade_trial(m, '{"title": " ", "rows": 2}', 1).passed
    assert not grade_trial(m, '{"title": "X", "rows": 0}', 1).passed


@pytest.mark.parametrize("bad, message", [
    (dict(grading="pinned", answer={"x": {"type": "string"}}), "needs an answer field with equals"),
    (dict(grading="format"), "checks shape only"),
    (dict(grading="page"), "needs a \\[metadata.webbench.page\\]"),
    (dict(placebo=True), "placebo"),
    (dict(tool_batch=None), "tool_batch"),
])
def test_inconsistent_task_metadata_is_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        meta(**bad)


# -- the page a failed trial was left on ----------------------------------------------------------

from pytest_webbench.grading.page_state import PageState, refine_stop_reason  # noqa: E402

CLOUDFLARE = PageState(url="https://x/", title="Just a moment...", status=403,
                       text="Checking your browser before accessing x.\nVerify you are human by completing the action below.")
PERIMETERX = PageState(url="https://x/", title="Access to this page has been denied", status=200,
                       text="Press & Hold to confirm you are a human (and not a bot).")
GATEWAY = PageState(url="https://x/", title="502 Bad Gateway", status=None, text="nginx")
ERROR_STATUS = PageState(url="https://x/", title="Shop", status=503, text="Please come back later")
ORDINARY = PageState(url="https://x/p/1", title="Large Green Bottle - Shoply", status=200,
                     text="Large Green Bottle $17.49 Add to cart. Access to our sale prices for members.")


@pytest.mark.parametrize("state, label", [
    (CLOUDFLARE, "bot_block"), (PERIMETERX, "bot_block"), (GATEWAY, "site_error"), (ERROR_STATUS, "site_error"),
    (ORDINARY, "ok"), (PageState(status=429, title="Too Many Requests"), "bot_block"),
])
def test_page_labels(state, label):
    assert state.label == label


def test_only_failures_are_relabelled():
    assert refine_stop_reason("wrong_answer", CLOUDFLARE) == "bot_block"
    assert refine_stop_reason("no_answer", GATEWAY) == "site_error"
    assert refine_stop_reason("wrong_answer", ORDINARY) == "wrong_answer"
    assert refine_stop_reason(None, CLOUDFLARE) is None  # a pass is never changed
    assert refine_stop_reason("call_cap", CLOUDFLARE) == "call_cap"  # the agent's own limit stays
    assert refine_stop_reason("wrong_answer", None) == "wrong_answer"
