"""pytest-html integration: each trial's columns and extras. Registered only when pytest-html is
active (`--html`), so nothing here runs otherwise.

The figures travel as `report.user_properties` (basic types, so they cross xdist to the
controller); the extras are read from the trial's files when its reports are made.
"""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path

import pytest

from ..results.records import SCREENSHOT_TYPES, TrialRecord, final_screenshot, trial_dir

PROPERTY = "webbench"
COLUMNS = ("Task", "Attempt", "Arm", "Calls", "Tokens", "Agent s", "Stop reason")
MAX_TEXT = 200_000


def trial_summary(record: TrialRecord) -> dict:
    tokens = None if record.tokens.input is None else (record.tokens.input or 0) + (record.tokens.output or 0)
    return {"task": record.task, "attempt": record.attempt, "arm": record.arm, "calls": record.calls.forwarded,
            "rejected": record.calls.rejected, "tokens": tokens, "agent_sec": record.timings.agent_sec,
            "stop_reason": record.stop_reason or record.outcome, "trial_dir": record.harbor_trial_dir}


def _text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    text = data[:MAX_TEXT].decode("utf-8", errors="replace")
    return text + (f"\n... ({len(data) - MAX_TEXT} more bytes in {path})" if len(data) > MAX_TEXT else "")


def call_extras(record: TrialRecord, experiment_dir: Path) -> list[dict]:
    from pytest_html import extras

    from ..viewer.pages import PAGES, trial_page_name

    # the trial's page is written with the run's report: the same one report.html links
    page = (experiment_dir / PAGES / trial_page_name(record.trial_id)).resolve()
    out = [
        extras.url(page.as_uri(), name="trial page: timeline and trace"),
        extras.json({"answer": record.answer, "raw": record.answer_raw}, name="answer"),
        extras.json({"outcome": record.outcome, "stop_reason": record.stop_reason, "detail": record.detail,
                     "expected": record.expected, "page_value": record.page_value, "flags": record.flags}, name="grade"),
    ]
    if (folder := trial_dir(experiment_dir, record)) is not None:
        if (log := _text(folder / "proxy-log.jsonl")) is not None:
            out.append(extras.text(log, name="proxy log"))
        for name in ("trajectory.json", "transcript.jsonl"):
            if (transcript := _text(folder / "agent" / name)) is not None:
                out.append(extras.text(transcript, name=f"agent transcript ({name})"))
    return out


def screenshot_extra(folder: Path | None) -> list[dict]:
    from pytest_html import extras

    if folder is None or (shot := final_screenshot(folder)) is None:
        return []
    return [extras.image(base64.b64encode(shot.read_bytes()).decode(), name="final screenshot",
                         mime_type=SCREENSHOT_TYPES[shot.name], extension=shot.suffix.lstrip("."))]


class HtmlColumns:
    """The hooks pytest-html calls; a plugin object so they exist only when it is loaded."""

    @staticmethod
    def pytest_html_results_table_header(cells: list[str]) -> None:
        cells[2:2] = [f"<th>{c}</th>" for c in COLUMNS]

    @staticmethod
    def pytest_html_results_table_row(report: pytest.TestReport, cells: list[str]) -> None:
        props = dict(report.user_properties).get(PROPERTY) or {}
        values = [props.get("task"), props.get("attempt"), props.get("arm"),
                  None if not props else f"{props['calls']}" + (f" ({props['rejected']} rejected)" if props.get("rejected") else ""),
                  props.get("tokens"), None if props.get("agent_sec") is None else f"{props['agent_sec']:.1f}",
                  props.get("stop_reason")]
        cells[2:2] = [f"<td>{escape('' if v is None else str(v))}</td>" for v in values]


SCREENSHOT_SHOWN = pytest.StashKey[bool]()


def attach(item: pytest.Item, report: pytest.TestReport, record: TrialRecord | None, html_active: bool,
           experiment_dir: Path) -> None:
    """From the makereport wrapper: the columns on every phase's report, extras where they belong."""
    if record is not None and not any(k == PROPERTY for k, _ in report.user_properties):
        report.user_properties.append((PROPERTY, trial_summary(record)))
    if not html_active or record is None:
        return
    folder = trial_dir(experiment_dir, record) or experiment_dir / "jobs" / record.arm / record.trial_id
    if report.when == "call" or (report.when == "setup" and report.failed):
        # the screenshot is taken when the agent stops; teardown takes it if the agent never ran
        shot = screenshot_extra(folder)
        item.stash[SCREENSHOT_SHOWN] = bool(shot)
        report.extras = [*getattr(report, "extras", []), *call_extras(record, experiment_dir), *shot]
    elif report.when == "teardown" and not item.stash.get(SCREENSHOT_SHOWN, False):
        report.extras = [*getattr(report, "extras", []), *screenshot_extra(folder)]


