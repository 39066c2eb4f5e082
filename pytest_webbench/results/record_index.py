"""The index of a run's trial records: `trials/index.jsonl`, one line per record written, beside
the per-trial files, so a report reads one file instead of one per trial.

The per-trial files stay the truth; the index is a cache that can never disagree with them. Each
line holds the record's report fields and the stamp (inode, size, mtime and ctime in ns) its file
had when the line was written. A reader takes a trial's last line only while its file still has
that stamp; a record with no line, or a changed, moved or copied one, is read from its file, and
a missing file drops the trial whatever the index says. Lines are appended with one `write` on an
O_APPEND descriptor, so xdist workers can share the file; a torn or garbled line is only a
slower read. A line is appended after the trial's pages are written, and says so, so a current
line also spares the report a look at those pages. The report rewrites the index when it found it
stale (a resumed or merged run, results copied), so the next render is fast again. How lines are
read back, without pydantic and refusing the ones it would have refused: index_lines.py.
"""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

import msgspec
from pydantic import BaseModel, TypeAdapter, ValidationError

from . import file_stamps
from .file_stamps import read_stamped, stamp_of
from .index_lines import IndexedTrial, IndexLine, ReportedTrial, Stamp, as_model, indexed_records, line_json
from .records import TrialRecord, atomic_write, supersede_record, trial_record_path

INDEX = "index.jsonl"
CHILD_ABOVE_BYTES = 2_000_000  # ~3,500 lines
_RECORDS = TypeAdapter(list[ReportedTrial])
_HELD = msgspec.json.Decoder(list[IndexedTrial])
__all__ = ["INDEX", "IndexLine", "RecordScan", "ReportedTrial", "as_model", "rebuild_index", "rewrite_index", "scan_records",
           "stamp_of", "write_trial_record"]


def write_trial_record(experiment_dir: Path, record: TrialRecord,
                       then: Callable[[TrialRecord], bool] | None = None) -> Path:
    """A record is never overwritten: one already there (a trial run again after a worker crash or
    by --resume-errored) moves to trials/superseded/ first. Then `then` (the trial's pages; it
    says whether it wrote them), then the index line, so a current line vouches for the pages."""
    path = trial_record_path(experiment_dir, record.trial_id)
    if path.exists():
        supersede_record(experiment_dir, record.trial_id)
    atomic_write(path, record.model_dump_json(indent=2))
    stamp = stamp_of(path.stat())
    append_to_index(path.parent, stamp, record, pages=bool(then(record)) if then else False)
    return path


def append_to_index(trials_dir: Path, stamp: Stamp, record: BaseModel, pages: bool = False) -> None:
    data = line_json(stamp, record, pages).encode() + b"\n"
    fd = os.open(trials_dir / INDEX, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)  # one write on O_APPEND: never interleaved with another worker's line
    finally:
        os.close(fd)


@dataclass
class RecordScan:
    records: list  # ReportedTrial read from a file, or IndexedTrial from the index (index_lines.py): the same attributes
    problems: list[str]  # record files that could not be read
    mtimes: dict[str, float]  # trial id -> its record file's mtime (for the pages' staleness check)
    from_files: int = 0  # records read from their file, not the index
    dead_lines: int = 0  # index lines no record file matches any more
    stamps: dict[str, Stamp] = field(default_factory=dict)  # of the file each record was read from
    pages_current: set[str] = field(default_factory=set)  # trials whose current line vouches for their pages
    pages_written: int = 0  # pages written while scanning (read_many), and the trials they could not read
    pages_unreadable: set[str] = field(default_factory=set)
    lines: dict[str, tuple[Stamp, bool, bytes]] = field(default_factory=dict)  # each indexed record's line: stamp, pages, bytes

    @property
    def stale(self) -> bool:
        return bool(self.from_files or self.dead_lines)


# (experiment, unindexed ids, mtimes, vouched) -> (lines by trial as indexed_records gives them, pages
# written, trials a page could not read)
ReadMany = Callable[[Path, list[str], dict[str, float], set[str]],
                    tuple[dict[str, tuple[Stamp, object, bool, bytes]], int, set[str]]]


def scan_records(experiment_dir: Path, read_many: ReadMany | None = None) -> RecordScan:
    """Every readable record (report fields), from the index where it is current and from the
    files otherwise. `read_many(experiment_dir, unindexed ids, mtimes, vouched)` may read records
    for this scan: their index lines (stamp, record, pages), as a report's page pool makes them
    (viewer/first_render.py), with the pages it wrote; those it does not give are read here."""
    trials_dir = experiment_dir / "trials"
    child = _stat_in_child(trials_dir)  # while this process parses the index
    try:
        indexed, lines = _read_index(trials_dir / INDEX)
    finally:
        listing = _child_listing(child)
    try:
        if listing is None:
            listing = file_stamps.entries(str(trials_dir))
    except FileNotFoundError:
        return RecordScan([], [], {})
    stamps: dict[str, Stamp] = {}
    mtimes: dict[str, float] = {}
    problems: list[str] = []
    for name, stamp, mtime in listing:
        if type(stamp) is not tuple:  # (name, error, still there)
            if mtime:  # still there: unreadable, not merely gone since the listing
                problems.append(f"{trials_dir / name}: unreadable trial record ({stamp})")
            continue
        stamps[name[:-5]] = stamp
        mtimes[name[:-5]] = mtime
    current = {tid: line for tid, line in indexed.items() if stamps.get(tid) == line[0]}
    unindexed = sorted(stamps.keys() - current.keys())
    vouched = {tid for tid, line in current.items() if line[2]}
    given, pages_written, pages_unreadable = (read_many(experiment_dir, unindexed, mtimes, vouched)
                                              if read_many is not None and unindexed else ({}, 0, set()))
    read, read_stamps, unreadable = _read_files(trials_dir, [t for t in unindexed if t not in given])
    stamps.update(read_stamps)  # the stamp of the very file each was read from (fstat)
    stamps.update({tid: line[0] for tid, line in given.items()})
    records = sorted([*(line[1] for line in current.values()), *(line[1] for line in given.values()), *read],
                     key=attrgetter("trial_id"))
    scan = RecordScan(records, problems + unreadable, mtimes, from_files=len(unindexed),
                      dead_lines=lines - len(current), stamps=stamps,
                      pages_current=vouched | {tid for tid, line in given.items() if line[2]},
                      pages_written=pages_written, pages_unreadable=pages_unreadable)
    if scan.stale:  # held only for the index a stale scan will have written again (78 MB at 100,000)
        scan.lines = {tid: (line[0], line[2], line[3]) for part in (current, given) for tid, line in part.items()}
    return scan


def _stat_in_child(trials_dir: Path) -> subprocess.Popen | None:
    """A child listing the stamps, for an index of more than a few thousand lines (below that,
    starting it costs more than it saves)."""
    try:
        if (trials_dir / INDEX).stat().st_size < CHILD_ABOVE_BYTES:
            return None
        return subprocess.Popen([sys.executable, "-I", "-S", file_stamps.__file__, str(trials_dir)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except (OSError, TypeError, ValueError):  # no index; or no interpreter to start (sys.executable empty)
        return None


def _child_listing(child: subprocess.Popen | None) -> list[tuple] | None:
    """The child's listing; None where there is no child or it did not give one (this process lists)."""
    if child is None:
        return None
    out, _ = child.communicate()
    if child.returncode != 0:
        return None
    try:
        listing = marshal.loads(out)
    except (EOFError, ValueError, TypeError):
        return None
    if type(listing) is not list or not all(type(e) is tuple and len(e) == 3 for e in listing):
        return None  # not our script's output (sys.executable is not a Python that ran it)
    return listing


def rewrite_index(experiment_dir: Path, scan: RecordScan, pages: set[str] | frozenset[str] = frozenset()) -> None:
    """The index from a scan: one line per record read, `pages` naming the trials whose pages are
    known to be newer than their record."""
    out = []
    for r in scan.records:
        if (stamp := scan.stamps.get(r.trial_id)) is None:
            continue
        line = scan.lines.get(r.trial_id)
        # a line read that says the same is kept as it is: making 100,000 again was a second of a first render
        out.append(line[2] if line is not None and line[0] == stamp and line[1] == (r.trial_id in pages)
                   else line_json(stamp, r, r.trial_id in pages).encode())
    out.append(b"")
    atomic_write(experiment_dir / "trials" / INDEX, b"\n".join(out))


def rebuild_index(experiment_dir: Path) -> None:
    """After records were moved or copied in (a resume, a merge): the index from the files."""
    rewrite_index(experiment_dir, scan_records(experiment_dir))


def _read_index(path: Path) -> tuple[dict[str, tuple[Stamp, object, bool, bytes]], int]:
    """Trial id -> (stamp, record, pages, line) of its last usable line, and how many lines there were."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}, 0
    count = data.count(b"\n") + (not data.endswith(b"\n") and bool(data))
    return indexed_records(data), count


READ_BATCH = 2_000  # records validated per call: one call is several times faster than one a file, and
# a batch's bytes are dropped before the next is read (100,000 records held as bytes were 440 MB)


def _read_files(trials_dir: Path, trial_ids: list[str]) -> tuple[list[ReportedTrial], dict[str, Stamp], list[str]]:
    """Each with the stamp of the file read (fstat), so a line written from it names exactly that file."""
    records: list[ReportedTrial] = []
    stamps: dict[str, Stamp] = {}
    problems: list[str] = []
    for start in range(0, len(trial_ids), READ_BATCH):
        batch, batch_stamps, batch_problems = _read_batch(trials_dir, trial_ids[start:start + READ_BATCH])
        records += batch
        stamps.update(batch_stamps)
        problems += batch_problems
    return records, stamps, problems


def _held(joined: bytes, validated: list[ReportedTrial]) -> list:
    """What the report holds of records pydantic has validated: the same records as the index's
    structs (a third of the memory: 100,000 models held 800 MB), decoded from the same bytes; the
    models themselves where the strict decoder reads a field otherwise (a hand-edited "1" for 1)."""
    try:
        held = _HELD.decode(joined)
    except (msgspec.DecodeError, RecursionError):
        return validated
    return held if len(held) == len(validated) else validated


def _read_batch(trials_dir: Path, trial_ids: list[str]) -> tuple[list[ReportedTrial], dict[str, Stamp], list[str]]:
    """Validated as one JSON array in one call; if that fails (a broken file), each alone, to say which."""
    blobs: dict[str, bytes] = {}
    stamps: dict[str, Stamp] = {}
    problems: list[str] = []
    folder = os.fspath(trials_dir)  # a plain string: making a Path for each file was a fifth of the read
    for trial_id in trial_ids:
        try:
            blobs[trial_id], stamps[trial_id] = read_stamped(f"{folder}/{trial_id}.json")
        except OSError as exc:
            if os.path.lexists(trials_dir / f"{trial_id}.json"):
                problems.append(f"{trials_dir / trial_id}.json: unreadable trial record ({type(exc).__name__})")
    joined = b"[" + b",".join(blobs.values()) + b"]"
    try:
        batch = _RECORDS.validate_json(joined)
        if len(batch) == len(blobs) and all(r.trial_id == t for r, t in zip(batch, blobs)):
            return _held(joined, batch), stamps, problems
    except (ValidationError, ValueError):
        pass
    records = []
    for trial_id, blob in blobs.items():
        path = trials_dir / f"{trial_id}.json"
        try:
            record = ReportedTrial.model_validate_json(blob)
        except (ValidationError, ValueError) as exc:
            problems.append(f"{path}: unreadable trial record ({type(exc).__name__})")
            continue
        if record.trial_id != trial_id:
            problems.append(f"{path}: trial_id is {record.trial_id!r}, not the file's name; left out")
            continue
        records.append(record)
    read = {r.trial_id for r in records}
    return records, {t: s for t, s in stamps.items() if t in read}, problems
