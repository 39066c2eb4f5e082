"""Public-web tool batches, run on the local-web replica of their site before they meet the real
one: the same file, its url_patterns rebased from the public origin to the replica's."""

from __future__ import annotations

import pytest

from pytest_webbench.browsers.local import LocalBackend
from pytest_webbench.trial.services import load_site_app
from pytest_webbench.service_loop import ServiceLoop
from pytest_webbench.design.suite import load_suite

from test_public_web import LOCAL_WEB_DIR, PUBLIC_WEB

pytestmark = pytest.mark.chromium
# public site -> (local-web replica site, a page on it, tool calls to make, their checks)
REPLICAS = {
    "wikipedia": ("wiki", "/wiki/Corvain", [("get_article_summary", {"title": "Corvain"}), ("get_infobox", {"title": "Corvain"}),
                                            ("get_article_summary", {"title": "Nowhere"})]),
    "github": ("codehub", "/acme/rocket", [("get_pull_request", {"repository": "acme/rocket", "number": 23}),
                                           ("search_merged_pull_requests", {"repository": "acme/rocket", "limit": 5}),
                                           ("search_merged_pull_requests", {"repository": "acme/rocket", "query": "downlink STALLS"}),
                                           ("get_pull_request", {"repository": "acme/rocket", "number": 999})]),
}


def check_wikipedia(results):
    summary, infobox, missing = results
    assert summary["status"] == "completed" and summary["output"]["title"] == "Corvain"
    rows = {r["label"]: r["value"] for r in infobox["output"]["rows"]}
    assert rows["Population"] == "1,204,556" and rows["Country"] == "Estria"
    assert missing["status"] == "error" and missing["error_text"] == "Error: no article Nowhere", missing


def check_github(results):
    pull, merged, by_title, missing = results
    assert pull["status"] == "completed", pull
    assert pull["output"]["number"] == 23 and pull["output"]["author"] == "ejemison" and pull["output"]["merged"] is True
    assert pull["output"]["merged_by"] and len(pull["output"]["merge_commit_sha"]) == 40
    # title words narrow the search to the one pull request, as github-merged-pr's treatment uses it
    assert by_title["status"] == "completed" and [p["number"] for p in by_title["output"]] == [23], by_title
    numbers = [p["number"] for p in merged["output"]]
    assert merged["status"] == "completed" and len(numbers) == 5 and numbers == sorted(set(numbers), reverse=True)
    assert all(set(p) == {"number", "title", "author"} for p in merged["output"])
    assert missing["status"] == "error" and "GitHub API 404" in missing["error_text"], missing


CHECKS = {"wikipedia": check_wikipedia, "github": check_github}


@pytest.fixture(scope="module")
def replica_browser():
    loop = ServiceLoop()
    backend = LocalBackend()
    local = load_suite(LOCAL_WEB_DIR)
    urls = {}
    for site in {r for r, _, _ in REPLICAS.values()}:
        port = loop.serve(load_site_app(local, site), site).rsplit(":", 1)[1]
        urls[site] = f"http://{local.spec.sites[site].host}:{port}"
    yield loop, backend, urls
    loop.run(backend.close())
    loop.close()


@pytest.mark.parametrize("public_site", sorted(REPLICAS))
def test_the_public_batch_works_on_the_replica(public_site, replica_browser):
    loop, backend, urls = replica_browser
    replica, path, calls = REPLICAS[public_site]
    public = load_suite(PUBLIC_WEB).spec.sites[public_site]
    source = (PUBLIC_WEB / public.tool_batch).read_text().replace(public.base_url + "/*", f"http://{replica}.localhost/*")
    session = f"replica-{public_site}"

    async def go():
        await backend.create_session(session, site_urls=[urls[replica]])
        await backend.execute_playwright(session, f"await page.goto({urls[replica] + path!r})")
        await backend.add_custom_tools(session, public.namespace, source, force_overwrite_namespace=True)
        listed = await backend.webmcp_list(session)
        refs = {t["tool"]["name"]: t["tool_ref"] for t in listed["tools"] if "custom" in t["source"]}
        results = [await backend.webmcp_invoke(session, refs[name], args) for name, args in calls]
        await backend.delete_session(session)
        return results

    CHECKS[public_site](loop.run(go(), timeout=60))
