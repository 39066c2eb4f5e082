"""Shared page shell for the bundled sites: plain server-rendered HTML, no external assets."""

from __future__ import annotations

import html
import json
import os

from starlette.responses import HTMLResponse

STYLE = """
body { font-family: sans-serif; margin: 0; color: #1f2328; }
header { background: #24292f; color: #fff; padding: 10px 20px; display: flex; gap: 20px; align-items: center; }
header a { color: #fff; text-decoration: none; font-weight: bold; }
header form { margin-left: auto; }
main { padding: 20px; max-width: 980px; }
table { border-collapse: collapse; width: 100%; }
td, th { border-bottom: 1px solid #d0d7de; padding: 6px 8px; text-align: left; }
.pager a, .pager span { margin-right: 8px; }
.label { border-radius: 10px; padding: 1px 8px; font-size: 12px; background: #ddf4ff; }
.merged { background: #8250df; color: #fff; } .closed { background: #cf222e; color: #fff; } .open { background: #1a7f37; color: #fff; }
.card { border: 1px solid #d0d7de; border-radius: 6px; padding: 10px; margin: 8px 0; }
aside.infobox { float: right; border: 1px solid #a2a9b1; background: #f8f9fa; padding: 8px; margin: 0 0 10px 10px; width: 260px; }
"""


def esc(value: object) -> str:
    return html.escape(str(value))


def page(title: str, brand: str, nav: str, body: str, tools_js: str = "") -> HTMLResponse:
    """`tools_js` registers the site's own WebMCP tools (its native tools) on every page."""
    script = ""
    if tools_js:
        script = f"<script>if (document.modelContext) {{ {tools_js} }}</script>"
    return HTMLResponse(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
        f"<style>{STYLE}</style></head><body><header><a href='/'>{esc(brand)}</a>{nav}</header>"
        f"<main>{body}</main>{script}</body></html>"
    )


def pager(base: str, page_no: int, pages: int, extra: str = "") -> str:
    links = []
    if page_no > 1:
        links.append(f"<a rel='prev' href='{base}?page={page_no - 1}{extra}'>Previous</a>")
    links.append(f"<span>Page {page_no} of {max(pages, 1)}</span>")
    if page_no < pages:
        links.append(f"<a rel='next' href='{base}?page={page_no + 1}{extra}'>Next</a>")
    return f"<div class='pager'>{''.join(links)}</div>"


def js(value: object) -> str:
    return json.dumps(value)


def paginate(items: list, page_no: int, per_page: int) -> tuple[list, int]:
    pages = (len(items) + per_page - 1) // per_page
    return items[(page_no - 1) * per_page : page_no * per_page], pages


def page_number(request) -> int:
    try:
        return max(1, int(request.query_params.get("page", "1")))
    except ValueError:
        return 1


def record_write(site: str, kind: str, data: dict) -> None:
    """A write that reached the site (an account made, an issue opened): appended to the file
    SITE_WRITES_LOG names, so a test can check that an intercepted submission never arrived."""
    if log := os.environ.get("SITE_WRITES_LOG"):
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"site": site, "kind": kind, **data}) + "\n")
