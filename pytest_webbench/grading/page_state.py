"""Why a trial may not have measured the agent: the page it was left on.

After the agent stops, the harness reads the trial's current page (URL, title, the document's
HTTP status from Navigation Timing, which bot-defence vendors' markers its DOM holds) and labels
it: a bot-block or challenge page, a site error (HTTP 5xx), or ordinary. The label comes from the
page's structure, never from words in its text: an ordinary page that talks about "access denied"
or "unusual traffic" is ordinary. A trial left on a block or error page is errored whatever its
grade (verdict.py): the site, not the agent, decided it. So the agent cannot dress its own page
as one, or go to one, a block or error label stands only where the harness's own fresh load of the
trial's start page shows it too (trial/browser_session.py).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

PageLabel = Literal["ok", "bot_block", "site_error"]

# Elements that only a bot defence's challenge or block page has, by vendor.
VENDOR_MARKERS = {
    "cloudflare": '#challenge-form, #challenge-running, #cf-challenge-running, #cf-please-wait, [id^="cf-chl"], '
                  'script[src*="/cdn-cgi/challenge-platform/"], .cf-error-details',
    "perimeterx": '#px-captcha, [id^="px-captcha"], script[src*="captcha.px-cdn"], script[src*="px-cloud.net"]',
    "datadome": 'iframe[src*="captcha-delivery.com"], script[src*="ct.captcha-delivery.com"]',
    "imperva": 'iframe[src*="_Incapsula_Resource"], script[src*="_Incapsula_Resource"]',
    "ddos-guard": 'script[src*="ddos-guard"], #ddg-captcha',
}
# A captcha is a wall only when it is nearly all the page holds (a login form's captcha is not).
CAPTCHA = 'iframe[src*="recaptcha/api2/anchor"], iframe[src*="hcaptcha.com"], iframe[src*="challenges.cloudflare.com"], .g-recaptcha, .h-captcha'
WALL_TEXT_CHARS = 600
# Titles of challenge and block pages, matched whole (an article titled "Access denied: ..." is not one).
BLOCK_TITLE = re.compile(
    r"just a moment\.\.\.|attention required! \| cloudflare|access denied|you have been blocked|pardon our interruption|"
    r"are you a robot\??|verify you are (a )?human|robot check|security check|one more step|ddos-guard|"
    r"access to this page has been denied\.?|request unsuccessful\. incapsula incident id: .*",
    re.IGNORECASE,
)
BLOCK_STATUS = (403, 429)
# A server's own error page, when Navigation Timing gives no status: its whole title is the status line.
ERROR_TITLE = re.compile(r"5\d\d [A-Za-z -]+")

PAGE_STATE_SCRIPT = """
const nav = performance.getEntriesByType('navigation')[0];
const vendors = %s;
const markers = Object.entries(vendors).filter(([, sel]) => document.querySelector(sel)).map(([name]) => name);
const text = document.body ? document.body.innerText : '';
if (document.querySelector(%s) && text.trim().length < %d) markers.push('captcha-wall');
return {
  url: location.href,
  title: document.title,
  status: nav && nav.responseStatus ? nav.responseStatus : null,
  markers,
  text: text.slice(0, 3000),
};
""" % (json.dumps(VENDOR_MARKERS), json.dumps(CAPTCHA), WALL_TEXT_CHARS)


class PageState(BaseModel):
    url: str | None = None
    title: str = ""
    status: int | None = None
    markers: list[str] = Field(default_factory=list)  # bot-defence vendors whose elements the page holds
    text: str = ""  # kept for the record; never used to label

    @property
    def label(self) -> PageLabel:
        if self.status in BLOCK_STATUS or self.markers or BLOCK_TITLE.fullmatch(self.title.strip()):
            return "bot_block"
        if (self.status is not None and self.status >= 500) or ERROR_TITLE.fullmatch(self.title.strip()):
            return "site_error"
        return "ok"

    def describe(self) -> str:
        why = [f"HTTP {self.status}"] if self.status else []
        why += [f"{m} markers" for m in self.markers]
        return f"{self.label.replace('_', ' ')} page {self.title!r} at {self.url} ({', '.join(why) or 'its title'})"


def read_page_state(value: Any) -> PageState | None:
    if not isinstance(value, dict):
        return None
    try:
        return PageState.model_validate(value)
    except ValueError:
        return None
