"""Page checks re-run on saved pages.

Every page-graded trial keeps the page its check read: `page-check.html` (the DOM as the check
left it) and `page-check.json` (URL, value) in the trial's folder. After a task's page script
changes, or to test a grader on the pages a live run met, re-run the task's current check on each
saved page:

    python -m pytest_webbench.grading.snapshots results/EXPERIMENT_ID

Each page is served on 127.0.0.1 at its original path, with its own scripts blocked (they would
call the live site), and the check runs in local Chromium; the trial is graded again with its
recorded answer, and every change of value or outcome is listed (exit 1 if any).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from ..results.records import atomic_write

SNAPSHOT_HTML = "page-check.html"
SNAPSHOT_META = "page-check.json"
# The saved page is inert: its scripts would call the live site (and change the DOM under the check).
INERT = {"Content-Security-Policy": "script-src 'none'; connect-src 'none'"}


class SavedPageCheck(BaseModel):
    trial_id: str
    task: str
    url: str
    value: Any = None


class Recheck(BaseModel):
    trial_id: str
    outcome_before: str
    outcome_now: str
    value_before: Any = None
    value_now: Any = None
    detail: str = ""

    @property
    def changed(self) -> bool:
        return self.outcome_before != self.outcome_now or self.value_before != self.value_now


def save_page_check(trial_dir: Path, saved: SavedPageCheck, html: str | None) -> None:
    if html is None:
        return
    trial_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(trial_dir / SNAPSHOT_HTML, html)
    atomic_write(trial_dir / SNAPSHOT_META, saved.model_dump_json(indent=2))


async def serve_saved_page(html: str) -> asyncio.AbstractServer:
    """The saved page for any GET, its scripts blocked, on 127.0.0.1 (one page, so no framework)."""
    body = html.encode("utf-8")
    head = ("HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in INERT.items())
            + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(head + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", 0)


def recheck_saved_pages(experiment_dir: Path) -> list[Recheck]:
    """Runs each saved page's task check again, and grades the trial again with it."""
    return asyncio.run(_recheck(experiment_dir))


async def _recheck(experiment_dir: Path) -> list[Recheck]:
    from ..browsers.local import LocalBackend
    from ..design.suite import load_suite
    from ..results.records import read_manifest, read_trial_records
    from .grade import grade_trial

    manifest = read_manifest(experiment_dir)
    tasks = {t.name: t for t in load_suite(Path(manifest.suite_path), manifest.case_set, manifest.ungradable).tasks}
    records = {r.trial_id: r for r in read_trial_records(experiment_dir)[0]}
    backend = LocalBackend()
    out: list[Recheck] = []
    try:
        for meta_path in sorted((experiment_dir / "jobs").glob(f"*/*/{SNAPSHOT_META}")):
            saved = SavedPageCheck.model_validate_json(meta_path.read_text(encoding="utf-8"))
            record, task = records.get(saved.trial_id), tasks.get(saved.task)
            if record is None or task is None or task.meta.page is None:
                continue
            server = await serve_saved_page((meta_path.parent / SNAPSHOT_HTML).read_text(encoding="utf-8"))
            parts = urlsplit(saved.url)
            url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}{parts.path}" + (f"?{parts.query}" if parts.query else "")
            session = f"recheck-{saved.trial_id}"
            try:
                await backend.create_session(session, site_urls=[url])
                try:
                    value = await asyncio.wait_for(backend.read_page(session, url, task.meta.page.script), 120)
                finally:
                    await backend.delete_session(session)
            finally:
                server.close()
            grade = grade_trial(task.meta, record.answer_raw, record.calls.forwarded, cap_hit=record.calls.cap_hit,
                                page_value=value)
            now = "passed" if grade.passed else "failed"
            before = record.outcome if record.outcome in ("passed", "failed") else f"{record.outcome} ({record.stop_reason})"
            out.append(Recheck(trial_id=saved.trial_id, outcome_before=before, outcome_now=now,
                               value_before=saved.value, value_now=value, detail=grade.detail))
    finally:
        await backend.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_webbench.grading.snapshots", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment_dir", type=Path)
    args = parser.parse_args(argv)
    results = recheck_saved_pages(args.experiment_dir)
    for r in results:
        mark = "CHANGED" if r.changed else "same"
        print(f"{mark:8} {r.trial_id}: {r.outcome_before} -> {r.outcome_now}; value {r.value_before!r} -> {r.value_now!r}")
    print(f"{len(results)} saved page(s) checked, {sum(r.changed for r in results)} changed")
    return 1 if any(r.changed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
