"""The test suite's own skips (conftest.py): a missing agent CLI skips only the tests that drive it."""

from __future__ import annotations

from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")


def test_a_missing_cli_skips_only_the_tests_that_need_it(pytester, monkeypatch):
    monkeypatch.delenv("WEBBENCH_REQUIRE_ALL", raising=False)
    pytester.makeconftest(f"""
import importlib.util
spec = importlib.util.spec_from_file_location("webbench_conftest", {str(CONFTEST)!r})
real = importlib.util.module_from_spec(spec)
spec.loader.exec_module(real)
real._cli_problems = lambda: {{"claude": "Claude Code is not installed"}}
real.HAVE_CHROMIUM = True

def pytest_configure(config):
    config.addinivalue_line("markers", "agent_cli: x")
    config.addinivalue_line("markers", "cli(name): x")

pytest_collection_modifyitems = real.pytest_collection_modifyitems
""")
    pytester.makepyfile(test_clis="""
import pytest
cli = pytest.mark.agent_cli

@cli
@pytest.mark.parametrize("runner", ["codex", "claude", "pi"])
def test_each(runner):
    pass

@cli
@pytest.mark.cli("codex")
def test_codex_only():
    pass

@cli
@pytest.mark.cli("claude")
def test_claude_only():
    pass

@cli
def test_names_none():
    pass

def test_not_a_cli_test():
    pass
""")
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=4, skipped=3)
    skipped = {line.split("::")[1].split(" ")[0] for line in result.stdout.lines if " SKIPPED" in line and "::" in line}
    assert skipped == {"test_each[claude]", "test_claude_only", "test_names_none"}
    result.stdout.fnmatch_lines(["*test_claude_only SKIPPED (Claude Code is not installed)*"])
