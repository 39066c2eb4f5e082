import os
import shutil

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# The pytester fixture restores sys.modules after each test, dropping what the test imported first.
# A test that serves an ASGI app inside it (the scripted model) imports uvicorn's httptools
# protocol, which is then dropped and imported afresh by the next server: the new module's
# `except httptools.HttpParserUpgrade` no longer names the class the C parser raises, and a
# WebSocket upgrade (Codex's first attempt) kills the connection instead of getting its 426.
# Imported here, before any test, they are never dropped.
import uvicorn.protocols.http.httptools_impl  # noqa: E402,F401
import uvicorn.protocols.websockets.websockets_sansio_impl  # noqa: E402,F401

# What every pytest started by a test loads without being asked: each installed plugin. Braintrust's
# imports the whole braintrust SDK (0.5-1 CPU s a process) and hypothesis's imports hypothesis
# as its run ends (about 0.9 s); the runs tests start use neither (webbench publishes through the
# braintrust SDK, not that plugin). pytester clears PYTEST_ADDOPTS, so it is set again after it.
NOT_LOADED = "-p no:braintrust -p no:hypothesispytest"


@pytest.fixture(autouse=True)
def _child_pytest_runs_load_no_other_plugin(monkeypatch):
    """For the runs a test starts itself (deploy/run-shard, `python -m pytest`)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", NOT_LOADED)


@pytest.fixture
def pytester(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_ADDOPTS", NOT_LOADED)
    return pytester


HAVE_CHROMIUM = shutil.which("chromium") is not None or os.path.exists("/usr/bin/chromium")


def _cli_problems() -> dict[str, str]:
    """Each runner whose pinned CLI is not installed, and why."""
    from pytest_webbench.runners import load_presets
    from pytest_webbench.runners.install import cli_problem

    return {name: p for name, spec in load_presets().items() if spec.cli and (p := cli_problem(spec.cli))}


def _clis_of(item) -> set[str] | None:
    """The runners an agent_cli test drives: its `runner` parameter, or its `cli(...)` marker."""
    runner = getattr(getattr(item, "callspec", None), "params", {}).get("runner")
    if runner:
        return {runner}
    marks = [m.args[0] for m in item.iter_markers("cli")]
    return set(marks) or None


def pytest_collection_modifyitems(config, items):
    # A developer without Chromium or the agent CLIs gets skips that say why; CI sets
    # WEBBENCH_REQUIRE_ALL=1 so that nothing it should run is ever skipped.
    if os.environ.get("WEBBENCH_REQUIRE_ALL") == "1":
        return
    reasons = {}
    if not HAVE_CHROMIUM:
        reasons["chromium"] = "Chromium is not installed (apt-get install chromium)"
    if any("seal" in item.keywords for item in items):
        from pytest_webbench.environments.seal import can_seal

        if not can_seal():
            reasons["seal"] = "this machine cannot make network, mount and PID namespaces (root is needed)"
    cli_problems = _cli_problems() if any("agent_cli" in item.keywords for item in items) else {}
    for item in items:
        for marker, reason in reasons.items():
            if marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))
        if "agent_cli" in item.keywords and cli_problems:
            # only what needs a missing CLI is skipped: a test naming none needs them all
            needed = _clis_of(item) or set(cli_problems)
            if missing := [cli_problems[c] for c in sorted(needed) if c in cli_problems]:
                item.add_marker(pytest.mark.skip(reason=missing[0]))
