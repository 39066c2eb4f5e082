"""--publish braintrust through the real braintrust SDK, against a stand-in of its HTTP API."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_webbench.report.publish import PublishError, publish_braintrust
from pytest_webbench.service_loop import ServiceLoop

sys.path.insert(0, str(Path(__file__).parent / "support"))
from braintrust_standin import BraintrustStandin  # noqa: E402
from test_report import write_synthetic_run  # noqa: E402

SENTINEL = "bt-sentinel-5d1e-never-in-a-payload"


@pytest.fixture
def standin(monkeypatch):
    service = BraintrustStandin(SENTINEL)
    loop = ServiceLoop()
    url = loop.serve(service.app, "braintrust stand-in")
    for name, value in {"BRAINTRUST_API_KEY": SENTINEL, "BRAINTRUST_APP_URL": url, "BRAINTRUST_API_URL": url}.items():
        monkeypatch.setenv(name, value)
    yield service
    loop.close()


def test_one_experiment_per_arm_with_every_planned_trial(tmp_path, standin):
    from pytest_webbench.review.records import Finding, TrialReview, write_trial_review

    run_dir = write_synthetic_run(tmp_path)
    # a review of one trial (--review) rides in its row's metadata, never in its scores
    finding = Finding(summary="it read the wrong row", failure_mode="wrong_answer", arm_rules_kept=True, confidence="medium")
    write_trial_review(run_dir, TrialReview(trial_id="alpha-a2-control", task="alpha", arm="control", attempt=2, why="failed",
                                            finding=finding, model="m"))
    published = publish_braintrust(run_dir, project="webbench-test")
    assert [(p.arm, p.name, p.rows) for p in published] == [
        ("control", "syn-control", 16), ("treatment", "syn-treatment", 16), ("playwright", "syn-playwright", 16)]
    rows = standin.rows_by_experiment()
    assert {name: len(r) for name, r in rows.items()} == {"syn-control": 16, "syn-treatment": 16, "syn-playwright": 16}
    by_id = {row["id"]: row for row in standin.rows}
    assert by_id["alpha-a1-control"]["scores"] == {"passed": 1.0}
    assert by_id["alpha-a1-control"]["metrics"]["prompt_tokens"] == 1000
    assert by_id["alpha-a1-control"]["metadata"]["grading"] == "pinned"
    assert by_id["alpha-a1-control"]["metadata"]["flags"] == ["shell curl reached the site"]
    assert by_id["alpha-a2-control"]["metadata"]["review"]["failure_mode"] == "wrong_answer"
    assert "review" not in by_id["alpha-a1-control"]["metadata"] and set(by_id["alpha-a2-control"]["scores"]) == {"passed"}
    # the missing trial is published as a zero, so Braintrust's averages keep the report's denominators
    assert by_id["gamma-a3-treatment"]["scores"] == {"passed": 0.0} and by_id["gamma-a3-treatment"]["metadata"]["outcome"] == "missing"
    experiment = next(e for e in standin.experiments.values() if e["name"] == "syn-treatment")
    assert experiment["metadata"]["grading_modes"] == {"alpha": "pinned", "beta": "page", "gamma": "format", "placebo": "pinned"}
    assert experiment["metadata"]["arm"] == "treatment" and "git_revision" in experiment["metadata"]
    assert not any(SENTINEL.encode() in body for body in standin.bodies)  # the key only ever rode in the header


def test_missing_key_is_refused_before_anything_is_sent(tmp_path, standin, monkeypatch):
    monkeypatch.delenv("BRAINTRUST_API_KEY")
    with pytest.raises(PublishError, match="BRAINTRUST_API_KEY is not set"):
        publish_braintrust(write_synthetic_run(tmp_path))
    assert standin.bodies == []


def test_a_run_with_broken_records_is_not_published(tmp_path, standin):
    run_dir = write_synthetic_run(tmp_path)
    (run_dir / "trials" / "beta-a1-control.json").write_text("{")
    with pytest.raises(PublishError, match="beta-a1-control.json"):
        publish_braintrust(run_dir)
    assert standin.rows == []


def test_a_rejected_key_is_one_clear_error(tmp_path, standin, monkeypatch):
    monkeypatch.setenv("BRAINTRUST_API_KEY", "bt-wrong-key")
    with pytest.raises(PublishError, match="Braintrust refused") as info:
        publish_braintrust(write_synthetic_run(tmp_path))
    assert "bt-wrong-key" not in str(info.value) and standin.rows == []


def test_the_report_command_publishes(tmp_path, standin, capsys):
    from pytest_webbench.report.__main__ import main

    run_dir = write_synthetic_run(tmp_path)
    assert main([str(run_dir), "--publish", "braintrust", "--project", "cli"]) == 0
    assert "published syn-control (16 rows)" in capsys.readouterr().out
    assert len(standin.rows) == 48 and list(standin.projects) == ["cli"]


def test_publish_option_without_a_key_stops_before_any_trial(pytester, monkeypatch):
    monkeypatch.delenv("BRAINTRUST_API_KEY", raising=False)
    suite = Path(__file__).resolve().parents[1] / "suites" / "local-web"
    result = pytester.runpytest_subprocess("--suite", str(suite), "--publish", "braintrust",
                                           f"--results-dir={pytester.path / 'r'}")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--publish braintrust: BRAINTRUST_API_KEY is not set*"])
