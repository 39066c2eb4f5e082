"""The plugin end to end, in subprocess pytest runs (pytester)."""

import json
import shutil
from pathlib import Path

import pytest


LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"
TASKS = sorted(p.name for p in (LOCAL_WEB / "tasks").iterdir() if p.is_dir())


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", *args)


def collected_ids(result):
    return [line.split("[", 1)[1].rstrip("]") for line in result.outlines if "::test_trial[" in line]


def test_without_suite_the_plugin_is_inert(pytester):
    pytester.makepyfile("def test_ok():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "results").exists()


HEAVY = ("harbor", "litellm", "pydantic", "scipy", "mcp", "httpx", "uvicorn", "playwright", "kernel",
         "pytest_webbench.trial.fixtures", "pytest_webbench.trial.harbor_run", "pytest_webbench.report")


def test_without_suite_nothing_heavy_is_imported(pytester, monkeypatch):
    """What a project pays for having the plugin installed (the time is benchmarks/import_cost.py)."""
    pytester.makeconftest(
        "import sys\n"
        "def pytest_sessionfinish(session):\n"
        f"    loaded = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "    ours = session.config.pluginmanager.get_plugin('pytest_webbench.plugin') is not None\n"
        "    open('loaded.txt', 'w').write(' '.join(['plugin' if ours else 'no-plugin', *loaded]))\n")
    pytester.makepyfile("def test_ok():\n    assert True\n")
    # other installed plugins (braintrust, hypothesis) import some of these themselves: load only ours
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "pytest_webbench.plugin")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "loaded.txt").read_text().split() == ["plugin"]


def test_items_one_per_task_attempt_arm_with_readable_ids(pytester):
    result = run(pytester, "--suite", str(LOCAL_WEB), "--attempts", "3", "--collect-only", "-q")
    ids = collected_ids(result)
    assert len(ids) == len(TASKS) * 3 * 3
    assert "codehub-merged-pr-a1-control" in ids and "shop-cart-a3-playwright" in ids


@pytest.mark.parametrize("expr, expected", [
    ("codehub-merged-pr", 3 * 2),
    ("treatment", len(TASKS) * 2),
    ("a1 and control", len(TASKS)),
])
def test_k_selection(pytester, expr, expected):
    result = run(pytester, "--suite", str(LOCAL_WEB), "--attempts", "2", "--collect-only", "-q", "-k", expr)
    assert len(collected_ids(result)) == expected


def test_collection_puts_pairs_back_to_back(pytester):
    result = run(pytester, "--suite", str(LOCAL_WEB), "--attempts", "4", "--arms", "control,treatment",
                 "--experiment-id", "order-check", "--collect-only", "-q")
    ids = collected_ids(result)
    for first, second in zip(ids[::2], ids[1::2]):
        assert first.rsplit("-", 1)[0] == second.rsplit("-", 1)[0]
    controls_first = sum(1 for first in ids[::2] if first.endswith("control"))
    assert controls_first == len(TASKS) * 2  # 4 attempts: exactly half control-first, per task
    # a plan, nothing ran: the manifest is written (in the collected order), no report
    experiment = pytester.path / "results" / "order-check"
    manifest = json.loads((experiment / "manifest.json").read_text())
    assert [t["trial_id"] for t in manifest["trials"]] == ids
    assert not (experiment / "report.json").exists()


def test_broken_pair_is_reported_in_the_manifest(pytester):
    run(pytester, "--suite", str(LOCAL_WEB), "--experiment-id", "broken", "--collect-only", "-q",
        "-k", "codehub-merged-pr and not treatment")
    manifest = json.loads((pytester.path / "results" / "broken" / "manifest.json").read_text())
    assert manifest["broken_pairs"] == ["codehub-merged-pr-a1"]
    assert [t["trial_id"] for t in manifest["trials"]] == ["codehub-merged-pr-a1-control", "codehub-merged-pr-a1-playwright"]


def test_reusing_an_experiment_id_is_refused(pytester):
    first = run(pytester, "--suite", str(LOCAL_WEB), "--experiment-id", "same", "--collect-only", "-q")
    assert first.ret == 0
    (pytester.path / "results" / "same" / "marker").write_text("kept")
    second = run(pytester, "--suite", str(LOCAL_WEB), "--experiment-id", "same", "--collect-only", "-q")
    assert second.ret == pytest.ExitCode.USAGE_ERROR
    second.stderr.fnmatch_lines(["*experiment 'same' already exists*"])
    assert (pytester.path / "results" / "same" / "marker").read_text() == "kept"


def _claim_at_the_barrier(results: str, barrier) -> str:
    from pytest_webbench.results.claims import ExperimentExists, claim_experiment_dir

    barrier.wait()  # every process calls the claim at the same moment
    try:
        claim_experiment_dir(Path(results), "raced")
        return "won"
    except ExperimentExists:
        return "refused"


def test_the_claim_itself_raced_by_many_processes_has_one_winner(tmp_path):
    """The claim called at one barrier by 16 processes at once: exactly one wins."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(16)
        with context.Pool(16) as pool:
            outcomes = pool.starmap(_claim_at_the_barrier, [(str(tmp_path / "results"), barrier)] * 16)
    assert sorted(outcomes) == ["refused"] * 15 + ["won"]


def test_runs_started_together_with_one_id_have_exactly_one_winner(pytester):
    """Four pytest processes plan the same experiment at once: one claims it, the others are told
    it exists, and the winner's plan is the one on disk."""
    import subprocess
    import sys

    results = pytester.path / "results"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--results-dir={results}", "--suite",
               str(LOCAL_WEB), "--experiment-id", "race", "--collect-only", "-q"]
    runs = [subprocess.Popen(command, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(4)]
    outcomes = [(run.wait(timeout=120), run.stderr.read()) for run in runs]
    assert sorted(code for code, _ in outcomes) == [0, 4, 4, 4]
    assert all("experiment 'race' already exists" in err for code, err in outcomes if code == 4)
    assert json.loads((results / "race" / "manifest.json").read_text())["experiment_id"] == "race"


@pytest.mark.parametrize("edit, file, field", [
    (lambda t: t.replace('grading = "pinned"', 'grading = "vibes"'), "task.toml", "metadata.webbench.grading"),
    (lambda t: t.replace("turn_cap = 40", "turn_cap = -1"), "task.toml", "metadata.webbench.turn_cap"),
    (lambda t: t.replace("[metadata.webbench]", "[metadata.webbench]\nsurprise = 1"), "task.toml", "metadata.webbench.surprise"),
    (lambda t: t + "\n[[[", "task.toml", "(file)"),
    (lambda t: t.replace('site = "codehub"', 'site = "nowhere"'), "task.toml", "metadata.webbench.site"),
    (lambda t: t.replace('timeout_sec = 600', 'timeout_sec = "soon"'), "task.toml", "agent.timeout_sec"),
])
def test_broken_task_file_fails_collection_naming_file_and_field(pytester, edit, file, field):
    suite = pytester.path / "suite"
    shutil.copytree(LOCAL_WEB, suite)
    path = suite / "tasks" / "codehub-merged-pr" / file
    path.write_text(edit(path.read_text()))
    result = run(pytester, "--suite", str(suite), "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{path}: {field}:" in result.stderr.str()


def test_missing_instruction_and_bad_suite_file(pytester):
    suite = pytester.path / "suite"
    shutil.copytree(LOCAL_WEB, suite)
    (suite / "tasks" / "shop-price" / "instruction.md").unlink()
    result = run(pytester, "--suite", str(suite), "--collect-only", "-q")
    assert "instruction.md: (file): missing" in result.stderr.str()
    (suite / "tasks" / "shop-price" / "instruction.md").write_text("x")
    (suite / "suite.toml").write_text((suite / "suite.toml").read_text().replace('"playwright"]', '"placebo"]'))
    result = run(pytester, "--suite", str(suite), "--collect-only", "-q")
    assert "suite.toml: arms.2:" in result.stderr.str()


@pytest.mark.parametrize("args, message", [
    (["--runner", "gpt-9"], "unknown runner"),
    (["--browser", "kernel"], "KERNEL_API_KEY is not set"),
    (["-n", "2", "--dist", "loadfile"], "use -n N with the default --dist load"),
    (["--arms", "control,sideways"], "unknown arm"),
    # options that would silently do something else are refused
    (["--arms", "control,playwright"], "treatment is not selected, so no pair could be tested"),
    (["--attempts", "0"], "--attempts 0: a run needs at least 1 attempt"),
    (["tests/test_other.py"], "test paths are not run with --suite or --resume (got tests/test_other.py)"),
])
def test_bad_options_fail_before_any_trial(pytester, monkeypatch, args, message):
    monkeypatch.delenv("KERNEL_API_KEY", raising=False)
    pytester.makepyfile(**{"tests/test_other": "def test_x(): pass"})
    result = run(pytester, "--suite", str(LOCAL_WEB), *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
    assert not list((pytester.path / "results").glob("*/trials/*.json"))


def test_suite_hash_covers_regular_files_in_path_order_and_skips_the_rest(tmp_path):
    """The manifest's suite sha256: every regular file, by relative path in pathlib's order (a
    name before the same name with a suffix: `a/x` before `a-b/x`), and nothing that cannot be
    read as a file (a broken link here; a FIFO, which would block, is skipped the same way)."""
    import hashlib
    import os

    from pytest_webbench.design.suite import load_suite

    suite = tmp_path / "suite"
    shutil.copytree(LOCAL_WEB, suite, ignore=shutil.ignore_patterns("__pycache__"))
    for relative in ("notes/a/x", "notes/a-b/x", "notes/a.b/y"):
        (suite / relative).parent.mkdir(parents=True)
        (suite / relative).write_text(relative)
    os.symlink(suite / "nowhere", suite / "broken-link")
    files = sorted(p for p in suite.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    expected = hashlib.sha256()
    for p in files:
        expected.update(str(p.relative_to(suite)).encode() + b"\0" + p.read_bytes() + b"\0")
    assert load_suite(suite).content_hashes["suite"] == expected.hexdigest()


WEB_SERVERS = ("aiohttp", "httpx", "uvicorn", "starlette", "mcp", "playwright")


@pytest.mark.parametrize("runner", [["--runner", "reference"], ["--runner", "codex", "--model", "openai/gpt-5"]])
def test_planning_a_run_loads_no_web_server(pytester, monkeypatch, runner):
    """--collect-only checks the plan (suite, runner, model and price): it serves nothing, so it
    loads none of the servers and clients the trials use (aiohttp alone took ~0.15 s to import)."""
    pytester.makeconftest(
        "import sys\n"
        "def pytest_sessionfinish(session):\n"
        f"    open('loaded.txt', 'w').write(' '.join(m for m in {WEB_SERVERS!r} if m in sys.modules))\n")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "pytest_webbench.plugin", "--suite", str(LOCAL_WEB),
                                           *runner, "--results-dir", str(pytester.path / "results"), "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    assert (pytester.path / "loaded.txt").read_text().split() == []


def test_the_trial_machinery_loads_the_model_client_only_for_a_request():
    """aiohttp (~165 ms to import) is the gateway's client: a run whose agents call no model (the
    reference, nop and hostile runners) starts its services without it."""
    import subprocess
    import sys

    code = ("import sys, pytest_webbench.trial.services, pytest_webbench.trial.fixtures, pytest_webbench.gateway.routes\n"
            "print('aiohttp' in sys.modules, 'yarl' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False"]
