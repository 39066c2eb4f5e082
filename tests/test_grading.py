import pytest

from pytest_webbench.grading import AnswerError, grade_trial, parse_answer
from pytest_webbench.design.suite import WebbenchMeta


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


def test_an_answer_spelling_a_lone_surrogate_is_not_text():
    """JSON may spell a lone UTF-16 surrogate; UTF-8 cannot hold one, so no record could carry it."""
    with pytest.raises(AnswerError, match="lone UTF-16 surrogate"):
        parse_answer('{"number": 23, "author": "\\udc00"}')
    assert parse_answer('{"author": "\\ud83d\\ude00"}') == {"author": "\U0001F600"}  # a pair is one character


def test_well_formed_replaces_only_lone_surrogates_at_any_depth_and_cuts_what_nests_too_deep():
    import json

    from pytest_webbench.results.records import TrialRecord
    from pytest_webbench.results.well_formed import MAX_NESTING, nesting, well_formed

    clean = {"a": ["x", 1, None, {"b": "ü"}]}
    assert well_formed(clean) is clean
    assert well_formed({"k\ud800": ["ok", {"v": "a\udfffb"}], "n": 2.5}) == {"k\ufffd": ["ok", {"v": "a\ufffdb"}], "n": 2.5}
    assert well_formed("\ud83d\ude00") == "\U0001F600"  # a pair split in two code points is one character
    deep = json.loads("[" * 100 + "]" * 100)
    cut = well_formed({"body": deep})
    assert nesting(cut) == MAX_NESTING and nesting(deep) > MAX_NESTING
    record = TrialRecord(trial_id="t-a1-control", task="t", attempt=1, arm="control", experiment_id="e", runner="r",
                         grading="page", outcome="failed", page_value=cut)
    assert TrialRecord.model_validate_json(record.model_dump_json()).page_value == cut  # written and read back


@pytest.mark.parametrize("nested", [70, 100_000])
def test_an_answer_nested_deeper_than_a_record_can_be_read_back_is_refused(nested):
    """pydantic reads no JSON nested past 200 levels, and Python's parser stops near 1,000 with a
    RecursionError: an answer that deep made the trial errored, or its record unreadable."""
    with pytest.raises(AnswerError, match="nests deeper than 64 levels"):
        parse_answer('{"a": ' + "[" * nested + "]" * nested + "}")
    assert grade_trial(meta(), '{"a": ' + "[" * nested + "]" * nested + "}", forwarded_calls=1).stop_reason == "no_answer"


def test_a_prose_answer_is_searched_in_its_last_braces_only(monkeypatch):
    """Every brace of '{"a":' * 40,000 parses to the recursion limit before failing: trying them all
    took 6 s of grading for 200 KB. The last MAX_STARTS are tried."""
    import json

    from pytest_webbench.grading import answer

    tried = []
    real = json.JSONDecoder.raw_decode
    monkeypatch.setattr(json.JSONDecoder, "raw_decode", lambda self, s, idx=0: tried.append(idx) or real(self, s, idx))
    with pytest.raises(AnswerError, match="not JSON"):
        parse_answer("x" + '{"a":' * 40_000)
    assert len(tried[1:]) == answer.MAX_STARTS  # after json.loads's own attempt at the whole text


def test_a_wrapped_answer_is_its_last_object_whole_not_one_nested_in_it():
    fenced = 'Found it:\n```json\n{"id": "MK-1476", "percent_off": 59, "source": {"url": "/item/1476"}}\n```'
    assert parse_answer(fenced) == {"id": "MK-1476", "percent_off": 59, "source": {"url": "/item/1476"}}
    assert parse_answer('first {"number": 1}, then {"number": 23, "of": {"n": 2}}. Done.') == {"number": 23, "of": {"n": 2}}


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

from pytest_webbench.grading.page_state import PAGE_STATE_SCRIPT, PageState  # noqa: E402

CLOUDFLARE = PageState(url="https://x/", title="Just a moment...", status=403, markers=["cloudflare"],
                       text="Checking your browser before accessing x. Verify you are human.")
PERIMETERX = PageState(url="https://x/", title="Access to this page has been denied", status=200, markers=["perimeterx"])
DATADOME = PageState(url="https://x/", title="shop.example", status=200, markers=["datadome"])
GATEWAY = PageState(url="https://x/", title="502 Bad Gateway", status=None, text="nginx")
ERROR_STATUS = PageState(url="https://x/", title="Shop", status=503, text="Please come back later")
ORDINARY = PageState(url="https://x/p/1", title="Large Green Bottle - Shoply", status=200,
                     text="Large Green Bottle $17.49 Add to cart. Access to our sale prices for members.")
# Ordinary pages that use the words block pages use: their structure says they are ordinary.
ARTICLE = PageState(url="https://x/a", title="Access denied: why my bank froze my card", status=200,
                    text="Access denied, it said. Our systems have detected unusual traffic from your account... "
                         "Are you a robot? Verify you are human, the captcha asked. Please enable cookies and JavaScript.")
HELP_PAGE = PageState(url="https://x/help", title="Help - unusual traffic", status=200,
                      text="If you see 'unusual traffic' or 'access denied', try again later. Bot detection explained.")


@pytest.mark.parametrize("state, label", [
    (CLOUDFLARE, "bot_block"), (PERIMETERX, "bot_block"), (DATADOME, "bot_block"), (GATEWAY, "site_error"),
    (ERROR_STATUS, "site_error"), (ORDINARY, "ok"), (PageState(status=429, title="Too Many Requests"), "bot_block"),
    (ARTICLE, "ok"), (HELP_PAGE, "ok"),
])
def test_page_labels(state, label):
    assert state.label == label


PAGES = {
    # a challenge page's structure: Cloudflare's challenge form and platform script
    "challenge": ("<html><head><title>Just a moment...</title><script src='/cdn-cgi/challenge-platform/h/b/orchestrate/x.js'>"
                  "</script></head><body><form id='challenge-form'></form></body></html>", 200, "bot_block"),
    # a captcha wall: the captcha is nearly all the page holds
    "wall": ("<html><head><title>shop</title></head><body><p>One moment.</p>"
             "<iframe src='https://www.google.com/recaptcha/api2/anchor?k=x'></iframe></body></html>", 200, "bot_block"),
    # a long sign-in page with a captcha widget: ordinary
    "login": ("<html><head><title>Sign in - Shop</title></head><body>" + "<p>Welcome back to the shop. " * 40
              + "</p><div class='g-recaptcha'></div></body></html>", 200, "ok"),
    # an article about blocks, in words only
    "article": ("<html><head><title>Access denied: a history of bot walls</title></head><body><h1>Unusual traffic</h1>"
                "<p>Access denied. Our systems have detected unusual traffic. Are you a robot? Verify you are human."
                "</p></body></html>", 200, "ok"),
    "error": ("<html><head><title>Shop</title></head><body>Sorry</body></html>", 503, "site_error"),
}


@pytest.mark.chromium
def test_the_page_state_script_reads_structure_in_a_real_browser():
    """The script the harness runs on the agent's last page, run in Chromium on pages that are
    and are not block pages: the label follows their structure, not their words."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    from pytest_webbench.browsers.local import LocalBackend
    from pytest_webbench.grading.page_state import read_page_state
    from pytest_webbench.service_loop import ServiceLoop

    async def page(request):
        html, status, _ = PAGES[request.path_params["name"]]
        return HTMLResponse(html, status_code=status)

    loop, local = ServiceLoop(), LocalBackend()
    labels = {}
    try:
        site = loop.serve(Starlette(routes=[Route("/{name}", page)]), "pages")

        async def go():
            await local.create_session("s", site_urls=[site])
            for name in PAGES:
                await local.execute_playwright("s", f"await page.goto({site + '/' + name!r})")
                out = await local.execute_playwright("s", f"return await page.evaluate(async () => {{{PAGE_STATE_SCRIPT}}});")
                labels[name] = read_page_state(out["result"]).label
            await local.delete_session("s")

        loop.run(go(), timeout=120)
        loop.run(local.close(), timeout=30)
    finally:
        loop.close()
    assert labels == {name: expected for name, (_, _, expected) in PAGES.items()}
