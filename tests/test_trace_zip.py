"""browsers/trace_zip.py: a trial's trace.zip keeps each frame once and stays within its bound,
however much the agent's traffic put into it, read and written member by member."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from pytest_webbench.browsers import trace_zip


def _trace(path: Path, resources: dict[str, int]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("trace.trace", b'{"type":"screencast-frame","file":"screencast/b.jpeg"}\n'
                                  b'{"type":"screencast-frame","file":"screencast/a.jpeg"}\n')
        z.writestr("screencast/a.jpeg", b"frame-one")
        z.writestr("screencast/b.jpeg", b"frame-one")  # a repeat of a
        for name, size in resources.items():
            z.writestr(f"resources/{name}", os.urandom(size))  # incompressible, as a body can be


def test_a_trace_past_its_bound_leaves_resources_out_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_zip, "MAX_TRACE_BYTES", 300_000)
    monkeypatch.setattr(trace_zip, "MAX_RESOURCE_BYTES", 150_000)
    path = tmp_path / "trace.zip"
    _trace(path, {"small1": 1000, "huge": 200_000, "mid1": 120_000, "mid2": 120_000, "mid3": 120_000})
    done = trace_zip.rewrite_trace(path)
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        events = z.read("trace.trace")
    assert "resources/huge" not in names and "resources/small1" in names  # over the per-resource bound
    assert sum(n.startswith("resources/mid") for n in names) == 2  # the third would pass the archive's bound
    assert path.stat().st_size < 300_000 + 50_000
    assert (done.left_out, done.repeated_frame_bytes) == (2, len(b"frame-one"))
    assert "screencast/b.jpeg" not in names and b'"screencast/b.jpeg"' not in events and events.count(b'"screencast/a.jpeg"') == 2
    assert done.flag and "2 part(s)" in done.flag


def test_event_lines_past_their_bound_are_left_out_and_count_toward_the_archive_s(tmp_path, monkeypatch):
    """A page's console can fill the event file (a 288 MB trace.trace pushed every resource out
    and kept itself): a line over MAX_EVENT_BYTES is left out, and event lines count toward the bound."""
    monkeypatch.setattr(trace_zip, "MAX_TRACE_BYTES", 300_000)
    monkeypatch.setattr(trace_zip, "MAX_EVENT_BYTES", 50_000)
    path = tmp_path / "trace.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        lines = [b'{"type":"console","text":"' + b"x" * 60_000 + b'"}\n'] + [b'{"type":"log","n":%d}\n' % i for i in range(5)]
        lines += [b'{"type":"console","text":"' + b"y" * 40_000 + b'"}\n'] * 10  # 400 KB of lines within their own bound
        z.writestr("trace.trace", b"".join(lines))
        z.writestr("resources/page.html", b"<p>kept if there is room</p>")
        z.writestr("screencast/a.jpeg", b"one")
        z.writestr("screencast/b.jpeg", b"one")  # a repeat: the archive is rewritten, its lines read
    done = trace_zip.rewrite_trace(path)
    with zipfile.ZipFile(path) as z:
        events = z.read("trace.trace")
        kept = sum(m.file_size for m in z.infolist())
        assert "resources/page.html" in z.namelist()  # the room the event lines left
    assert b"x" * 60_000 not in events and events.count(b'"type":"log"') == 5  # the long line out, the rest kept in order
    assert kept <= 300_000 and events.count(b"y" * 40_000) == 7  # seven lines fit the bound, three did not
    assert "screencast/b.jpeg" not in z.namelist()
    assert done.left_out == 1 + 3, done
    assert not list(tmp_path.glob(".*.partial"))


def test_a_trace_within_its_bound_and_without_repeats_is_untouched(tmp_path):
    path = tmp_path / "trace.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("trace.trace", b"{}\n")
        z.writestr("screencast/a.jpeg", b"one")
        z.writestr("resources/r", b"x" * 1000)
    before = path.read_bytes()
    done = trace_zip.rewrite_trace(path)
    assert path.read_bytes() == before and done.flag is None and done.repeated_frame_bytes == 0
