"""Renders a `Report` as Markdown (report.md) and as the terminal summary's short tables."""

from __future__ import annotations

from pathlib import Path

from ..records import atomic_write
from .build import Report, build_report_from_dir


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _ci(r) -> str:
    return "–" if r.ci_low is None else f"{_pct(r.ci_low)}–{_pct(r.ci_high)}"


def _p(p: float | None) -> str:
    return "–" if p is None else f"{p:.3g}"


def headline_lines(report: Report) -> list[str]:
    lines = [f"webbench {report.experiment_id}: suite {report.suite}, runner {report.runner}, "
             f"{report.recorded_trials}/{report.planned_trials} trials recorded"
             + ("" if report.complete else " (INCOMPLETE: errored or missing trials)")]
    for arm, rate in report.headline.items():
        lines.append(f"  {arm:<11} {rate.passes}/{rate.n} passed ({_pct(rate.rate)}, 95% CI {_ci(rate)}) on page/pinned tasks")
    for arm, rate in report.format_only.items():
        lines.append(f"  {arm:<11} {rate.passes}/{rate.n} format-only passes (shape checked, not correctness)")
    return lines


def paired_lines(report: Report) -> list[str]:
    if not report.paired:
        return []
    lines = [f"  {'task':<28} pairs both c-only t-only neither McNemar-p"]
    rows = report.paired + ([report.pooled_paired] if report.pooled_paired else [])
    for r in rows:
        mark = " (placebo)" if r.placebo else ""
        lines.append(f"  {(r.task + mark)[:28]:<28} {r.pairs:>5} {r.both:>4} {r.control_only:>6} {r.treatment_only:>6} "
                     f"{r.neither:>7} {_p(r.mcnemar_p):>9}")
    return lines


def render_markdown(report: Report) -> str:
    out = [f"# webbench report: {report.experiment_id}", "",
           f"Suite `{report.suite}`, runner `{report.runner}`, model `{report.model or 'default'}`, "
           f"{report.attempts} attempt(s) per task and arm. {report.recorded_trials} of {report.planned_trials} planned "
           "trials have a record." + ("" if report.complete else " **Incomplete run**: errored or missing trials "
                                      "count as failures in every denominator below."), "",
           "## Headline: pass rate on tasks graded against the page or a pinned value", "",
           "| arm | passes | rate | 95% Wilson CI |", "|---|---|---|---|"]
    for arm, r in report.headline.items():
        out.append(f"| {arm} | {r.passes}/{r.n} | {_pct(r.rate)} | {_ci(r)} |")
    if report.format_only:
        out += ["", "Format-only tasks (the answer's shape is checked, not its truth), reported apart:", "",
                "| arm | passes | rate |", "|---|---|---|"]
        for arm, r in report.format_only.items():
            out.append(f"| {arm} | {r.passes}/{r.n} | {_pct(r.rate)} |")
    out += ["", "## Per arm and task", "",
            "| arm | task | grading | passed | failed | errored | missing | rate | 95% CI | stop reasons |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for row in report.by_arm_task:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(row.stop_reasons.items())) or "–"
        name = row.task + (" (placebo)" if row.placebo else "")
        out.append(f"| {row.arm} | {name} | {row.grading} | {row.passed} | {row.failed} | {row.errored} | {row.missing} "
                   f"| {_pct(row.rate.rate)} | {_ci(row.rate)} | {reasons} |")
    if report.paired:
        out += ["", "## Paired control vs treatment", "",
                "| task | pairs | both | control only | treatment only | neither | exact McNemar p | median speedup | sign-test p |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in report.paired + ([report.pooled_paired] if report.pooled_paired else []):
            speed = "–" if r.median_speedup is None else f"{r.median_speedup:.2f}x ({r.treatment_faster} faster, {r.control_faster} slower)"
            name = r.task + (" (placebo)" if r.placebo else "")
            out.append(f"| {name} | {r.pairs} | {r.both} | {r.control_only} | {r.treatment_only} | {r.neither} "
                       f"| {_p(r.mcnemar_p)} | {speed} | {_p(r.sign_p)} |")
        out += ["", "The pooled row treats pairs as independent across tasks; attempts are nested in tasks, so read it "
                "as a screening figure until a task-clustered interval is reported."]
    if report.broken_pairs:
        out += ["", f"Pairs broken by selection (one arm deselected, left out of the paired table): {', '.join(report.broken_pairs)}"]
    out += ["", f"Browser calls rejected by the proxy: {report.rejected_calls}; trials that hit the call cap: {report.cap_hits}."]
    if report.problems:
        out += ["", "## Problems reading the results", ""] + [f"- {p}" for p in report.problems]
    out += ["", "## What each test assumes", ""] + [f"- {v}" for v in report.assumptions.values()]
    if report.attempts < 5:
        out += ["", f"With {report.attempts} attempt(s) per task this run can only screen for large effects."]
    return "\n".join(out) + "\n"


def write_report(experiment_dir: Path) -> Report:
    report = build_report_from_dir(experiment_dir)
    atomic_write(experiment_dir / "report.json", report.model_dump_json(indent=2))
    atomic_write(experiment_dir / "report.md", render_markdown(report))
    return report
