"""The index of a run's trial records: `trials/index.jsonl`, one line per record written, beside
the per-trial files, so a report reads one file instead of one per trial.

The per-trial files stay the truth; the index is a cache that can never disagree with them. Each
line holds the record's report fields and the stamp (inode, size, mtime in ns) its file had when
the line was written. A reader takes a trial's last line only while its file still has that stamp;
a record with no line, or a changed, moved or copied one, is read from its file, and a missing
file drops the trial whatever the index says. Lines are appended with one `write` on an
O_APPEND descriptor, so xdist workers can share the file; a torn or garbled line is only a
slower read. Whoever renders the report rewrites the index when it found it stale (a resumed or
merged run, or results copied without their timestamps), so the next render is fast again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from .records import (
    BrowserCalls, PlannedTrial, Timings, Tokens, TrialRecord, atomic_write, supersede_record, trial_record_path,
)

INDEX = "index.jsonl"
Stamp = tuple[int, int, int]  # inode, size, mtime_ns


class ReportedTrial(PlannedTrial):
    """The fields of a TrialRecord the report reads (the instruction, raw answer and page value
    are left on disk), so a report over 100,000 trials stays small in memory."""

    outcome: str
    stop_reason: str | None = None
    detail: str = ""
    answer: Any = None
    flags: list[str] = Field(default_factory=list)
    timings: Timings = Field(default_factory=Timings)
    tokens: Tokens = Field(default_factory=Tokens)
    tokens_cli: Tokens | None = None
    calls: BrowserCalls = Field(default_factory=BrowserCalls)


class IndexLine(BaseModel):
    stamp: Stamp
    record: ReportedTrial


_LINES = TypeAdapter(list[IndexLine])
_RECORDS = TypeAdapter(list[ReportedTrial])


def stamp_of(stat: os.stat_result) -> Stamp:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def write_trial_record(experiment_dir: Path, record: TrialRecord) -> Path:
    """A record is never overwritten: one already there (a trial run again after a worker crash or
    by --resume-errored) moves to trials/superseded/ first. Then its index line."""
    path = trial_record_path(experiment_dir, record.trial_id)
    if path.exists():
        supersede_record(experiment_dir, record.trial_id)
    atomic_write(path, record.model_dump_json(indent=2))
    append_to_index(path, record)
    return path


def append_to_index(record_path: Path, record: TrialRecord) -> None:
    """Called right after a record file is written: one line with the file's stamp."""
    line = IndexLine(stamp=stamp_of(record_path.stat()), record=ReportedTrial.model_validate(record, from_attributes=True))
    data = line.model_dump_json().encode() + b"\n"
    fd = os.open(record_path.parent / INDEX, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)  # one write on O_APPEND: never interleaved with another worker's line
    finally:
        os.close(fd)


@dataclass
class RecordScan:
    records: list[ReportedTrial]
    problems: list[str]  # record files that could not be read
    mtimes: dict[str, float]  # trial id -> its record file's mtime (for the pages' staleness check)
    from_files: int = 0  # records read from their file, not the index
    dead_lines: int = 0  # index lines no record file matches any more
    stamps: dict[str, Stamp] = field(default_factory=dict)


def scan_records(experiment_dir: Path, repair: bool = False) -> RecordScan:
    """Every readable record (report fields), from the index where it is current and from the
    files otherwise. With `repair`, an index that was stale is rewritten from what was read."""
    trials_dir = experiment_dir / "trials"
    stamps: dict[str, Stamp] = {}
    mtimes: dict[str, float] = {}
    try:
        entries = os.scandir(trials_dir)
    except FileNotFoundError:
        return RecordScan([], [], {})
    with entries:
        for e in entries:
            if e.name.endswith(".json") and not e.name.startswith(".") and e.is_file():
                s = e.stat()
                trial_id = e.name[:-5]
                stamps[trial_id] = stamp_of(s)
                mtimes[trial_id] = s.st_mtime
    indexed, lines = _read_index(trials_dir / INDEX)
    current = {tid: line.record for tid, line in indexed.items() if stamps.get(tid) == line.stamp}
    unindexed = sorted(stamps.keys() - current.keys())
    read, problems = _read_files(trials_dir, unindexed)
    records = sorted([*current.values(), *read], key=lambda r: r.trial_id)
    scan = RecordScan(records, problems, mtimes, from_files=len(unindexed), dead_lines=lines - len(current),
                      stamps=stamps)
    if repair and (scan.from_files or scan.dead_lines):
        _rewrite(trials_dir, records, stamps)
    return scan


def rebuild_index(experiment_dir: Path) -> None:
    """After records were moved or copied in (a resume, a merge): the index from the files."""
    scan_records(experiment_dir, repair=True)


def _read_index(path: Path) -> tuple[dict[str, IndexLine], int]:
    """Trial id -> its last well-formed line, and how many lines there were."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}, 0
    raw = [line for line in data.split(b"\n") if line.strip()]
    try:
        lines = _LINES.validate_json(b"[" + b",".join(raw) + b"]")
    except (ValidationError, ValueError):  # a torn or garbled line: keep the others
        lines = []
        for line in raw:
            try:
                lines.append(IndexLine.model_validate_json(line))
            except (ValidationError, ValueError):
                continue
    return {line.record.trial_id: line for line in lines}, len(raw)


def _read_files(trials_dir: Path, trial_ids: list[str]) -> tuple[list[ReportedTrial], list[str]]:
    """Validated as one JSON array in one call (several times faster than one call per file);
    if that fails (a broken file), each file alone, to say which."""
    joined, readable, problems = bytearray(b"["), [], []
    for trial_id in trial_ids:
        try:
            with open(trials_dir / f"{trial_id}.json", "rb") as f:
                blob = f.read()
        except OSError as exc:
            problems.append(f"{trials_dir / trial_id}.json: unreadable trial record ({type(exc).__name__})")
            continue
        if readable:
            joined += b","
        joined += blob
        readable.append(trial_id)
    joined += b"]"
    try:
        batch = _RECORDS.validate_json(joined)
        if len(batch) == len(readable) and all(r.trial_id == t for r, t in zip(batch, readable)):
            return batch, problems
    except (ValidationError, ValueError):
        pass
    records = []
    for trial_id in readable:
        path = trials_dir / f"{trial_id}.json"
        try:
            record = ReportedTrial.model_validate_json(path.read_bytes())
        except (ValidationError, ValueError, OSError) as exc:
            problems.append(f"{path}: unreadable trial record ({type(exc).__name__})")
            continue
        if record.trial_id != trial_id:
            problems.append(f"{path}: trial_id is {record.trial_id!r}, not the file's name; left out")
            continue
        records.append(record)
    return records, problems


def _rewrite(trials_dir: Path, records: list[ReportedTrial], stamps: dict[str, Stamp]) -> None:
    atomic_write(trials_dir / INDEX, "".join(
        f'{{"stamp":{json.dumps(stamps[r.trial_id])},"record":{r.model_dump_json()}}}\n' for r in records))
