"""How the report's figures are written, shared by every form (Markdown, terminal, HTML,
comparison), so the arrows run one way: build -> format -> render/html/compare -> write."""

from __future__ import annotations

from .rates import Rate

# Tasks a per-task table or plot of report.md and report.html shows: both stay pages a reader can
# open at any size of run; report.json holds every row.
TASK_ROWS = 300


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def ci(r: Rate) -> str:
    return "–" if r.ci_low is None else f"{pct(r.ci_low)}–{pct(r.ci_high)}"


def population_ci(r: Rate) -> str:
    return "–" if r.population_low is None else f"{pct(r.population_low)}–{pct(r.population_high)}"


def pval(p: float | None) -> str:
    return "–" if p is None else f"{p:.3g}"


def num(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def signed_pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.0f} pts"
