"""Why a trial that did not pass may not be the agent's fault: the page it was left on.

After the agent stops, the harness reads the trial's current page (URL, title, the document's
HTTP status from Navigation Timing, the start of its text) and labels it: a bot-block or
challenge page, a site error (HTTP 5xx, or an error page), or ordinary. A failed trial whose
page is a bot block or a site error gets that stop reason instead of "wrong answer": the report
then separates what the agent got wrong from what the site refused. A pass is never changed.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel

PageLabel = Literal["ok", "bot_block", "site_error"]

PAGE_STATE_SCRIPT = """
const nav = performance.getEntriesByType('navigation')[0];
return {
  url: location.href,
  title: document.title,
  status: nav && nav.responseStatus ? nav.responseStatus : null,
  text: (document.body ? document.body.innerText : '').slice(0, 3000),
};
"""

# Challenge and block pages of the common bot defences (Cloudflare, Akamai, PerimeterX, DataDome,
# Imperva, reCAPTCHA/hCaptcha walls) and generic "unusual traffic" pages.
BOT_BLOCK = re.compile(
    r"just a moment\.\.\.|checking your browser|attention required! \| cloudflare|verify you are (a )?human|"
    r"are you a robot|unusual traffic|access denied|request unsuccessful\. incapsula|px-captcha|"
    r"press (and|&) hold|captcha-delivery|datadome|please enable cookies and javascript|cf-chl|"
    r"complete the security check|bot detection",
    re.IGNORECASE,
)
SITE_ERROR = re.compile(
    r"\b(500 internal server error|502 bad gateway|503 service (temporarily )?unavailable|504 gateway time-?out|"
    r"internal server error|service unavailable|bad gateway)\b",
    re.IGNORECASE,
)


class PageState(BaseModel):
    url: str | None = None
    title: str = ""
    status: int | None = None
    text: str = ""

    @property
    def label(self) -> PageLabel:
        head = f"{self.title}\n{self.text[:1500]}"
        if self.status in (403, 429) or BOT_BLOCK.search(head):
            return "bot_block"
        if (self.status is not None and self.status >= 500) or SITE_ERROR.search(self.title):
            return "site_error"
        return "ok"


def read_page_state(value: Any) -> PageState | None:
    if not isinstance(value, dict):
        return None
    try:
        return PageState.model_validate(value)
    except ValueError:
        return None


def refine_stop_reason(stop_reason: str | None, state: PageState | None) -> str | None:
    """A failed trial left on a bot-block or error page is labelled by it; others keep theirs."""
    if stop_reason in ("wrong_answer", "no_answer", "unreadable_page") and state is not None and state.label != "ok":
        return state.label
    return stop_reason
