"""The trial and pair pages: HTML with inline CSS, no script and nothing fetched from the web,
written to `<experiment>/pages/` and opened from the file system.

`pages/<trial-id>.html` is one trial; `pages/pair-<pair-id>.html` shows control and treatment side
by side; `pages/index.html` lists every trial, failures first, discordant pairs above them. A page is
rebuilt only when its records are newer than it, so re-rendering a large run costs a stat per trial.
Pages link what is on disk rather than embed it: each timeline screenshot as a thumbnail in
`pages/frames/` (named by its content, so a pair page and a re-render share it), the final
screenshot and the trace in the trial's Harbor folder. `export_page` writes one page self-contained
(every picture inside it, full size) to send or keep apart from the run.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import re
from html import escape
from pathlib import Path

from ..design.pairing import PAIRED_ARMS
from ..results.file_stamps import read_stamped
from ..results.records import SCREENSHOT_TYPES, TrialRecord, atomic_write
from .frames import frame_bytes, thumbnail
from .review_blocks import pair_review_html, review_stamps, trial_review_html
from .index_pages import INDEX_PAGE_ROWS, IndexInputs, page, pair_page_name, trial_page_name, write_index
from .timeline import Timeline, build_timeline
from .values import arguments_cell, json_cell, under_run

PAGES = "pages"
FRAMES = "frames"  # pages/frames/<content hash>.jpeg
STAGING = ".staging"  # pages/.staging/: each page is written here, then renamed into pages/
MAX_FRAMES = 40  # screenshots shown per trial; the trace holds them all


class Pictures:
    """Where a page's pictures come from: linked files (thumbnails written to pages/frames/ as
    needed, the final screenshot where Harbor's folder has it), or, for an export, data URIs."""

    def __init__(self, experiment_dir: Path, embed: bool = False):
        self.experiment_dir, self.embed = experiment_dir, embed
        self.shown: dict[tuple[Path, str], str] = {}

    @functools.cached_property
    def pages(self) -> Path:  # made when a picture is shown: most pages have none, and a unit makes one Pictures
        return self.experiment_dir / PAGES

    def frame(self, timeline: Timeline, member: str) -> str | None:
        if timeline.trace_path is None:
            return None
        key = (timeline.trace_path, member)
        if key not in self.shown:
            if sum(path == timeline.trace_path for path, _ in self.shown) >= MAX_FRAMES:
                return None
            self.shown[key] = self._frame(frame_bytes(timeline.trace_path, member))
        return self.shown[key] or None

    def _frame(self, data: bytes | None) -> str:
        if not data:
            return ""
        if self.embed:
            return f"data:image/jpeg;base64,{base64.b64encode(data).decode()}"
        name = f"{FRAMES}/{hashlib.sha1(data).hexdigest()[:24]}.jpeg"
        if not (self.pages / name).exists():  # the same frame, already shown by another page
            small = thumbnail(data)
            if small is None:
                return ""
            atomic_write(self.pages / name, small)
        return name

    def final(self, timeline: Timeline) -> str:
        path = timeline.screenshot_path
        if self.embed:
            return f"data:{SCREENSHOT_TYPES[path.name]};base64,{base64.b64encode(path.read_bytes()).decode()}"
        return os.path.relpath(path, self.pages)


def trial_section(timeline: Timeline, experiment_dir: Path, pictures: Pictures | None = None) -> str:
    """One trial's summary, links and timeline: the body of its page, and one side of a pair page."""
    pictures = pictures or Pictures(experiment_dir)
    r, e = timeline.record, escape
    out = [f"<h2>{e(r.trial_id)}</h2>",
           f'<p>Task <b>{e(r.task)}</b>, attempt {r.attempt}, arm <b>{e(r.arm)}</b>: '
           f'<b class="{e(r.outcome)}">{e(r.outcome)}</b>{f" ({e(r.stop_reason)})" if r.stop_reason else ""}. {e(r.detail)}</p>',
           "<table><tr><th>answer</th><th>expected</th><th>page value</th></tr>"
           f"<tr><td><pre>{json_cell(r.answer)}</pre></td><td><pre>{json_cell(r.expected)}</pre></td><td><pre>{json_cell(r.page_value)}</pre></td></tr></table>",
           f"<p>Agent {r.timings.agent_sec or 0:.1f} s (model {r.timings.model_sec or 0:.1f} s, browser calls "
           f"{r.timings.tool_sec or 0:.1f} s); {r.calls.forwarded} browser calls, {r.calls.rejected} rejected; "
           f"tokens {r.tokens.input or 0} in / {r.tokens.output or 0} out.</p>"]
    if r.flags:
        out.append("<p>Flags: " + "; ".join(e(f) for f in r.flags) + "</p>")
    out.append(trial_review_html(experiment_dir, r.trial_id))
    links = []
    if timeline.trace_path is not None:
        rel = os.path.relpath(timeline.trace_path, experiment_dir / PAGES)
        links.append(f'<a href="{e(rel)}">trace.zip</a> ({timeline.actions_traced} Playwright actions; open with '
                     f"<code>playwright show-trace {e(str(under_run(experiment_dir, timeline.trace_path)))}</code>)")
    if r.trace and r.trace.replay_url:
        links.append(f'<a href="{e(r.trace.replay_url)}">Kernel replay</a>')
    if r.trace and r.trace.live_view_url:
        links.append(f'live view (while it ran): <code>{e(r.trace.live_view_url)}</code>')
    if r.trace and r.trace.error:
        links.append(f"no trace: {e(r.trace.error)}")
    out.append("<p>" + (" · ".join(links) or "No browser trace (tracing was off).") + "</p>")
    out.append('<table class="timeline"><tr><th>t (s)</th><th>what</th><th>ms</th><th>arguments</th><th>result</th><th>page</th></tr>')
    start = timeline.events[0].time - (timeline.events[0].duration_ms or 0) / 1000 if timeline.events else 0
    for ev in timeline.events:
        status = ev.decision if ev.decision in ("rejected", "refused") else ev.kind
        what = e(ev.title) + (f" <i>({e(ev.webmcp_origin)})</i>" if ev.webmcp_origin else "")
        if ev.decision and ev.decision != "forwarded":
            what += f"<br><b>{e(ev.decision)}</b>" + (f": {e(ev.rule)}" if ev.rule else "")
        uri = pictures.frame(timeline, ev.frame) if ev.frame else None
        out.append(f'<tr class="{e(status)}" data-kind="{e(ev.kind)}"><td>{ev.time - start:.2f}</td><td>{what}</td>'
                   f"<td>{'' if ev.duration_ms is None else f'{ev.duration_ms:.0f}'}</td>"
                   f"<td>{arguments_cell(ev.arguments) if ev.arguments is not None else ''}</td>"
                   f"<td><pre>{e(ev.result or '')}</pre></td>"
                   f"<td>{f'<img class=frame alt=screenshot src={e(uri)}>' if uri else ''}</td></tr>")
    out.append("</table>")
    if timeline.screenshot_path is not None:
        out.append(f'<h3>The page as the agent left it</h3><img class="final" alt="final page" src="{e(pictures.final(timeline))}">')
    return "".join(out)


def render_trial_page(timeline: Timeline, experiment_dir: Path, pictures: Pictures | None = None,
                      sections: dict[str, str] | None = None) -> str:
    """`sections`: trial sections already drawn, by trial id (a unit's pair page and trial pages share them)."""
    r = timeline.record
    nav = '<p><a href="../report.html">report</a> · <a href="index.html">all trials</a>'
    if r.pair_id:
        nav += f' · <a href="{escape(pair_page_name(r.pair_id))}">this pair side by side</a>'
    return page(r.trial_id, nav + "</p>" + _section(timeline, experiment_dir, pictures, sections))


def _section(timeline: Timeline, experiment_dir: Path, pictures: Pictures | None, sections: dict[str, str] | None) -> str:
    if sections is None:
        return trial_section(timeline, experiment_dir, pictures)
    trial_id = timeline.record.trial_id
    if trial_id not in sections:
        sections[trial_id] = trial_section(timeline, experiment_dir, pictures)
    return sections[trial_id]


def render_pair_page(pair_id: str, sides: list[Timeline], experiment_dir: Path, pictures: Pictures | None = None,
                     sections: dict[str, str] | None = None) -> str:
    pictures = pictures or Pictures(experiment_dir)
    sides = sorted(sides, key=lambda t: t.record.arm)  # control, then treatment
    verdict = ", ".join(f"{t.record.arm} {t.record.outcome}" for t in sides)
    body = (f'<p><a href="../report.html">report</a> · <a href="index.html">all trials</a></p><h1>Pair {escape(pair_id)}</h1>'
            f"<p>{escape(verdict)}</p>{pair_review_html(experiment_dir, pair_id)}<div class=pair>"
            + "".join(f'<section data-arm="{escape(t.record.arm)}">{_section(t, experiment_dir, pictures, sections)}'
                      f'<p><a href="{escape(trial_page_name(t.record.trial_id))}">this trial alone</a></p></section>'
                      for t in sides) + "</div>")
    return page(f"pair {pair_id}", body)


def export_page(experiment_dir: Path, name: str) -> str:
    """One trial's page (`name` a trial ID) or one pair's (a pair ID), with every picture inside it
    at full size: a page that can be sent or kept apart from the run's folder."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):  # a trial or pair ID, never a path
        raise ValueError(f"{name!r}: not a trial or pair ID (lowercase letters, digits and '-')")
    pictures = Pictures(experiment_dir, embed=True)
    if (experiment_dir / "trials" / f"{name}.json").exists():
        (record,) = _read(experiment_dir, {name}) or [None]
        if record is None:
            raise ValueError(f"{experiment_dir / 'trials' / (name + '.json')}: unreadable")
        return render_trial_page(build_timeline(experiment_dir, record), experiment_dir, pictures)
    key = _key(f"{name}-control")
    members = _read(experiment_dir, {f"{name}-{arm}" for arm in PAIRED_ARMS}) if key is not None else []
    if not members:
        raise ValueError(f"{experiment_dir}: no trial or pair named {name!r} (a trial ID such as shop-cart-a1-control, "
                         "or a pair ID such as shop-cart-a1)")
    return render_pair_page(name, [build_timeline(experiment_dir, r) for r in members], experiment_dir, pictures)


def write_trial_pages(experiment_dir: Path, record: TrialRecord) -> None:
    """A trial's page as soon as its record is written (and its pair's, once both are), so a run
    spreads the work over its trials and the report only checks that the pages are current."""
    pages = experiment_dir / PAGES
    timeline = build_timeline(experiment_dir, record)
    atomic_write(pages / trial_page_name(record.trial_id), render_trial_page(timeline, experiment_dir))
    key = _key(record.trial_id)
    if key is None or not key.pair_id:
        return
    from ..design.pairing import PAIRED_ARMS, TrialKey

    other = TrialKey(key.task, key.attempt, next(a for a in PAIRED_ARMS if a != key.arm)).trial_id
    partner = _read(experiment_dir, {other})
    if partner:
        sides = [timeline, build_timeline(experiment_dir, partner[0])]
        atomic_write(pages / pair_page_name(key.pair_id), render_pair_page(key.pair_id, sides, experiment_dir))


def write_pages(experiment_dir: Path, report, scan=None) -> set[str]:
    """Writes every trial's and pair's page that is missing or older than its record(s), and the
    index (from the report, which has read every record already); returns the trials whose pages
    are now current. A page is current without a look when the record index's line for its trial
    (for a pair page: for both members) vouches for it (`scan`, the report's record scan); others
    cost a stat, and only the records of stale pages are read."""
    from ..results.record_index import scan_records

    scan = scan if scan is not None else scan_records(experiment_dir)
    pages = experiment_dir / PAGES
    stamps = scan.mtimes
    names = page_names(pages)
    pairs, pair_of = pairs_of(stamps)
    reviewed = review_stamps(experiment_dir)
    written, unreadable = _write_stale_pages(experiment_dir, stamps, names, scan.pages_current, pairs, pair_of, reviewed)
    # and what the scan's page pool wrote and could not read (viewer/first_render.py), as if written here
    written, unreadable = written + scan.pages_written, unreadable | scan.pages_unreadable
    try:
        index_built = (pages / "index.html").stat().st_mtime
    except OSError:
        index_built = -1.0
    # the index changes only when a record does, or a review
    if written or index_built < max([*stamps.values(), *reviewed.values()], default=0.0):
        write_index(pages, index_inputs(report, set(pairs)), INDEX_PAGE_ROWS, names)
    if not unreadable:
        return set(stamps)
    return {t for t in stamps if t not in unreadable and not any(m in unreadable for m in pairs.get(pair_of.get(t, ""), []))}


def _write_stale_pages(experiment_dir: Path, stamps: dict[str, float], names: set[str], vouched: set[str],
                       pairs: dict[str, list[str]], pair_of: dict[str, str],
                       reviewed: dict[str, float] | None = None) -> tuple[int, set[str]]:
    """How many stale pages were written, and the trials whose records could not be read."""
    jobs = stale_jobs(experiment_dir, stamps, names, vouched, pairs, pair_of, reviewed)
    workers = page_workers(len(jobs))
    done = in_a_pool(_render_units, experiment_dir, jobs, workers) if workers > 1 else None
    if done is None:
        return _render_units(experiment_dir, jobs)
    return sum(count for count, _ in done), set().union(*(unreadable for _, unreadable in done))


def page_names(pages: Path) -> set[str]:
    try:
        return set(os.listdir(pages))
    except OSError:
        return set()


def pairs_of(trial_ids) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Pair id -> its members present, and member -> its pair id."""
    pairs: dict[str, list[str]] = {}
    pair_of: dict[str, str] = {}
    for trial_id in trial_ids:
        pair_id, _, arm = trial_id.rpartition("-")  # <task>-a<attempt>-<arm>, without a regex per trial
        if arm in PAIRED_ARMS and pair_id:
            pairs.setdefault(pair_id, []).append(trial_id)
            pair_of[trial_id] = pair_id
    return pairs, pair_of


def stale_jobs(experiment_dir: Path, stamps: dict[str, float], names: set[str], vouched: set[str],
               pairs: dict[str, list[str]], pair_of: dict[str, str],
               reviewed: dict[str, float] | None = None) -> list[tuple[str, list[str], list[str], bool]]:
    """The trial and pair pages that are missing or older than their records (or their reviews), as
    units to render: (pair id or lone trial, its members, its stale trial pages, its pair page?)."""
    pages = experiment_dir / PAGES

    def older(name: str, members: list[str]) -> bool:  # only for pages no index line vouches for
        try:
            return (pages / name).stat().st_mtime < max(stamps[m] for m in members)
        except OSError:
            return True

    # set operations, not a call per page: at 100,000 trials there are 133,000 pages
    unvouched = stamps.keys() - vouched
    stale_trials = {t for t in stamps if trial_page_name(t) not in names}
    stale_trials |= {t for t in unvouched - stale_trials if older(trial_page_name(t), [t])}
    unvouched_pairs = {pair_of[t] for t in unvouched if t in pair_of}
    stale_pairs = {p for p in pairs if pair_page_name(p) not in names}
    stale_pairs |= {p for p in unvouched_pairs - stale_pairs if older(pair_page_name(p), pairs[p])}
    for name, written_at in (reviewed or {}).items():  # a review newer than its page (one stat a reviewed trial)
        pair = name.removeprefix("pair-") if name.startswith("pair-") else None
        page_name = pair_page_name(pair) if pair is not None else trial_page_name(name)
        try:
            current = (pages / page_name).stat().st_mtime >= written_at
        except OSError:
            current = False
        if not current and pair is not None and pair in pairs:
            stale_pairs.add(pair)
        elif not current and pair is None and name in stamps:
            stale_trials.add(name)
    # one unit per pair (its stale trial pages and its own) or lone trial, each read, rendered and
    # dropped in turn: memory stays that of one pair, whatever the run's size
    units: dict[str, tuple[list[str], list[str], bool]] = {}
    for pair_id in stale_pairs:
        units[pair_id] = (pairs[pair_id], [], True)
    for trial_id in stale_trials:
        unit = pair_of.get(trial_id, trial_id)
        members, stale, pair_page = units.get(unit, (pairs.get(unit, [trial_id]), [], False))
        units[unit] = (members, [*stale, trial_id], pair_page)
    return [(unit, *units[unit]) for unit in sorted(units)]


def page_workers(jobs: int) -> int:
    return min(len(os.sched_getaffinity(0)), MAX_PAGE_WORKERS) if jobs >= PARALLEL_FROM else 1


def in_a_pool(work, experiment_dir: Path, jobs: list, workers: int, then=None) -> list | None:
    """`work(experiment_dir, chunk)` over the jobs in spawned processes (not forked: the run's own
    process may hold threads, the service loop's): each chunk's result, or `then(result)` made
    here as each arrives, while the pool goes on; None where a pool cannot be had or broke (no
    interpreter to spawn, a worker killed): then this process does them all, as writing a page
    again is harmless."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # many small chunks: at the end no worker waits long for the other's last one
    chunks = [chunk for i in range(workers * 16) if (chunk := jobs[i::workers * 16])]
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            return [then(done) if then else done for done in pool.map(work, [experiment_dir] * len(chunks), chunks)]
    except (BrokenProcessPool, OSError, RuntimeError, EOFError):
        return None


PARALLEL_FROM = 2_000  # stale units (a pair, or a lone trial) at which a pool pays for its start (about 0.5 s a process)
MAX_PAGE_WORKERS = 4


def _render_units(experiment_dir: Path, jobs: list[tuple[str, list[str], list[str], bool]]) -> tuple[int, set[str]]:
    """Renders each unit's stale pages (pair_id or lone trial, members, stale trials, pair page?):
    how many pages were written, and the trials whose records could not be read."""
    count, unreadable = 0, set()
    for unit, members, stale, pair_page in jobs:
        needed = unit_needs(members, stale, pair_page)
        records = {r.trial_id: r for r in _read(experiment_dir, needed)}
        unreadable |= needed - records.keys()
        count += render_unit(experiment_dir, unit, members, stale, pair_page, records)
    return count, unreadable


def unit_needs(members: list[str], stale: list[str], pair_page: bool) -> set[str]:
    """The records a unit's pages are drawn from: both members for its pair page, else its stale trials'."""
    return set(members if pair_page else stale)


def render_unit(experiment_dir: Path, unit: str, members: list[str], stale: list[str], pair_page: bool,
                records: dict[str, TrialRecord]) -> int:
    """A unit's stale trial pages and its pair page, from its records read: how many were written."""
    pages = os.path.join(experiment_dir, PAGES)  # strings: pathlib's joins were a tenth of a page's cost
    staging = os.path.join(pages, STAGING)
    needed = unit_needs(members, stale, pair_page)
    timelines = {t: build_timeline(experiment_dir, records[t]) for t in sorted(records) if t in needed}
    pictures, sections = Pictures(experiment_dir), {}  # each trial's section drawn once, for its page and its pair's
    count = 0
    for trial_id in sorted(stale):
        if trial_id in timelines:
            atomic_write(os.path.join(pages, trial_page_name(trial_id)),
                         render_trial_page(timelines[trial_id], experiment_dir, pictures, sections), staging)
            count += 1
    if pair_page and (sides := [timelines[m] for m in members if m in timelines]):
        atomic_write(os.path.join(pages, pair_page_name(unit)), render_pair_page(unit, sides, experiment_dir, pictures, sections), staging)
        count += 1
    return count


def _key(trial_id: str):
    from ..design.pairing import TrialKey

    try:
        return TrialKey.parse(trial_id)
    except ValueError:
        return None


def _read(experiment_dir: Path, trial_ids: set[str]) -> list[TrialRecord]:
    out, folder = [], os.path.join(experiment_dir, "trials")
    for trial_id in trial_ids:
        try:
            out.append(TrialRecord.model_validate_json(read_stamped(f"{folder}/{trial_id}.json")[0]))
        except (OSError, ValueError):
            continue  # unreadable: the report counts it among its problems
    return out


def index_inputs(report, pair_ids: set[str]) -> IndexInputs:
    """The trials index's inputs, from the report's own lists."""
    return IndexInputs(trials=[(t, o) for row in report.by_arm_task for t, o in row.trials.items()],
                       why=report.listed_notes("not_passed"), flagged=report.listed_ids("flagged"),
                       rejected=report.listed_ids("rejected"), pair_ids=pair_ids,
                       discordant=[p for row in report.paired for p in row.discordant],
                       reviewed=report.reviews.mode_of() if report.reviews is not None else None)
