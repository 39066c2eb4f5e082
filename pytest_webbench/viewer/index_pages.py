"""The trials index (`pages/index.html`, `index-2.html`, ...): every trial, failures first, in
pages of INDEX_PAGE_ROWS, each linking the others; and the page shell and names every page shares.

At a run's end every row is new: at 100,000 trials the index is 100 pages, 0.4-0.5 s of the render.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape
from pathlib import Path

from ..design.pairing import PAIRED_ARMS
from ..results.records import atomic_write
from ..results.well_formed import well_formed

STYLE = ("body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;width:100%}"
         "td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}th{background:#f4f4f4}"
         "pre{white-space:pre-wrap;word-break:break-all;margin:0;font-size:12px;max-height:24em;overflow:auto}"
         ".model{background:#f3f0ff}.agent{background:#f0f7ff}.rejected,.refused{background:#fde8e8}"
         ".passed{color:#1a7f37}.failed,.errored{color:#c0392b}.pair{display:flex;gap:1em}.pair>section{flex:1;min-width:0}"
         "img.frame{width:220px;border:1px solid #ccc}img.final{max-width:100%;border:1px solid #ccc}"
         "table.timeline td:nth-child(4),table.timeline td:nth-child(5){width:32%}")
INDEX_PAGE_ROWS = 1000  # trials per page of the index: a page that opens at any size of run


@dataclass
class IndexInputs:
    """What the index is made of, as the report holds it."""

    trials: list[tuple[str, str]]  # (trial id, outcome), in no order
    why: dict[str, str]  # trial id -> why it did not pass
    flagged: set[str]
    rejected: set[str]  # trials with a rejected call
    pair_ids: set[str]  # pairs that have a pair page
    discordant: list[str]  # pair ids, listed above the trials
    reviewed: dict[str, str] | None = None  # trial id -> the reviewer's failure mode (--review)


def trial_page_name(trial_id: str) -> str:
    return f"{trial_id}.html"


def pair_page_name(pair_id: str) -> str:
    return f"pair-{pair_id}.html"


def index_page_name(number: int) -> str:
    return "index.html" if number == 1 else f"index-{number}.html"


def numbered_page(name: str) -> bool:
    """index-2.html and on; not a trial's page that starts the same (a task named `index`)."""
    return re.fullmatch(r"index-[0-9]+\.html", name) is not None


def page(title: str, body: str) -> str:
    """Every page's shell; what the agent left in its transcript or the proxy's log made text a
    UTF-8 file can hold."""
    return well_formed(f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
                       f"<style>{STYLE}</style></head><body>{body}</body></html>\n")


_PLAIN = re.compile(r"[\w.-]*", re.ASCII).fullmatch  # nothing in it for escape() to change


def escape_name(text: str) -> str:
    """escape(), skipped for a name with nothing to escape (a trial id as the name rule makes it):
    the trials index and the report's row links write 100,000 of them."""
    return text if _PLAIN(text) else escape(text)


def index_pages(inputs: IndexInputs, per_page: int = INDEX_PAGE_ROWS) -> dict[str, str]:
    """Page name -> HTML: every trial, failures first, then the passes, each part by trial id,
    per_page to a page, each page linking the others; the discordant pairs above the first table."""
    e = escape
    why, flagged, rejected, pair_ids = inputs.why, inputs.flagged, inputs.rejected, inputs.pair_ids
    # ids are unique, so the pairs sort by id without a key
    trials = sorted(item for item in inputs.trials if item[1] != "passed") + sorted(item for item in inputs.trials if item[1] == "passed")
    # 100,000 rows at that size: a handful of distinct outcomes and notes, each escaped once
    shown_outcome = {o: escape_name(o) for o in {o for _, o in trials}}
    shown_note = {note: e(note) for note in set(why.values()) if note}
    cells = []
    reviewed = inputs.reviewed or {}
    for trial_id, outcome in trials:
        candidate, _, arm = trial_id.rpartition("-")  # as write_pages names the pairs whose pages it writes
        shown = escape_name(trial_id)
        # the pair's id is the trial's less its arm, and escape() maps "-" and the arm's letters to themselves
        pair = f'<a href={pair_page_name(shown.rpartition("-")[0])}>pair</a>' if candidate and arm in PAIRED_ARMS and candidate in pair_ids else ""
        outcome = shown_outcome[outcome]
        cells.append(f'<tr><td><a href="{trial_page_name(shown)}">{shown}</a></td><td class="{outcome}">{outcome}</td>'
                     f"<td>{shown_note.get(why.get(trial_id), '')}</td><td>{'flagged' if trial_id in flagged else ''}</td>"
                     f"<td>{'yes' if trial_id in rejected else ''}</td><td>{pair}</td>"
                     + (f"<td>{e(reviewed.get(trial_id, ''))}</td>" if reviewed else "") + "</tr>")
    discordant = inputs.discordant
    count = max(1, -(-len(cells) // per_page))
    pages = {}
    for number in range(1, count + 1):
        first = (number - 1) * per_page
        nav = " · ".join(f"<b>{n}</b>" if n == number else f'<a href="{index_page_name(n)}">{n}</a>' for n in range(1, count + 1))
        body = ('<p><a href="../report.html">report</a></p><h1>Trials</h1>'
                + (f"<h2>Discordant pairs</h2><ul>{''.join(f'<li><a href={e(pair_page_name(p))}>{e(p)}</a></li>' for p in discordant[:per_page])}</ul>"
                   if discordant and number == 1 else "")
                + (f"<p>Trials {first + 1}-{min(first + per_page, len(cells))} of {len(cells)}, failures first. Page {nav}</p>"
                   if count > 1 else "")
                + (_review_filter(reviewed) if reviewed else "")
                + "<table id=trials><tr><th>trial</th><th>outcome</th><th>why not passed</th><th>flags</th><th>rejected calls</th><th></th>"
                + ("<th>review (a reading aid)</th>" if reviewed else "") + "</tr>"
                + "".join(cells[first:first + per_page]) + "</table>")
        pages[index_page_name(number)] = page("trials" if count == 1 else f"trials, page {number} of {count}", body)
    return pages


def _review_filter(reviewed: dict[str, str]) -> str:
    """A filter of the table's rows by the reviewer's failure mode (a page of the index at a time)."""
    modes = sorted(set(reviewed.values()))
    options = "".join(f"<option>{escape(m)}</option>" for m in modes)
    return ("<p>Reviewer's failure mode: <select onchange=\"for (const r of document.querySelectorAll('#trials tr:not(:first-child)'))"
            " r.style.display = !this.value || r.lastElementChild.textContent === this.value ? '' : 'none'\">"
            f"<option value=''>all trials</option>{options}</select></p>")


def write_index(pages_dir: Path, inputs: IndexInputs, per_page: int, old_names: set[str]) -> None:
    """Writes the pages, index.html last (its time says all are done), and removes the numbered
    pages a larger index left (a run re-rendered after records left)."""
    pages = index_pages(inputs, per_page)
    for name, html in sorted(pages.items(), key=lambda item: item[0] == "index.html"):
        atomic_write(pages_dir / name, html)
    for extra in old_names - pages.keys():
        if numbered_page(extra):
            (pages_dir / extra).unlink(missing_ok=True)
