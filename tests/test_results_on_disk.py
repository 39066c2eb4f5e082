"""What a run leaves on disk, and how a trial's error is classified before it gets there."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from pytest_webbench.browsers.base import BackendError
from pytest_webbench.results.harbor_jobs import write_job_results
from pytest_webbench.results.record_index import write_trial_record
from pytest_webbench.results.records import TrialRecord, read_trial_records, trial_dir
from pytest_webbench.grading.verdict import error_before_grading


def test_an_error_is_classified_by_its_type_not_by_words_in_its_message():
    assert error_before_grading(BackendError("could not open the start page"), "setup: ...").stop_reason == "backend_error"
    # a harness bug whose message happens to mention a browser is not a backend error...
    assert error_before_grading(KeyError("browser"), "setup: KeyError: 'browser'").stop_reason == "error_before_grading"
    # ...and a backend failure whose message does not is one
    assert error_before_grading(BackendError("HTTP 503"), "setup: HTTP 503").stop_reason == "backend_error"
    assert error_before_grading(None, "crashed").stop_reason == "error_before_grading"
    assert error_before_grading(BackendError("x"), "y").outcome == "errored"


def _trial_result(trial: str) -> str:
    return json.dumps({"id": "00000000-0000-0000-0000-000000000001", "task_name": "t", "trial_name": trial,
                       "trial_uri": f"file:///{trial}", "task_id": {"path": "/t"}, "task_checksum": "x",
                       "config": {"task": {"path": "/t"}}, "agent_info": {"name": "a", "version": "1"}})


def test_an_unreadable_harbor_result_is_counted_and_named(tmp_path):
    from harbor.models.job.result import JobResult
    from harbor.models.trial.result import TrialResult

    arm = tmp_path / "jobs" / "control"
    for trial, text in [("t-a1-control", _trial_result("t-a1-control")), ("t-a2-control", '{"id": "cut off')]:
        (arm / trial).mkdir(parents=True)
        (arm / trial / "result.json").write_text(text)
    TrialResult.model_validate_json((arm / "t-a1-control" / "result.json").read_text())  # the good one is a real result
    problems = write_job_results(tmp_path, "exp")
    job = JobResult.model_validate_json((arm / "result.json").read_text())
    assert job.n_total_trials == 2 and job.stats.n_errored_trials == 1 and job.stats.n_completed_trials == 1
    assert len(problems) == 1 and problems[0].startswith("jobs/control/t-a2-control/result.json: unreadable")
    assert json.loads((tmp_path / "jobs" / "problems.json").read_text()) == problems


def test_a_record_s_trial_folder_follows_the_experiment_when_it_moves(tmp_path):
    exp = tmp_path / "results" / "exp"
    record = TrialRecord(trial_id="t-a1-control", task="t", attempt=1, arm="control", experiment_id="exp", runner="r",
                         grading="pinned", outcome="passed", harbor_trial_dir="jobs/control/t-a1-control")
    write_trial_record(exp, record)
    (exp / "jobs" / "control" / "t-a1-control").mkdir(parents=True)
    (exp / "jobs" / "control" / "t-a1-control" / "proxy-log.jsonl").write_text("{}\n")
    moved = tmp_path / "copied-off-ci" / "exp"
    shutil.move(exp, moved)
    [read], problems = read_trial_records(moved)
    assert not problems and (trial_dir(moved, read) / "proxy-log.jsonl").read_text() == "{}\n"
    legacy = read.model_copy(update={"harbor_trial_dir": "/somewhere/else", "schema_version": 1})
    assert trial_dir(moved, legacy) == Path("/somewhere/else")  # a schema-1 record's absolute path stands


def test_a_file_is_written_whole_and_what_was_left_at_its_temporary_name_is_replaced_not_followed(tmp_path):
    import os
    import threading

    from pytest_webbench.results.records import atomic_write

    staging = tmp_path / "staging"
    staging.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    # a link (planted, or a crash's leftover) at the very name this thread writes its temporary file
    (staging / f".w{os.getpid()}.{threading.get_ident()}.tmp").symlink_to(victim)
    page = tmp_path / "page.html"
    atomic_write(page, "é" * 300_000, staging)
    assert page.read_text() == "é" * 300_000 and victim.read_text() == "keep me"
    assert not any(staging.iterdir())  # renamed into place; nothing left behind
    deep = tmp_path / "pages" / "deep" / "page.html"  # a folder that is not there yet is made
    atomic_write(deep, b"again")
    assert deep.read_bytes() == b"again" and sorted(p.name for p in deep.parent.iterdir()) == ["page.html"]


def test_a_bare_file_name_is_written_in_the_working_folder(tmp_path, monkeypatch):
    """As `python -m pytest_webbench.viewer EXP TRIAL` writes its page by default: its temporary
    file goes beside it, not in / (found by review)."""
    from pytest_webbench.results import records

    opened = []
    real_open = records.os.open
    monkeypatch.setattr(records.os, "open", lambda path, *a, **k: opened.append(path) or real_open(path, *a, **k))
    monkeypatch.chdir(tmp_path)
    records.atomic_write(Path("page.html"), "hello")
    assert (tmp_path / "page.html").read_text() == "hello"
    assert [os.path.dirname(p) for p in opened] == ["."]
