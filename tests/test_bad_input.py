"""Bad input is a clear refusal that names what is wrong, and writes nothing: experiment IDs that
are paths, limits out of range in a task file, a model the runner does not use."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"


def _run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", *args)


@pytest.mark.parametrize("bad", ["../outside", "/tmp/absolute-id", "a" * 300, "a/b", ".hidden", "x..y", "-n"])
def test_an_experiment_id_that_is_not_a_plain_name_is_refused_and_nothing_is_written(pytester, bad):
    result = _run(pytester, "--suite", str(LOCAL_WEB), "--runner", "nop", f"--experiment-id={bad}", "-k", "shop-price")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert "an experiment ID is 1 to 100 letters" in result.stderr.str()
    assert not (pytester.path / "results").exists() and not (pytester.path / "outside").exists()
    assert not Path("/tmp/absolute-id").exists()
    resumed = _run(pytester, f"--resume={bad}")
    assert resumed.ret == pytest.ExitCode.USAGE_ERROR and "--resume" in resumed.stderr.str()


def test_a_plain_experiment_id_is_accepted(pytester):
    result = _run(pytester, "--suite", str(LOCAL_WEB), "--experiment-id", "run-2026.12_a", "--collect-only", "-k", "shop-price")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()


def _copy_suite(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    shutil.copytree(LOCAL_WEB, suite, ignore=shutil.ignore_patterns("__pycache__"))
    return suite


@pytest.mark.parametrize("section, line, field", [
    ("[agent]", "timeout_sec = -5", "agent.timeout_sec"),
    ("[agent]", "timeout_sec = 0", "agent.timeout_sec"),
    ("[environment]", "cpus = -1", "environment.cpus"),
])
def test_a_limit_out_of_range_in_a_task_file_is_refused_at_collection(pytester, tmp_path, section, line, field):
    suite = _copy_suite(tmp_path)
    task = suite / "tasks" / "shop-price" / "task.toml"
    text = task.read_text()
    key = line.split(" =")[0]
    lines = [entry for entry in text.splitlines() if not entry.startswith(key + " =")]  # the file's own value goes
    at = lines.index(section)
    task.write_text("\n".join(lines[:at + 1] + [line] + lines[at + 1:]) + "\n")
    result = _run(pytester, "--suite", str(suite), "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert str(task) in result.stderr.str() and field in result.stderr.str()


def test_a_missing_reference_solution_is_refused_when_the_reference_runner_needs_it(pytester, tmp_path):
    suite = _copy_suite(tmp_path)
    (suite / "tasks" / "wiki-population" / "solution" / "reference.py").unlink()
    result = _run(pytester, "--suite", str(suite), "--runner", "reference", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "wiki-population/solution/reference.py: missing" in result.stderr.str()
    assert _run(pytester, "--suite", str(suite), "--runner", "nop", "--collect-only").ret == pytest.ExitCode.OK


def test_a_model_the_runner_does_not_use_is_refused(pytester):
    result = _run(pytester, "--suite", str(LOCAL_WEB), "--runner", "reference", "--model", "foo/bar", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "runs no model: drop --model foo/bar" in result.stderr.str()
