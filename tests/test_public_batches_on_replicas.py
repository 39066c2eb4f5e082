"""Public-web tool batches, run on the local-web replica of their site before they meet the real
one: the same file, its url_patterns rebased from the public origin to the replica's."""

from __future__ import annotations

import pytest

from pytest_webbench.browsers.local import LocalBackend
from pytest_webbench.run import load_site_app
from pytest_webbench.service import ServiceLoop
from pytest_webbench.suite import load_suite

from test_public_web import LOCAL_WEB_DIR, PUBLIC_WEB

pytestmark = pytest.mark.chromium
# public site -> (local-web replica site, an article or page on it)
REPLICAS = {"wikipedia": ("wiki", "/wiki/Corvain")}


@pytest.fixture(scope="module")
def replica_browser():
    loop = ServiceLoop()
    backend = LocalBackend()
    local = load_suite(LOCAL_WEB_DIR)
    urls = {}
    for site in {r for r, _ in REPLICAS.values()}:
        port = loop.serve(load_site_app(local, site), site).rsplit(":", 1)[1]
        urls[site] = f"http://{local.spec.sites[site].host}:{port}"
    yield loop, backend, urls
    loop.run(backend.close())
    loop.close()


@pytest.mark.parametrize("public_site", sorted(REPLICAS))
def test_the_public_batch_works_on_the_replica(public_site, replica_browser):
    loop, backend, urls = replica_browser
    replica, path = REPLICAS[public_site]
    public = load_suite(PUBLIC_WEB).spec.sites[public_site]
    source = (PUBLIC_WEB / public.tool_batch).read_text().replace(public.base_url + "/*", f"http://{replica}.localhost/*")
    session = f"replica-{public_site}"

    async def go():
        await backend.create_session(session)
        await backend.execute_playwright(session, f"await page.goto({urls[replica] + path!r})")
        await backend.add_custom_tools(session, public.namespace, source, force_overwrite_namespace=True)
        listed = await backend.webmcp_list(session)
        refs = {t["tool"]["name"]: t["tool_ref"] for t in listed["tools"] if "custom" in t["source"]}
        summary = await backend.webmcp_invoke(session, refs["get_article_summary"], {"title": "Corvain"})
        infobox = await backend.webmcp_invoke(session, refs["get_infobox"], {"title": "Corvain"})
        missing = await backend.webmcp_invoke(session, refs["get_article_summary"], {"title": "Nowhere"})
        await backend.delete_session(session)
        return summary, infobox, missing

    summary, infobox, missing = loop.run(go(), timeout=60)
    assert summary["status"] == "completed" and summary["output"]["title"] == "Corvain"
    rows = {r["label"]: r["value"] for r in infobox["output"]["rows"]}
    assert rows["Population"] == "1,204,556" and rows["Country"] == "Estria"
    assert missing["status"] == "error" and missing["error_text"] == "Error: no article Nowhere", missing
