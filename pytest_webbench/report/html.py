"""report.html: one self-contained file (inline CSS and SVG, no scripts, nothing fetched).

Every figure taken from report.json is marked `data-path` (its place in the JSON) and
`data-format`, so a test can open the page in Chromium and check each shown number against the
JSON it came from.
"""

from __future__ import annotations

import math
from html import escape

from ..viewer.index_pages import escape_name, pair_page_name, trial_page_name
from ..viewer.pages import PAGES
from .build import Report
from .rates import Rate
from .trial_lists import LISTED
from .format import TASK_ROWS, ci, num, pct, pval, signed_pct
from .render import model_words
from .sequential import verdict_words

ARM_COLOURS = {"control": "#4c72b0", "treatment": "#dd8452", "playwright": "#55a868"}
SHOWN_PER_LIST = LISTED  # links per list here; pages/index.html lists every trial
OUTCOME_COLOURS = {"both": "#55a868", "control_only": "#4c72b0", "treatment_only": "#dd8452", "neither": "#c44e52", "excluded": "#bbbbbb"}


def _v(path: str, text: str, fmt: str) -> str:
    """`path` is the report's own (field names and indexes): nothing in it to escape."""
    return f'<span data-path="{path}" data-format="{fmt}">{escape(text)}</span>'


def _rate_cells(path: str, r: Rate) -> str:
    return (f"<td>{_v(path + '.passes', str(r.passes), 'int')}/{_v(path + '.n', str(r.n), 'int')}</td>"
            f"<td>{_v(path + '.rate', pct(r.rate), 'pct')}</td><td>{escape(ci(r))}</td>")


def _rates_plot(rates: dict[str, Rate]) -> str:
    """Pass rate per arm with its interval, on a 0-100% axis."""
    width, left, row = 520, 110, 28
    height = 30 + row * len(rates)
    x = lambda v: left + (width - left - 20) * v  # noqa: E731
    parts = [f'<svg role="img" aria-label="pass rate per arm" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts.append(f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="8" y2="{height - 18}" stroke="#ddd"/>'
                     f'<text x="{x(tick):.1f}" y="{height - 4}" font-size="10" text-anchor="middle">{pct(tick)}</text>')
    for i, (arm, r) in enumerate(rates.items()):
        y = 20 + i * row
        colour = ARM_COLOURS.get(arm, "#777")
        parts.append(f'<text x="{left - 8}" y="{y + 4}" font-size="12" text-anchor="end">{escape(arm)}</text>')
        if r.rate is not None:
            parts.append(f'<line x1="{x(r.ci_low):.1f}" x2="{x(r.ci_high):.1f}" y1="{y}" y2="{y}" stroke="{colour}" stroke-width="3"/>'
                         f'<circle cx="{x(r.rate):.1f}" cy="{y}" r="5" fill="{colour}"/>')
    return "".join(parts) + "</svg>"


def _paired_plot(report: Report) -> str:
    """Per task, the pairs split into both passed / control only / treatment only / neither / excluded."""
    width, left, row = 620, 200, 24
    shown = report.paired[:TASK_ROWS]
    height = 40 + row * len(shown)
    parts = [f'<svg role="img" aria-label="paired outcomes per task" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for i, r in enumerate(shown):
        y = 10 + i * row
        parts.append(f'<text x="{left - 8}" y="{y + 13}" font-size="12" text-anchor="end">{escape(r.task)}{" (placebo)" if r.placebo else ""}</text>')
        start = left
        for key in ("both", "control_only", "treatment_only", "neither", "excluded"):
            count = getattr(r, key)
            if not count or not r.pairs:
                continue
            w = (width - left - 10) * count / r.pairs
            parts.append(f'<rect x="{start:.1f}" y="{y}" width="{w:.1f}" height="{row - 6}" fill="{OUTCOME_COLOURS[key]}">'
                         f"<title>{key.replace('_', ' ')}: {count}</title></rect>")
            start += w
    legend_y = height - 12
    for j, (key, colour) in enumerate(OUTCOME_COLOURS.items()):
        parts.append(f'<rect x="{left + j * 85}" y="{legend_y - 9}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{left + j * 85 + 14}" y="{legend_y}" font-size="10">{key.replace("_", " ")}</text>')
    return "".join(parts) + "</svg>"


def _speedup_plot(report: Report) -> str:
    """Each both-pass pair's speedup (control time / treatment time) on a log2 axis; 1x marked."""
    rows = [r for r in report.paired[:TASK_ROWS] if r.speedups]
    if not rows:
        return "<p>No pair where both arms passed: no speedups to show.</p>"
    width, left, row = 620, 200, 24
    height = 36 + row * len(rows)
    every = [s for r in rows for s in r.speedups]
    span = max(1.0, max(abs(math.log2(s)) for s in every))
    x = lambda s: left + (width - left - 20) * (0.5 + math.log2(s) / (2 * span))  # noqa: E731
    parts = [f'<svg role="img" aria-label="speedup distribution" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
             f'<line x1="{x(1):.1f}" x2="{x(1):.1f}" y1="4" y2="{height - 18}" stroke="#999" stroke-dasharray="3,3"/>']
    for tick in (2 ** -span, 1, 2 ** span):
        parts.append(f'<text x="{x(tick):.1f}" y="{height - 4}" font-size="10" text-anchor="middle">{tick:.2g}x</text>')
    for i, r in enumerate(rows):
        y = 14 + i * row
        parts.append(f'<text x="{left - 8}" y="{y + 4}" font-size="12" text-anchor="end">{escape(r.task)}</text>')
        for s in r.speedups:
            parts.append(f'<circle cx="{x(s):.1f}" cy="{y}" r="4" fill="#dd8452" fill-opacity="0.6"><title>{s:.2f}x</title></circle>')
    return "".join(parts) + "</svg>"




def _trial_links(title: str, report: Report, name: str, anchor: str) -> str:
    notes = getattr(report, name)
    if not notes:
        return ""
    items = "".join(f'<li><a href="{PAGES}/{escape(trial_page_name(n.trial_id))}">{escape(n.trial_id)}</a>: {escape(n.note)}</li>'
                    for n in notes[:SHOWN_PER_LIST])
    more = report.listed_totals.get(name, len(notes)) - min(len(notes), SHOWN_PER_LIST)
    tail = f"<li>and {more} more in <a href=\"{PAGES}/index.html\">all trials</a></li>" if more > 0 else ""
    return f'<h3 id="{anchor}">{escape(title)}</h3><ul>{items}{tail}</ul>'


def _more_tasks(total: int, shown: int = 0, what: str = "tasks") -> str:
    """Where a table stops short: report.html stays a page a browser opens at any size of run."""
    shown = shown or TASK_ROWS
    return (f"<p>The first {shown} of {total} {what}; report.json holds every one, and "
            f'<a href="{PAGES}/index.html">all trials</a> lists every trial.</p>' if total > shown else "")


OUTCOME_MARKS = {"passed": "✓", "failed": "✗", "errored": "!"}


def _row_links(trials: dict[str, str]) -> str:
    """Every trial of an arm and task, one link each (its outcome as the mark; the ID is in the
    link). Kept lean: a report of 100,000 trials has 100,000 of these."""
    links = [f'<a href="{PAGES}/{trial_page_name(escape_name(t))}">{OUTCOME_MARKS.get(o, "?")}</a>'
             for t, o in list(trials.items())[:SHOWN_PER_LIST]]
    more = f' <a href="{PAGES}/index.html">+{len(trials) - SHOWN_PER_LIST}</a>' if len(trials) > SHOWN_PER_LIST else ""
    return " ".join(links) + more


def _trials_section(report: Report) -> str:
    """Every figure's trials, each one click away: discordant pairs and failures first."""
    pairs = [(r.task, p) for r in report.paired for p in r.discordant]
    out = [f'<h2 id="trials">Trials</h2><p>Each trial has a page with its timeline (model turns, browser calls and '
           f'what came back, the page after each call) and its browser trace; <a href="{PAGES}/index.html">all trials</a>.</p>']
    if pairs:
        out.append('<h3 id="discordant-pairs">Discordant pairs (one arm passed)</h3><ul>' + "".join(
            f'<li><a href="{PAGES}/{escape(pair_page_name(p))}">{escape(p)}</a> ({escape(task)})</li>'
            for task, p in pairs[:SHOWN_PER_LIST]) + "</ul>")
    out.append(_trial_links("Failed and errored trials (stop reasons)", report, "not_passed", "not-passed"))
    out.append(_trial_links("Flagged trials", report, "flagged", "flagged"))
    out.append(_trial_links("Trials with rejected calls", report, "rejected", "rejected"))
    out.append(_trial_links("Call-cap hits", report, "cap_hits", "cap-hits"))
    out.append(_trial_links("Over the spend limit", report, "over_spend", "over-spend"))
    return "".join(out)


def render_html(report: Report) -> str:
    e = escape
    body = [f"<h1>webbench report: {e(report.experiment_id)}</h1>",
            f"<p>Suite <code>{e(report.suite)}</code>, runner <code>{e(report.runner)}</code>, {e(model_words(report))}, "
            + (f"up to {_v('attempts', str(report.attempts), 'int')} pairs per task (the sequential cap). " if report.sequential
               else f"{_v('attempts', str(report.attempts), 'int')} attempt(s) per task and arm. ") +
            f"{_v('recorded_trials', str(report.recorded_trials), 'int')} of {_v('planned_trials', str(report.planned_trials), 'int')} "
            "planned trials have a record.</p>"]
    if not report.complete:
        body.append(f'<p class="warn" id="incomplete"><strong>Incomplete run</strong>: {e("; ".join(report.incomplete_because))}.</p>')
    if report.caveat:
        body.append(f"<p><em>{e(report.caveat)}</em></p>")
    if (rv := report.reviews) is not None:
        if rv.to_check:
            body.append("<p class=warn><strong>Trials to check by hand</strong> (the reviewer found the agent broke its arm's "
                        "rules; its reading, not the verdict): " + "; ".join(
                            f'<a href="{PAGES}/{e(trial_page_name(t.trial_id))}">{e(t.trial_id)}</a>: {e(str(t.review["breach"]))}'
                            for t in rv.to_check) + "</p>")
        run = rv.run
        body.append("<h2>Review of the trials (a reading aid, not a grade)</h2>"
                    + (f"<p>{run.trials_reviewed} trial(s) and {run.pairs_reviewed} pair(s) reviewed by <code>{e(run.model)}</code>, "
                       f"{'unpriced' if run.cost_usd is None else f'${run.cost_usd:.4f}'}; the trials index filters by its "
                       "failure mode, and each trial's page shows its review.</p>" if run else "")
                    + "<table><tr><th>task</th><th>arm</th><th>failure modes</th></tr>"
                    + "".join(f"<tr><td>{e(m.task)}</td><td>{e(m.arm)}</td><td>{e(', '.join(f'{k} {v}' for k, v in m.modes.items()))}</td></tr>"
                              for m in rv.modes[:TASK_ROWS]) + "</table>")
    if q := report.sequential:
        body.append(f"<h2>Sequential run: each task stopped when decided</h2><p>{e(q.rule)}</p><p>Ran {q.trials_run} of the "
                    f"{q.trials_planned} trials planned at the cap; {q.trials_not_run} not run because their task was decided "
                    f"first ({100 * q.saved_share:.1f}% fewer than the cap). The cap buys about the power of "
                    f"{q.fixed_design_pairs} fixed pairs per task. A task stopped without an effect shows none, which is no "
                    "evidence that there is none.</p><table><tr><th>task</th><th>pairs run</th><th>decision</th></tr>"
                    + "".join(f"<tr><td>{e(t.task)}</td><td>{t.pairs_run}</td><td>{e(verdict_words(t, q.alpha_per_endpoint, q.max_pairs))}</td></tr>"
                              for t in q.tasks[:TASK_ROWS]) + "</table>")
    if report.browsers_not_deleted:
        body.append('<div class="warn" id="browsers-not-deleted"><strong>Cloud browsers that could not be deleted</strong> '
                    "(they may still be running and billed):<ul>"
                    + "".join(f"<li><code>{e(b.name)}</code>: {e(b.error)}</li>" for b in report.browsers_not_deleted)
                    + "</ul></div>")
    body.append(_trials_section(report))
    body.append("<h2>Headline: pass rate on tasks graded against the page, a pinned value or a submission</h2><table><tr><th>arm</th><th>passes</th><th>mean rate over tasks</th><th>95% CI, these tasks</th></tr>")
    body += [f"<tr><td>{e(arm)}</td>{_rate_cells(f'headline.{arm}', r)}</tr>" for arm, r in report.headline.items()]
    body.append("</table>" + _rates_plot(report.headline))
    if report.format_only:
        body.append("<h3>Format-only tasks (shape checked, not truth)</h3><table><tr><th>arm</th><th>passes</th><th>rate</th><th>95% CI</th></tr>")
        body += [f"<tr><td>{e(arm)}</td>{_rate_cells(f'format_only.{arm}', r)}</tr>" for arm, r in report.format_only.items()]
        body.append("</table>")
    if p := report.pooled:
        body.append("<h2>Pooled paired effect (graded tasks, placebo left out)</h2>"
                    f"<p>Estimand: {e(p.estimand)}. Tasks: {e(', '.join(p.task_names))}. "
                    f"{_v('pooled.pairs', str(p.pairs), 'int')} pairs in {_v('pooled.tasks', str(p.tasks), 'int')} tasks; "
                    f"mean difference over tasks {_v('pooled.difference', signed_pct(p.difference), 'signed_pct')}, 95% CI for these tasks "
                    f"{e(signed_pct(p.ci_low))} to {e(signed_pct(p.ci_high))} (p {_v('pooled.p_value', pval(p.p_value), 'p')}); "
                    f"for tasks like these {e(signed_pct(p.population_low))} to {e(signed_pct(p.population_high))}. "
                    f"Minimum detectable effect at about 80% power (approximate): "
                    f"{_v('pooled.mde', signed_pct(p.mde), 'signed_pct') if p.mde else 'none at this size'}.</p>")
    if report.paired:
        body.append("<h2>Paired control vs treatment</h2><table><tr><th>task</th><th>pairs</th><th>excluded</th><th>both</th>"
                    "<th>control only</th><th>treatment only</th><th>neither</th><th>exact McNemar p (Holm)</th><th>median speedup</th>"
                    "<th>sign-test p (Holm)</th></tr>")
        for i, r in enumerate(report.paired[:TASK_ROWS]):
            path = f"paired.{i}"
            cells = "".join(f"<td>{_v(f'{path}.{k}', str(getattr(r, k)), 'int')}</td>"
                            for k in ("pairs", "excluded", "both", "control_only", "treatment_only", "neither"))
            speed = "–" if r.median_speedup is None else f"{r.median_speedup:.2f}x"
            body.append(f"<tr><td>{e(r.task)}{' (placebo)' if r.placebo else ''}</td>{cells}"
                        f"<td>{_v(f'{path}.mcnemar_p', pval(r.mcnemar_p), 'p')} ({e(pval(r.mcnemar_p_holm))})</td><td>{e(speed)}</td>"
                        f"<td>{e(pval(r.sign_p))} ({e(pval(r.sign_p_holm))})</td></tr>")
        body.append("</table>" + _more_tasks(len(report.paired)) + _paired_plot(report) + "<h3>Speedups of pairs where both passed</h3>" + _speedup_plot(report))
    body.append("<h2>Per arm and task</h2><table><tr><th>arm</th><th>task</th><th>grading</th><th>passed</th><th>failed</th>"
                "<th>errored</th><th>missing</th><th>rate</th><th>95% CI</th><th>median agent s</th><th>median calls</th><th>stop reasons</th>"
                "<th>trials</th></tr>")
    for i, row in enumerate(report.by_arm_task[:TASK_ROWS * len(report.arms)]):
        path = f"by_arm_task.{i}"
        cells = "".join(f"<td>{_v(f'{path}.{k}', str(getattr(row, k)), 'int')}</td>" for k in ("passed", "failed", "errored", "missing"))
        reasons = ", ".join(f"{k} {v}" for k, v in row.stop_reasons.items()) or "–"
        body.append(f"<tr><td>{e(row.arm)}</td><td>{e(row.task)}</td><td>{e(row.grading)}</td>{cells}"
                    f"<td>{_v(f'{path}.rate.rate', pct(row.rate.rate), 'pct')}</td><td>{e(ci(row.rate))}</td>"
                    f"<td>{e(num(row.median_agent_sec))}</td><td>{e(num(row.median_calls))}</td><td>{e(reasons)}</td>"
                    f"<td class=trials>{_row_links(row.trials)}</td></tr>")
    body.append("</table>" + _more_tasks(len(report.by_arm_task), TASK_ROWS * len(report.arms), "rows") + "<h2>Usage</h2><table><tr><th>arm</th><th>trials</th><th>median agent s</th><th>tokens in/cached/out</th>"
                "<th>cost $ (priced)</th><th>browser calls</th><th>trials w/ rejected calls</th><th>cap hits</th></tr>")
    for i, u in enumerate(report.usage):
        path = f"usage.{i}"
        body.append(f"<tr><td>{e(u.arm)}</td><td>{_v(f'{path}.trials', str(u.trials), 'int')}</td><td>{e(num(u.median_agent_sec))}</td>"
                    f"<td>{u.input_tokens}/{u.cached_tokens}/{u.output_tokens}</td><td>{f'{u.cost_usd:.4f}' if u.priced else 'unpriced'} ({u.priced}/{u.trials})</td>"
                    f"<td>{_v(f'{path}.browser_calls', str(u.browser_calls), 'int')}</td>"
                    f"<td>{_v(f'{path}.trials_with_rejections', str(u.trials_with_rejections), 'int')}</td>"
                    f"<td>{_v(f'{path}.cap_hits', str(u.cap_hits), 'int')}</td></tr>")
    body.append("</table><h2>What each test assumes</h2><ul>" + "".join(f"<li>{e(a)}</li>" for a in report.assumptions.values()) + "</ul>")
    style = ("body{font:14px/1.45 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
             "table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
             "th{background:#f4f4f4}.warn{background:#fff3cd;padding:.5em}svg{display:block;margin:.5em 0 1.5em}")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>webbench {e(report.experiment_id)}</title>'
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")
