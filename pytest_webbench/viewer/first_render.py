"""A render from records no index line vouches for (records copied without their index and pages,
a merge, a resume), when there are enough of them for a pool: each worker reads a record once,
writes the pages that are stale, and hands back the record's index line, which the report's scan
then takes as it takes the index's own lines.

Otherwise this process read every such record for the report, then the pool read them all again
for their pages, and the pool waited while this process read: at 100,000 trials the read was a
quarter of a 21.7 s render, on one core (benchmarks/report_scale.py --cold).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
from pydantic import ValidationError

from ..results.file_stamps import read_stamped
from ..results.index_lines import IndexedTrial, indexed_records, line_json
from ..results.records import TrialRecord
from .pages import PAGES, in_a_pool, page_names, page_workers, pairs_of, render_unit, stale_jobs, unit_needs
from .review_blocks import review_stamps

Job = tuple[str, list[str], list[str], bool, list[str]]  # a unit's render job, and the unindexed members to line
# index lines by trial (as indexed_records gives them), pages written, unreadable
Read = tuple[dict[str, tuple[Any, Any, bool, bytes]], int, set[str]]
_HELD = msgspec.json.Decoder(IndexedTrial)


def read_and_render(experiment_dir: Path, unindexed: list[str], mtimes: dict[str, float],
                    vouched: set[str]) -> Read:
    """For scan_records: trial id -> (stamp, record, pages, line) of each unindexed record a worker read,
    with every stale page of the run written; how many pages were written; and the trials whose
    records a page needed and could not be read (write_pages counts both as its own). Nothing
    where there are too few for a pool, or the pool could not be had (the scan then reads them
    itself, and write_pages writes the pages)."""
    workers = page_workers(len(unindexed))
    if workers < 2:
        return {}, 0, set()
    names = page_names(experiment_dir / PAGES)
    pairs, pair_of = pairs_of(mtimes)
    jobs: dict[str, list] = {unit: [unit, members, stale, pair_page, []] for unit, members, stale, pair_page
                             in stale_jobs(experiment_dir, mtimes, names, vouched, pairs, pair_of, review_stamps(experiment_dir))}
    for trial_id in unindexed:
        unit = pair_of.get(trial_id, trial_id)
        jobs.setdefault(unit, [unit, pairs.get(unit, [trial_id]), [], False, []])[4].append(trial_id)
    done = in_a_pool(_read_render_and_line, experiment_dir, [tuple(jobs[unit]) for unit in sorted(jobs)], workers,
                     then=lambda chunk: (chunk[0], indexed_records(chunk[1]), chunk[2]))  # read while the pool works
    if done is None:
        return {}, 0, set()
    asked = set(unindexed)
    return ({t: line for _, lines, _ in done for t, line in lines.items() if t in asked}, sum(count for count, _, _ in done),
            set().union(*(unreadable for _, _, unreadable in done)))


def _read_render_and_line(experiment_dir: Path, jobs: list[Job]) -> tuple[int, bytes, set[str]]:
    """A worker's share: the pages written, its index lines as one blob, and the trials whose
    records its pages needed and could not read (as _render_units says them)."""
    count, lines, unreadable = 0, [], set()
    trials = os.path.join(experiment_dir, "trials")
    for unit, members, stale, pair_page, unindexed in jobs:
        records, stamps, blobs = {}, {}, {}
        needed = unit_needs(members, stale, pair_page)
        for trial_id in needed | set(unindexed):
            if (read := _read(f"{trials}/{trial_id}.json", trial_id)) is not None:
                records[trial_id], stamps[trial_id], blobs[trial_id] = read
        unreadable |= needed - records.keys()
        count += render_unit(experiment_dir, unit, members, stale, pair_page, records)
        # a pair page drawn without a side does not vouch for the member it has (as write_pages says)
        whole = not pair_page or all(m in records for m in members)
        for trial_id in unindexed:
            if trial_id in records:
                try:  # the report's fields as the scan holds them, from the same bytes (as record_index._held)
                    held: Any = _HELD.decode(blobs[trial_id])
                except (msgspec.DecodeError, RecursionError):  # a field the strict decoder reads otherwise
                    held = records[trial_id]
                try:
                    lines.append(line_json(stamps[trial_id], held, whole).encode())
                except (ValidationError, ValueError):
                    continue  # the scan reads it itself, and says what is wrong with it
    return count, b"\n".join(lines), unreadable


def _read(path: str, trial_id: str) -> tuple[TrialRecord, Any, bytes] | None:
    """The record, the stamp of the very file read (fstat) and its bytes, or None: unreadable, not
    a record, or another trial's (the scan reads those itself and says why)."""
    try:
        data, stamp = read_stamped(path)
        record = TrialRecord.model_validate_json(data)
    except (OSError, ValueError):
        return None
    return (record, stamp, data) if record.trial_id == trial_id else None
