"""Two notes a run leaves beside its records: cloud browsers it could not delete
(browsers-not-deleted/), and whether the suite changed while it ran (suite-check.json)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from .records import atomic_write


class UndeletedBrowser(BaseModel):
    """A cloud browser of the run (or a trial's e-mail account) that could not be deleted: it may still
    be running, and billed."""

    name: str
    error: str
    at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())


UNDELETED_DIR = "browsers-not-deleted"


def record_undeleted_browser(experiment_dir: Path, name: str, error: str) -> None:
    atomic_write(experiment_dir / UNDELETED_DIR / f"{name}.json", UndeletedBrowser(name=name, error=error[:2000]).model_dump_json())


def clear_undeleted_browser(experiment_dir: Path, name: str) -> None:
    (experiment_dir / UNDELETED_DIR / f"{name}.json").unlink(missing_ok=True)


def read_undeleted_browsers(experiment_dir: Path) -> dict[str, UndeletedBrowser]:
    out = {}
    for path in sorted((experiment_dir / UNDELETED_DIR).glob("*.json")):
        try:
            browser = UndeletedBrowser.model_validate_json(path.read_bytes())
        except (ValidationError, ValueError, OSError):
            browser = UndeletedBrowser(name=path.stem, error=f"{path}: unreadable record of an undeleted browser")
        out[browser.name] = browser
    return out


class SuiteCheck(BaseModel):
    """The suite's hashes as the run planned it and as they were when it ended (suite-check.json):
    an agent that could change the suite would change what every later trial measured."""

    before: dict[str, str]
    after: dict[str, str]

    @property
    def changed(self) -> list[str]:
        return sorted(k for k in set(self.before) | set(self.after) if self.before.get(k) != self.after.get(k))


SUITE_CHECK = "suite-check.json"


def write_suite_check(experiment_dir: Path, check: SuiteCheck) -> None:
    atomic_write(experiment_dir / SUITE_CHECK, check.model_dump_json(indent=1))


def read_suite_check(experiment_dir: Path) -> str:
    """What the run's end says of the suite: `unchanged`, `changed: <keys>`, or why it is unknown."""
    path = experiment_dir / SUITE_CHECK
    try:
        check = SuiteCheck.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return "not checked (the run has not ended, or ended before its report)"
    except (ValidationError, ValueError, OSError) as exc:
        return f"unknown: {path} is unreadable ({type(exc).__name__})"
    return f"changed: {', '.join(check.changed)}" if check.changed else "unchanged"
