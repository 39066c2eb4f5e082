"""Playwright's trace.zip, as the local backend keeps it: each distinct screenshot stored once, and
the whole bounded.

Playwright's screencast writes a file per frame even when the page has not changed, and in a
local-web run half of the frames' bytes were repeats. After the trace is saved, repeats are
dropped and their events pointed at the file kept, so `playwright show-trace` and the trial pages
(viewer/frames.py) show the same pictures from half the disk. Format as written by Playwright
1.65 (trace version 10): `screencast-frame` events name their JPEG in a `file` field.

What the agent's traffic puts into a trace has no bound of its own (the bodies of its requests
and the site's responses are kept as resources: three minutes of large POSTs made a 397 MB
trace), so a resource over MAX_RESOURCE_BYTES is left out, and so is every resource once the
archive passes MAX_TRACE_BYTES; the trial is flagged with what was left out. The archive is read
and written member by member, never held whole.
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
CHUNK = 1024 * 1024


@dataclass
class Rewritten:
    repeated_frame_bytes: int = 0  # frames stored once instead of again
    left_out: int = 0  # resources left out to keep the bound
    left_out_bytes: int = 0

    @property
    def flag(self) -> str | None:
        if not self.left_out:
            return None
        return (f"the browser trace was bounded: {self.left_out} resource(s), {self.left_out_bytes // (1024 * 1024)} MB, "
                f"left out (each over {MAX_RESOURCE_BYTES // (1024 * 1024)} MB, or past {MAX_TRACE_BYTES // (1024 * 1024)} MB in all)")


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
            if not alias and path.stat().st_size <= MAX_TRACE_BYTES:
                return done
            partial = path.with_name(f".{path.name}.partial")
            written = 0
            # the event files first, whole; then the frames kept; then resources while the bound holds
            order = sorted(members, key=lambda m: (m.filename.startswith(RESOURCES), m.filename.startswith(FRAMES)))
            renames = re.compile(b'"(' + b"|".join(re.escape(k.encode()) for k in alias) + b')"') if alias else None
            with zipfile.ZipFile(partial, "w") as out:
                for member in order:
                    if member.filename in alias:
                        done.repeated_frame_bytes += member.file_size
                        continue
                    resource = member.filename.startswith(RESOURCES)
                    if resource and (member.file_size > MAX_RESOURCE_BYTES or written + member.compress_size > MAX_TRACE_BYTES):
                        done.left_out += 1
                        done.left_out_bytes += member.file_size
                        continue
                    with source.open(member) as src, out.open(member, "w", force_zip64=True) as dst:
                        if renames is not None and member.filename.endswith(".trace"):
                            for line in src:  # each frame's event names the file kept
                                dst.write(renames.sub(lambda m: b'"' + alias[m.group(1).decode()].encode() + b'"', line))
                        else:
                            shutil.copyfileobj(src, dst, CHUNK)
                    written += member.compress_size
    except (OSError, zipfile.BadZipFile):
        return Rewritten()
    os.replace(partial, path)
    return done
