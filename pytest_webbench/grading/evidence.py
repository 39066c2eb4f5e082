"""Did a permitted browser call show the answer? The proxy watches each call's result for the forms
a task's pinned values take (`answer_forms`), and logs which call first showed each field. A pass
whose answer no permitted call ever showed is flagged, so it is never a clean pass: the answer came
from somewhere other than what the browser showed (or from a screenshot, whose pixels the proxy
does not read, which the flag says). Page-graded answers need none: the page check is the evidence; nor do fields a task marks
`derived` (a sum, a count no single page shows).
"""

from __future__ import annotations

from typing import Any

from ..design.suite import WebbenchMeta


def _forms(value: Any) -> list[str]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, list):
        return [form for item in value for form in _forms(item)]
    if isinstance(value, (int, float)):
        forms = {str(value), f"{value:,}"}
        if isinstance(value, float):
            forms |= {f"{value:.2f}", f"{value:,.2f}"}
            cents = round(value * 100)
            if abs(cents - value * 100) < 1e-6:
                forms.add(str(cents))  # a price an API gives in cents
            if value == int(value):
                forms.add(str(int(value)))
        return sorted(forms)
    text = str(value).strip()
    return [text.casefold()] if text else []


def answer_forms(meta: WebbenchMeta) -> dict[str, list[str]]:
    """Answer field -> the casefolded texts its pinned value may appear as in a call's result."""
    if meta.page is not None:
        return {}
    out = {}
    for key, rule in meta.answer.items():
        if rule.derived:
            continue
        values = [rule.equals] if rule.equals is not None else list(rule.one_of or [])
        if forms := [f for v in values for f in _forms(v)]:
            out[key] = forms
    return out


def unseen_flag(meta: WebbenchMeta, seen: set[str], screenshots: int) -> str | None:
    missing = [key for key in answer_forms(meta) if key not in seen]
    if not missing:
        return None
    note = f" ({screenshots} screenshot(s) were taken, whose pixels the proxy does not read)" if screenshots else ""
    return (f"answer without evidence: no permitted browser call's result showed {', '.join(missing)}{note}; "
            "not a clean pass")
