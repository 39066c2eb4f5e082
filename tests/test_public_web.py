"""The public-web suite, offline: its definitions, its plan, and --browser kernel's checks."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

from pytest_webbench.design.suite import load_suite

PUBLIC_WEB = Path(__file__).resolve().parents[1] / "suites" / "public-web"
LOCAL_WEB_DIR = PUBLIC_WEB.parent / "local-web"


def evaluate_batch(path: Path) -> list[dict]:
    """Evaluates a batch as Kernel does (a JS expression) and describes each tool's shape."""
    from pytest_webbench.browsers.pod import playwright_driver

    script = ("const tools = eval(require('fs').readFileSync(process.argv[1], 'utf8'));"
              "console.log(JSON.stringify(tools.map((t) => ({kind: t.kind, name: t.tool.name, description: t.tool.description,"
              " inputSchema: t.tool.inputSchema, patterns: t.match.url_patterns, execute: typeof t.execute}))));")
    out = subprocess.run([str(playwright_driver()[0]), "-e", script, str(path)], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def test_nine_valid_tasks_on_six_sites_with_a_batch_per_site():
    suite = load_suite(PUBLIC_WEB)
    assert len(suite.tasks) == 9 and len(suite.spec.sites) == 6
    tasks = {t.name: t for t in suite.tasks}
    assert {"github-merged-pr", "github-latest-release"} <= set(tasks)
    placebo = tasks["github-latest-release"].meta
    assert placebo.placebo and placebo.tool_batch is None
    assert any(t.meta.grading == "page" and t.meta.page and "cart" in t.meta.page.path for t in suite.tasks)
    for site, spec in suite.spec.sites.items():
        tools = evaluate_batch(PUBLIC_WEB / spec.tool_batch)
        assert tools, site
        for tool in tools:  # Kernel's custom-tool form, every pattern on the site's own origin
            assert tool["kind"] == "page" and tool["execute"] == "function" and tool["name"] and tool["description"]
            assert tool["inputSchema"]["type"] == "object"
            assert tool["patterns"] and all(p.startswith(spec.base_url + "/") for p in tool["patterns"]), site
    formats = [t for t in suite.tasks if t.meta.grading == "format"]
    assert len(formats) == 1 and "Format-only" in (formats[0].path / "task.toml").read_text()  # and it says why


def test_collect_only_lists_135_items_in_balanced_pairs(pytester):
    result = pytester.runpytest_subprocess("--suite", str(PUBLIC_WEB), "--collect-only", "-q", "--attempts", "5",
                                           f"--results-dir={pytester.path / 'r'}", "--experiment-id", "plan")
    ids = [line.split("[", 1)[1].rstrip("]") for line in result.stdout.lines if "::test_trial[" in line]
    assert len(ids) == 135
    firsts = Counter()
    for i in range(0, len(ids) - 1):
        a, b = ids[i], ids[i + 1]
        if a.rsplit("-", 1)[0] == b.rsplit("-", 1)[0] and {a.rsplit("-", 1)[1], b.rsplit("-", 1)[1]} == {"control", "treatment"}:
            firsts[(a.rsplit("-a", 1)[0], a.rsplit("-", 1)[1])] += 1  # pairs run back to back
    for task in {i.rsplit("-a", 1)[0] for i in ids}:
        control_first, treatment_first = firsts[(task, "control")], firsts[(task, "treatment")]
        assert control_first + treatment_first == 5 and abs(control_first - treatment_first) == 1, task


def test_kernel_without_a_key_is_one_error_before_any_trial(pytester, monkeypatch):
    monkeypatch.delenv("KERNEL_API_KEY", raising=False)
    result = pytester.runpytest_subprocess("--suite", str(PUBLIC_WEB), "--browser", "kernel", "--runner", "nop",
                                           f"--results-dir={pytester.path / 'r'}")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--browser kernel: KERNEL_API_KEY is not set*"])
    assert "test_trial" not in result.stdout.str()
