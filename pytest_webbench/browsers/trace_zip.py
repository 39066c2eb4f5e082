"""Playwright's trace.zip, as the local backend keeps it: each distinct screenshot stored once, and
the whole bounded.

Playwright's screencast writes a file per frame even when the page has not changed, and in a
local-web run half of the frames' bytes were repeats. After the trace is saved, repeats are
dropped and their events pointed at the file kept, so `playwright show-trace` and the trial pages
(viewer/frames.py) show the same pictures from half the disk. Format as written by Playwright
1.65 (trace version 10): `screencast-frame` events name their JPEG in a `file` field.

What the agent's traffic puts into a trace has no bound of its own (the bodies of its requests
and the site's responses are kept as resources: three minutes of large POSTs made a 397 MB
trace; a page's console lines go into the event file), so a resource over MAX_RESOURCE_BYTES and
an event line over MAX_EVENT_BYTES are left out, and so is everything once the archive's
members pass MAX_TRACE_BYTES (event lines first, then frames, then resources); the trial is
flagged with what was left out. The archive is read and written member by member, and an event
file line by line, never held whole.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

FRAMES = "screencast/"
RESOURCES = "resources/"
MAX_TRACE_BYTES = 64 * 1024 * 1024
MAX_RESOURCE_BYTES = 2 * 1024 * 1024
MAX_EVENT_BYTES = 1024 * 1024  # one line of an event file (a console message the page wrote, a body)
CHUNK = 1024 * 1024


@dataclass
class Rewritten:
    repeated_frame_bytes: int = 0  # frames stored once instead of again
    left_out: int = 0  # resources, frames and event lines left out to keep the bound
    left_out_bytes: int = 0

    @property
    def flag(self) -> str | None:
        if not self.left_out:
            return None
        return (f"the browser trace was bounded: {self.left_out} part(s), {self.left_out_bytes // (1024 * 1024)} MB, left out "
                f"(a resource over {MAX_RESOURCE_BYTES // (1024 * 1024)} MB, an event over {MAX_EVENT_BYTES // (1024 * 1024)} MB, "
                f"or past {MAX_TRACE_BYTES // (1024 * 1024)} MB in all)")

    def leave_out(self, size: int) -> None:
        self.left_out += 1
        self.left_out_bytes += size


def _copy_events(src, dst, rename, done: Rewritten, room: int) -> int:
    """An event file line by line, each read to MAX_EVENT_BYTES at most: a longer line (or one past
    the archive's room) is left out whole. Returns the bytes written."""
    written = 0
    while line := src.readline(MAX_EVENT_BYTES + 1):
        if len(line) > MAX_EVENT_BYTES and not line.endswith(b"\n"):
            size = len(line)
            while (rest := src.readline(CHUNK)) and not rest.endswith(b"\n"):  # to the end of that line
                size += len(rest)
            done.leave_out(size + len(rest))
            continue
        if written + len(line) > room:
            done.leave_out(len(line))
            continue
        line = rename(line) if rename is not None else line
        dst.write(line)
        written += len(line)
    return written


def _digest(source: zipfile.ZipFile, member: zipfile.ZipInfo) -> bytes:
    sha = hashlib.sha1()
    with source.open(member) as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
    return sha.digest()


def store_frames_once(path: Path) -> int:
    """The archive without repeated frames (and bounded, `rewrite_trace`); the bytes of frames dropped."""
    return rewrite_trace(path).repeated_frame_bytes


def rewrite_trace(path: Path) -> Rewritten:
    """Rewrites the archive without repeated frames and within its bound; the file is untouched
    where there is nothing to do or it cannot be read."""
    done = Rewritten()
    try:
        with zipfile.ZipFile(path) as source:
            members = source.infolist()
            kept: dict[bytes, str] = {}
            alias: dict[str, str] = {}
            for member in members:
                if member.filename.startswith(FRAMES):
                    digest = _digest(source, member)
                    if digest in kept:
                        alias[member.filename] = kept[digest]
                    else:
                        kept[digest] = member.filename
            # sizes unpacked (a deflated archive can be small and hold much); an archive within its
            # bound and without repeats is left as it is, its event lines then within the bound too
            within = sum(m.file_size for m in members) <= MAX_TRACE_BYTES and not any(
                m.file_size > MAX_RESOURCE_BYTES for m in members if m.filename.startswith(RESOURCES))
            if not alias and within:
                return done
            partial = path.with_name(f".{path.name}.partial")
            written = 0  # bytes of members kept, before compression: the bound holds whatever they compress to
            # the event files first, line by line; then the frames kept; then resources, while the bound holds
            order = sorted(members, key=lambda m: (m.filename.startswith(RESOURCES), m.filename.startswith(FRAMES)))
            pattern = re.compile(b'"(' + b"|".join(re.escape(k.encode()) for k in alias) + b')"') if alias else None
            rename = (lambda line: pattern.sub(lambda m: b'"' + alias[m.group(1).decode()].encode() + b'"', line)) \
                if pattern is not None else None  # each frame's event names the file kept
            try:
                with zipfile.ZipFile(partial, "w") as out:
                    for member in order:
                        if member.filename in alias:
                            done.repeated_frame_bytes += member.file_size
                            continue
                        events = not member.filename.startswith((RESOURCES, FRAMES))
                        too_big = member.filename.startswith(RESOURCES) and member.file_size > MAX_RESOURCE_BYTES
                        if too_big or (not events and written + member.file_size > MAX_TRACE_BYTES):
                            done.leave_out(member.file_size)
                            continue
                        with source.open(member) as src, out.open(member, "w", force_zip64=True) as dst:
                            if events:
                                written += _copy_events(src, dst, rename if member.filename.endswith(".trace") else None,
                                                        done, MAX_TRACE_BYTES - written)
                            else:
                                shutil.copyfileobj(src, dst, CHUNK)
                                written += member.file_size
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
    except (OSError, zipfile.BadZipFile):
        return Rewritten()
    os.replace(partial, path)
    return done
