"""The trial and pair pages: self-contained HTML (inline CSS, screenshots as data URIs, no script,
nothing fetched), written to `<experiment>/pages/` and opened from the file system.

`pages/<trial-id>.html` is one trial; `pages/pair-<pair-id>.html` shows control and treatment side
by side; `pages/index.html` lists every trial, failures and discordant pairs first. A page is
rebuilt only when its records are newer than it, so re-rendering a large run costs a stat per trial.
"""

from __future__ import annotations

import base64
import json
import os
from html import escape
from pathlib import Path
from typing import Any

from ..records import TrialRecord, atomic_write, read_trial_records
from .frames import frame_bytes
from .timeline import Timeline, build_timeline

PAGES = "pages"
MAX_FRAMES = 40  # screenshots embedded per trial; the trace holds them all
STYLE = ("body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;width:100%}"
         "td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}th{background:#f4f4f4}"
         "pre{white-space:pre-wrap;word-break:break-all;margin:0;font-size:12px;max-height:24em;overflow:auto}"
         ".model{background:#f3f0ff}.agent{background:#f0f7ff}.rejected,.refused{background:#fde8e8}"
         ".passed{color:#1a7f37}.failed,.errored{color:#c0392b}.pair{display:flex;gap:1em}.pair>section{flex:1;min-width:0}"
         "img.frame{width:220px;border:1px solid #ccc}img.final{max-width:100%;border:1px solid #ccc}"
         "table.timeline td:nth-child(4),table.timeline td:nth-child(5){width:32%}")


def trial_page_name(trial_id: str) -> str:
    return f"{trial_id}.html"


def pair_page_name(pair_id: str) -> str:
    return f"pair-{pair_id}.html"


def _json(value: Any) -> str:
    return escape(json.dumps(value, indent=1, default=str)[:4000])


def _arguments(value: Any) -> str:
    """A call's arguments; code shown as code, not as an escaped JSON string."""
    if isinstance(value, dict) and isinstance(value.get("code"), str):
        rest = {k: v for k, v in value.items() if k != "code"}
        return f"<pre>{_json(rest)}</pre><pre>{escape(value['code'][:4000])}</pre>"
    return f"<pre>{_json(value)}</pre>"


def _frame_uri(timeline: Timeline, member: str, cache: dict[str, str]) -> str | None:
    if member not in cache:
        if len(cache) >= MAX_FRAMES or timeline.trace_path is None:
            return None
        data = frame_bytes(timeline.trace_path, member)
        cache[member] = f"data:image/jpeg;base64,{base64.b64encode(data).decode()}" if data else ""
    return cache[member] or None


def trial_section(timeline: Timeline, experiment_dir: Path) -> str:
    """One trial's summary, links and timeline: the body of its page, and one side of a pair page."""
    r, e = timeline.record, escape
    out = [f"<h2>{e(r.trial_id)}</h2>",
           f'<p>Task <b>{e(r.task)}</b>, attempt {r.attempt}, arm <b>{e(r.arm)}</b>: '
           f'<b class="{e(r.outcome)}">{e(r.outcome)}</b>{f" ({e(r.stop_reason)})" if r.stop_reason else ""}. {e(r.detail)}</p>',
           "<table><tr><th>answer</th><th>expected</th><th>page value</th></tr>"
           f"<tr><td><pre>{_json(r.answer)}</pre></td><td><pre>{_json(r.expected)}</pre></td><td><pre>{_json(r.page_value)}</pre></td></tr></table>",
           f"<p>Agent {r.timings.agent_sec or 0:.1f} s (model {r.timings.model_sec or 0:.1f} s, browser calls "
           f"{r.timings.tool_sec or 0:.1f} s); {r.calls.forwarded} browser calls, {r.calls.rejected} rejected; "
           f"tokens {r.tokens.input or 0} in / {r.tokens.output or 0} out.</p>"]
    if r.flags:
        out.append("<p>Flags: " + "; ".join(e(f) for f in r.flags) + "</p>")
    links = []
    if timeline.trace_path is not None:
        rel = os.path.relpath(timeline.trace_path, experiment_dir / PAGES)
        links.append(f'<a href="{e(rel)}">trace.zip</a> ({timeline.actions_traced} Playwright actions; open with '
                     f"<code>playwright show-trace {e(str(timeline.trace_path.relative_to(experiment_dir)))}</code>)")
    if r.trace and r.trace.replay_url:
        links.append(f'<a href="{e(r.trace.replay_url)}">Kernel replay</a>')
    if r.trace and r.trace.live_view_url:
        links.append(f'live view (while it ran): <code>{e(r.trace.live_view_url)}</code>')
    if r.trace and r.trace.error:
        links.append(f"no trace: {e(r.trace.error)}")
    out.append("<p>" + (" · ".join(links) or "No browser trace (tracing was off).") + "</p>")
    out.append('<table class="timeline"><tr><th>t (s)</th><th>what</th><th>ms</th><th>arguments</th><th>result</th><th>page</th></tr>')
    start = timeline.events[0].time - (timeline.events[0].duration_ms or 0) / 1000 if timeline.events else 0
    frames: dict[str, str] = {}
    for ev in timeline.events:
        status = ev.decision if ev.decision in ("rejected", "refused") else ev.kind
        what = e(ev.title) + (f" <i>({e(ev.webmcp_origin)})</i>" if ev.webmcp_origin else "")
        if ev.decision and ev.decision != "forwarded":
            what += f"<br><b>{e(ev.decision)}</b>" + (f": {e(ev.rule)}" if ev.rule else "")
        uri = _frame_uri(timeline, ev.frame, frames) if ev.frame else None
        out.append(f'<tr class="{e(status)}" data-kind="{e(ev.kind)}"><td>{ev.time - start:.2f}</td><td>{what}</td>'
                   f"<td>{'' if ev.duration_ms is None else f'{ev.duration_ms:.0f}'}</td>"
                   f"<td>{_arguments(ev.arguments) if ev.arguments is not None else ''}</td>"
                   f"<td><pre>{e(ev.result or '')}</pre></td>"
                   f"<td>{f'<img class=frame alt=screenshot src={uri}>' if uri else ''}</td></tr>")
    out.append("</table>")
    if timeline.screenshot_path is not None:
        png = base64.b64encode(timeline.screenshot_path.read_bytes()).decode()
        out.append(f'<h3>The page as the agent left it</h3><img class="final" alt="final page" src="data:image/png;base64,{png}">')
    return "".join(out)


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>{body}</body></html>\n")


def render_trial_page(timeline: Timeline, experiment_dir: Path) -> str:
    r = timeline.record
    nav = '<p><a href="../report.html">report</a> · <a href="index.html">all trials</a>'
    if r.pair_id:
        nav += f' · <a href="{escape(pair_page_name(r.pair_id))}">this pair side by side</a>'
    return _page(r.trial_id, nav + "</p>" + trial_section(timeline, experiment_dir))


def render_pair_page(pair_id: str, sides: list[Timeline], experiment_dir: Path) -> str:
    sides = sorted(sides, key=lambda t: t.record.arm)  # control, then treatment
    verdict = ", ".join(f"{t.record.arm} {t.record.outcome}" for t in sides)
    body = (f'<p><a href="../report.html">report</a> · <a href="index.html">all trials</a></p><h1>Pair {escape(pair_id)}</h1>'
            f"<p>{escape(verdict)}</p><div class=pair>"
            + "".join(f'<section data-arm="{escape(t.record.arm)}">{trial_section(t, experiment_dir)}'
                      f'<p><a href="{escape(trial_page_name(t.record.trial_id))}">this trial alone</a></p></section>'
                      for t in sides) + "</div>")
    return _page(f"pair {pair_id}", body)


def _first(record: TrialRecord) -> tuple:
    return (record.outcome == "passed", record.trial_id)


def write_pages(experiment_dir: Path) -> int:
    """Writes every trial's and pair's page that is missing or older than its records, and the
    index; returns how many pages were (re)built."""
    pages = experiment_dir / PAGES
    records, _ = read_trial_records(experiment_dir)
    stamp = {r.trial_id: _mtime(experiment_dir / "trials" / f"{r.trial_id}.json") for r in records}
    timelines: dict[str, Timeline] = {}

    def timeline(record: TrialRecord) -> Timeline:
        if record.trial_id not in timelines:
            timelines[record.trial_id] = build_timeline(experiment_dir, record)
        return timelines[record.trial_id]

    built = 0
    pairs: dict[str, list[TrialRecord]] = {}
    for record in records:
        page = pages / trial_page_name(record.trial_id)
        if _mtime(page) < stamp[record.trial_id]:
            atomic_write(page, render_trial_page(timeline(record), experiment_dir))
            built += 1
        if record.pair_id and record.arm in ("control", "treatment"):
            pairs.setdefault(record.pair_id, []).append(record)
    for pair_id, members in pairs.items():
        page = pages / pair_page_name(pair_id)
        if _mtime(page) < max(stamp[m.trial_id] for m in members):
            atomic_write(page, render_pair_page(pair_id, [timeline(m) for m in members], experiment_dir))
            built += 1
    atomic_write(pages / "index.html", _index(records, pairs))
    return built


def discordant(members: list[TrialRecord]) -> bool:
    outcomes = {m.arm: m.outcome for m in members}
    return len(outcomes) == 2 and "errored" not in outcomes.values() and len(set(outcomes.values())) == 2


def _index(records: list[TrialRecord], pairs: dict[str, list[TrialRecord]]) -> str:
    e = escape
    rows = [f'<tr><td><a href="{e(trial_page_name(r.trial_id))}">{e(r.trial_id)}</a></td><td class="{e(r.outcome)}">'
            f"{e(r.outcome)}</td><td>{e(r.stop_reason or '')}</td><td>{len(r.flags)}</td><td>{r.calls.rejected}</td>"
            f"<td>{f'<a href={e(pair_page_name(r.pair_id))}>pair</a>' if r.pair_id in pairs else ''}</td></tr>"
            for r in sorted(records, key=_first)]
    split = sorted(p for p, m in pairs.items() if discordant(m))
    body = ('<p><a href="../report.html">report</a></p><h1>Trials</h1>'
            + (f"<h2>Discordant pairs</h2><ul>{''.join(f'<li><a href={e(pair_page_name(p))}>{e(p)}</a></li>' for p in split)}</ul>"
               if split else "")
            + "<table><tr><th>trial</th><th>outcome</th><th>stop reason</th><th>flags</th><th>rejected calls</th><th></th></tr>"
            + "".join(rows) + "</table>")
    return _page("trials", body)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return -1.0
