"""ClawBench's bundled cases, read from the pinned `clawbench-eval` package: every case of every set
loads and passes the package's own task.schema.json, the placeholder cases are counted apart, and a
broken case is one error naming its file and field."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from pytest_webbench.design import clawbench
from pytest_webbench.design.clawbench import ClawBenchError, load_cases

# counted in the pinned package's files (0.11.0): cases, and those whose url_pattern is the placeholder
EXPECTED = {"v2": (129, 0), "v1": (152, 82), "v1-lite": (20, 8), "environmental-observation": (12, 0), "claw-eval": (19, 0)}


@pytest.mark.parametrize("case_set", clawbench.CASE_SETS)
def test_every_bundled_case_loads_and_the_placeholders_are_counted(case_set):
    cases = load_cases(case_set)
    total, placeholders = EXPECTED[case_set]
    assert len(cases) == total and sum(not c.gradable for c in cases) == placeholders
    for case in cases:
        re.compile(case.eval_schema.url_pattern)
        assert case.instruction and case.time_limit >= 1 and case.folder.name == case.name
        for extra in case.extra_info:
            assert (case.folder / extra.path).is_file(), (case.name, extra.path)  # the files the agent would be given


def test_the_default_set_is_the_one_whose_every_case_can_be_graded():
    assert clawbench.DEFAULT_CASE_SET == "v2" and all(c.gradable for c in load_cases())


@pytest.fixture
def copied_root(tmp_path):
    root = clawbench.installed_root()
    shutil.copy(root / "task.schema.json", tmp_path / "task.schema.json")
    shutil.copytree(root / "v1-lite", tmp_path / "v1-lite")
    return tmp_path


def _first_case(root):
    return sorted((root / "v1-lite").glob("*/task.json"))[0]


@pytest.mark.parametrize("change, field", [
    (lambda d: d["eval_schema"].update(method="FETCH"), "eval_schema.method"),
    (lambda d: d.pop("time_limit"), "(the file)"),  # a required key missing: the schema names the object
    (lambda d: d["eval_schema"].update(url_pattern="taskrabbit\\.(com"), "eval_schema.url_pattern"),
    (lambda d: d.update(time_limit=0), "time_limit"),
    (lambda d: d.update(time_limit=float("inf")), "time_limit"),  # JSON's Infinity: no manifest could hold it
])
def test_a_broken_case_is_one_error_naming_its_file_and_field(copied_root, change, field):
    path = _first_case(copied_root)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ClawBenchError) as caught:
        load_cases("v1-lite", copied_root)
    assert str(path) in str(caught.value) and f": {field}:" in str(caught.value), caught.value


def test_unreadable_json_and_an_unknown_set_are_refused(copied_root):
    path = _first_case(copied_root)
    path.write_text("{not json")
    with pytest.raises(ClawBenchError, match="not readable as JSON"):
        load_cases("v1-lite", copied_root)
    with pytest.raises(ClawBenchError, match="choose one of v2, v1"):
        load_cases("v3", copied_root)


def test_another_installed_version_is_refused(monkeypatch):
    monkeypatch.setattr(clawbench.metadata, "version", lambda name: "0.12.0")
    with pytest.raises(ClawBenchError, match="0.12.0 is installed; this harness reads the cases of 0.11.0"):
        clawbench.installed_root()
