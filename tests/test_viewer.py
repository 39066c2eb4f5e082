"""Every trial one click from the report: report.html -> a trial's or a pair's page (timeline from the
logs on disk, a screenshot per browser call from the trace) -> trace.zip. Checked in a real browser
(Playwright for Python on the system Chromium), on a local-web run whose shop-price pairs are
discordant (the seeded reference agent answers wrongly in control)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pytest_webbench.proxy.log import read_call_log
from pytest_webbench.results.records import read_trial_records

pytestmark = pytest.mark.chromium
ROOT = Path(__file__).resolve().parents[1]
LOCAL_WEB = ROOT / "suites" / "local-web"
PRESET = """
name = "reference-control-wrong"
agent = "pytest_webbench.runners.reference:ReferenceAgent"
takes_trial_context = true
[options]
seed = "viewer-test"
[options.wrong_answers.shop-price]
control = 1.0
"""


def _run(tmp: Path, exp: str, *extra: str) -> Path:
    preset = tmp / "preset.toml"
    preset.write_text(PRESET)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--suite", str(LOCAL_WEB), "--runner", str(preset),
         f"--results-dir={tmp / 'results'}", "--experiment-id", exp, "-k", "shop-price or codehub-merged-pr", *extra],
        cwd=tmp, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # control fails shop-price: a failed test
    return tmp / "results" / exp


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("viewer")
    return _run(tmp, "traced", f"--html={tmp / 'pytest.html'}")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium")
        yield chromium
        chromium.close()


def _tool_calls(exp: Path, trial_id: str) -> list:
    [record] = [r for r in read_trial_records(exp)[0] if r.trial_id == trial_id]
    log = exp / record.harbor_trial_dir / "proxy-log.jsonl"
    return [c for c in read_call_log(log).records if c.method == "tools/call" or c.decision == "rejected"]


def test_a_discordant_pair_is_one_click_from_the_report_with_both_timelines(traced, browser):
    page = browser.new_page()
    page.goto((traced / "report.html").as_uri())
    link = page.locator("#discordant-pairs + ul a", has_text="shop-price-a1")
    assert link.count() == 1
    link.click()
    page.wait_for_load_state()
    assert page.url.endswith("/pages/pair-shop-price-a1.html")
    for arm, outcome in (("control", "failed"), ("treatment", "passed")):
        side = page.locator(f'section[data-arm="{arm}"]')
        assert outcome in side.locator("b").nth(2).inner_text()
        rows = side.locator('tr[data-kind="browser"]')
        calls = _tool_calls(traced, f"shop-price-a1-{arm}")
        assert calls and rows.count() == len(calls)  # each call the proxy logged, in order
        for i, call in enumerate(calls):
            assert call.tool in rows.nth(i).inner_text()
        # the page after each call, from the trace
        assert side.locator('tr[data-kind="browser"] img.frame').count() == len(calls)
        assert side.locator('a[href$="trace.zip"]').count() == 1
    # treatment's invoke of the injected tool is marked so
    assert "(injected)" in page.locator('section[data-arm="treatment"]').inner_text()


def test_pages_link_their_pictures_and_an_export_holds_them_whole(traced, browser, tmp_path):
    """A run's pages link what is on disk (thumbnails shared by content, the final screenshot in
    Harbor's folder) instead of embedding it; an export is one file that needs nothing else."""
    import re

    from pytest_webbench.viewer.__main__ import main as viewer_main

    def pictures_load(path: Path) -> list[int]:
        page = browser.new_page()
        page.goto(path.as_uri())  # waits for the load event: every picture fetched or failed
        widths = page.locator("img").evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
        page.close()
        return widths

    pair, alone = traced / "pages" / "pair-shop-price-a1.html", traced / "pages" / "shop-price-a1-control.html"
    html = pair.read_text()
    assert "data:image" not in html and "data:image" not in alone.read_text()
    widths = pictures_load(pair)
    assert len(widths) > 2 and all(w > 0 for w in widths)  # every linked picture is there
    thumbs = set(re.findall(r"src=(frames/[0-9a-f]+\.jpeg)", html))
    assert thumbs and thumbs & set(re.findall(r"src=(frames/[0-9a-f]+\.jpeg)", alone.read_text()))  # one file, two pages
    assert '<img class="final" alt="final page" src="../jobs/' in html

    out = tmp_path / "apart" / "pair.html"
    assert viewer_main([str(traced), "shop-price-a1", "-o", str(out)]) == 0
    exported = out.read_text()
    assert all(src.startswith("data:image/") for src in re.findall(r'<img[^>]* src="?([^" >]+)', exported))
    exported_widths = pictures_load(out)  # opened from a folder of its own
    assert len(exported_widths) == len(widths) and all(w > 0 for w in exported_widths)
    assert viewer_main([str(traced), "no-such-trial", "-o", str(tmp_path / "x.html")]) == 2
    assert viewer_main([str(traced), "../../manifest", "-o", str(tmp_path / "y.html")]) == 2  # an ID, never a path
    assert not (tmp_path / "x.html").exists() and not (tmp_path / "y.html").exists()


def test_every_trial_has_a_page_reached_from_the_report(traced, browser):
    records, _ = read_trial_records(traced)
    page = browser.new_page()
    page.goto((traced / "report.html").as_uri())
    # one click: every trial is linked from its arm and task's row
    linked = {h.removeprefix("pages/").removesuffix(".html") for h in
              page.locator("td.trials a").evaluate_all("links => links.map(a => a.getAttribute('href'))")}
    assert linked == {r.trial_id for r in records}
    for href in page.locator("a[href^='pages/']").evaluate_all("links => links.map(a => a.href)"):
        assert Path(href.removeprefix("file://")).is_file(), href  # no link leads nowhere
    page.locator('a[href="pages/index.html"]').first.click()
    page.wait_for_load_state()
    listed = page.locator("table a:not([href^=pair])")
    assert sorted(listed.all_inner_texts()) == sorted(r.trial_id for r in records)
    first = listed.first.inner_text()
    assert first.endswith("-control") and first.startswith("shop-price")  # failures first
    listed.first.click()
    page.wait_for_load_state()
    assert page.locator("h2").first.inner_text() == first and "failed" in page.content()
    # the failed trial is also listed under the report's stop reasons, linking the same page
    page.goto((traced / "report.html").as_uri())
    assert page.locator("#not-passed + ul a").all_inner_texts() == ["shop-price-a1-control"]


def test_the_trace_is_playwright_s_trace_zip_of_the_harness_s_connection(traced):
    """The trace is recorded over the harness's own connection to the trial's browser: its screencast
    covers the whole trial and its calls are the harness's (the start page, the page check). The
    agent's code runs in its sealed runner over a connection of its own, so its calls are the proxy
    log's, and the frames show what they did."""
    [record] = [r for r in read_trial_records(traced)[0] if r.trial_id == "shop-price-a1-playwright"]
    assert record.trace is not None and record.trace.file == "trace.zip"
    with zipfile.ZipFile(traced / record.harbor_trial_dir / "trace.zip") as archive:
        events = [json.loads(line) for line in archive.read("trace.trace").decode().splitlines()]
        frames = [e for e in events if e["type"] == "screencast-frame"]
        assert frames and all(archive.getinfo(e.get("file") or f"resources/{e['sha1']}") for e in frames)
    methods = [f"{e['class']}.{e['method']}" for e in events if e["type"] == "before"]
    assert "Frame.goto" in methods  # the start page, opened by the harness
    assert not any(m.endswith(".click") for m in methods)  # the agent's clicks are not the harness's calls
    [call] = _tool_calls(traced, "shop-price-a1-playwright")
    assert "click" in call.arguments["code"]  # ...they are in the proxy log, as the agent sent them
    # and the screencast runs past the agent's call: its effect is on the frames
    assert max(e["timestamp"] for e in frames) > min(e["timestamp"] for e in frames)


def test_each_screenshot_is_stored_once_and_the_trace_still_opens_in_playwright_s_viewer(traced, browser):
    """Repeated screencast frames are dropped from trace.zip and their events point at the frame
    kept (browsers/trace_zip.py); Playwright's own trace viewer, served here as `show-trace` serves
    it, still loads the trace and every frame of its film strip."""
    import functools
    import hashlib
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    import playwright

    traces = sorted(traced.glob("jobs/*/*/trace.zip"))
    repeats = 0
    for trace in traces:
        with zipfile.ZipFile(trace) as archive:
            frames = [n for n in archive.namelist() if n.startswith("screencast/")]
            assert len({hashlib.sha1(archive.read(n)).digest() for n in frames}) == len(frames), trace
            events = [json.loads(line) for line in archive.read("trace.trace").splitlines() if b"screencast-frame" in line]
            assert {e["file"] for e in events} <= set(frames), trace  # every event's picture is in the archive
            repeats += len(events) - len(frames)
    assert repeats > 0  # the run's pages did stay the same between frames: there was something to drop

    viewer_dir = Path(playwright.__file__).parent / "driver" / "package" / "lib" / "vite" / "traceViewer"
    shown = traces[0].parent

    class Files(SimpleHTTPRequestHandler):
        def translate_path(self, path):
            if path.split("?", 1)[0] == "/trace.zip":
                return str(shown / "trace.zip")
            return super().translate_path(path)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Files, directory=str(viewer_dir)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page = browser.new_page()
        statuses = []
        page.on("response", lambda r: statuses.append(r.status) if "/file/screencast/" in r.url else None)
        base = f"http://127.0.0.1:{server.server_address[1]}"
        page.goto(f"{base}/index.html?trace={base}/trace.zip")
        page.locator(".film-strip-frame").first.wait_for(timeout=30_000)
        page.wait_for_load_state("networkidle")
        assert statuses and set(statuses) == {200}
        page.close()
    finally:
        server.shutdown()


def test_pytest_html_links_the_same_trial_page(traced):
    html = (traced.parents[1] / "pytest.html").read_text()
    for record in read_trial_records(traced)[0]:
        assert (traced / "pages" / f"{record.trial_id}.html").resolve().as_uri() in html


def test_without_traces_each_trial_still_has_its_timeline(tmp_path, browser):
    exp = _run(tmp_path, "untraced", "--no-trace")
    records, _ = read_trial_records(exp)
    assert records and all(r.trace is None for r in records)
    assert not list(exp.glob("jobs/*/*/trace.zip"))
    page = browser.new_page()
    page.goto((exp / "pages" / "shop-price-a1-treatment.html").as_uri())
    assert "No browser trace (tracing was off)" in page.content()
    assert page.locator('tr[data-kind="browser"]').count() == len(_tool_calls(exp, "shop-price-a1-treatment"))
    assert json.loads((exp / "manifest.json").read_text())["trace"] is False


def test_harbor_s_viewer_lists_every_trial_of_the_run(traced):
    """`harbor view results/<id>/jobs --jobs` reads the arms' job folders as Harbor wrote them."""
    from fastapi.testclient import TestClient
    from harbor.viewer.server import create_app

    with TestClient(create_app(traced / "jobs", mode="jobs")) as client:
        jobs = client.get("/api/jobs").json()
        assert sorted(j["name"] for j in jobs["items"]) == ["control", "playwright", "treatment"]
        for arm in ("control", "treatment", "playwright"):
            trials = client.get(f"/api/jobs/{arm}/trials").json()["items"]
            expected = sorted(r.trial_id for r in read_trial_records(traced)[0] if r.arm == arm)
            assert sorted(t["name"] for t in trials) == expected
            result = client.get(f"/api/jobs/{arm}/trials/{expected[0]}").json()
            assert result["trial_name"] == expected[0]



@pytest.mark.parametrize("value", [
    {"price": 17.49}, None, [], {}, [[1, {"a": None}], "ünï ✓"], 10**30, -0.0, 1e300, 1e-7, 2.5e-5, float("nan"),
    {"k": [float("inf"), None]}, "\udc80 lone", {"1": True, 2: False}, "</pre><script>x</script>", "P\u0430ris",
    "42\u200b", "\u202e\u2066cba", {3}, b"ab", {"when": __import__("datetime").datetime(2024, 1, 1, 3, 4)},
])
def test_a_value_on_a_trial_page_is_shown_as_json_writes_it(value):
    """The page shows json's own spelling, indented one space (viewer/values.py json_cell, which has
    msgspec indent what json's C encoder writes): ASCII only, so a look-alike letter, a hidden
    character or a right-to-left mark shows as its escape; NaN as NaN; a non-JSON value as its str()."""
    import html

    from pytest_webbench.viewer.values import json_cell as _json

    shown = _json(value)
    assert "<" not in shown and ">" not in shown  # escaped for the page
    assert html.unescape(shown) == json.dumps(value, indent=1, default=str)
    assert html.unescape(_json({"a": "x" * 9000})) == json.dumps({"a": "x" * 9000}, indent=1)[:4000]


def test_a_trial_whose_folder_lies_outside_the_run_still_gets_its_page(tmp_path):
    """A schema 1 record names its Harbor folder by an absolute path, which may lie outside the
    run's folder once the run is moved: its page links the trace where it is."""
    from pytest_webbench.results.records import TrialRecord
    from pytest_webbench.viewer.pages import render_trial_page
    from pytest_webbench.viewer.timeline import build_timeline

    exp, elsewhere = tmp_path / "exp", tmp_path / "elsewhere"
    exp.mkdir(), elsewhere.mkdir()
    with zipfile.ZipFile(elsewhere / "trace.zip", "w") as z:
        z.writestr("trace.trace", '{"type":"before","class":"Page","method":"goto"}\n')
    record = TrialRecord(trial_id="t-a1-control", task="t", attempt=1, arm="control", experiment_id="e", outcome="passed",
                         runner="r", grading="pinned", harbor_trial_dir=str(elsewhere))
    page = render_trial_page(build_timeline(exp, record), exp)
    assert f"playwright show-trace {elsewhere / 'trace.zip'}" in page
