"""Marketa's failure surfaces, as a browser meets them: the bot-defence challenge (a route no task
visits) is labelled a block by the page check the harness runs after every trial, and while
`MARKET_API_FAILS` is set the site's API answers 500, so the injected tools fail and the page
check labels an API page a site error."""

from __future__ import annotations

import pytest

from pytest_webbench.browsers.local import LocalBackend
from pytest_webbench.grading.page_state import PAGE_STATE_SCRIPT, read_page_state
from pytest_webbench.trial.services import load_site_app
from pytest_webbench.service_loop import ServiceLoop
from pytest_webbench.design.suite import load_suite

pytestmark = pytest.mark.chromium


@pytest.fixture(scope="module")
def market():
    from pathlib import Path

    suite = load_suite(Path(__file__).resolve().parents[1] / "suites" / "local-web")
    loop = ServiceLoop()
    backend = LocalBackend()
    url = "http://market.localhost:" + loop.serve(load_site_app(suite, "market"), "market").rsplit(":", 1)[1]
    loop.run(backend.create_session("M", site_urls=[url]))
    yield loop, backend, url, suite
    loop.run(backend.close())
    loop.close()


def _label(loop, backend, url: str) -> str:
    code = f"await page.goto({url!r}); return await page.evaluate(async () => {{{PAGE_STATE_SCRIPT}}});"
    return read_page_state(loop.run(backend.execute_playwright("M", code))["result"]).label


def test_the_challenge_is_a_block_and_the_shop_is_not(market):
    loop, backend, url, _ = market
    assert _label(loop, backend, url + "/_challenge") == "bot_block"
    assert _label(loop, backend, url + "/products?brand=Kestrel") == "ok"


def test_under_the_flag_the_api_fails_and_so_does_the_injected_tool(market, monkeypatch):
    loop, backend, url, suite = market
    loop.run(backend.execute_playwright("M", f"await page.goto({url + '/'!r})"))
    batch = suite.tool_batch_path("market").read_text()
    loop.run(backend.add_custom_tools("M", "market", batch, True))
    ref = next(t["tool_ref"] for t in loop.run(backend.webmcp_list("M"))["tools"] if t["tool"]["name"] == "list_deals")
    assert loop.run(backend.webmcp_invoke("M", ref, {}))["status"] == "completed"
    monkeypatch.setenv("MARKET_API_FAILS", "1")
    assert _label(loop, backend, url + "/api/products") == "site_error"
    loop.run(backend.execute_playwright("M", f"await page.goto({url + '/'!r})"))
    ref = next(t["tool_ref"] for t in loop.run(backend.webmcp_list("M"))["tools"] if t["tool"]["name"] == "list_deals")
    assert loop.run(backend.webmcp_invoke("M", ref, {}))["status"] != "completed"
