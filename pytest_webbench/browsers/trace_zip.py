"""Playwright's trace.zip, as the local backend keeps it: each distinct screenshot stored once.

Playwright's screencast writes a file per frame even when the page has not changed, and in a
local-web run half of the frames' bytes were repeats. After the trace is saved, repeats are
dropped and their events pointed at the file kept, so `playwright show-trace` and the trial pages
(viewer/frames.py) show the same pictures from half the disk. Format as written by Playwright
1.65 (trace version 10): `screencast-frame` events name their JPEG in a `file` field.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

FRAMES = "screencast/"


def store_frames_once(path: Path) -> int:
    """Rewrites the archive without repeated frames; returns the bytes of frames dropped (0, and the
    file untouched, when nothing repeats or the archive cannot be read)."""
    try:
        with zipfile.ZipFile(path) as source:
            members = source.infolist()
            data = {m.filename: source.read(m) for m in members}
    except (OSError, zipfile.BadZipFile):
        return 0
    kept: dict[bytes, str] = {}
    alias: dict[str, str] = {}
    for member in members:
        if member.filename.startswith(FRAMES):
            digest = hashlib.sha1(data[member.filename]).digest()
            if digest in kept:
                alias[member.filename] = kept[digest]
            else:
                kept[digest] = member.filename
    if not alias:
        return 0
    partial = path.with_name(f".{path.name}.partial")
    with zipfile.ZipFile(partial, "w") as out:
        for member in members:
            if member.filename in alias:
                continue
            content = data[member.filename]
            if member.filename.endswith(".trace"):  # the event lines: each frame's event names the file kept
                for repeat, first in alias.items():
                    content = content.replace(f'"{repeat}"'.encode(), f'"{first}"'.encode())
            out.writestr(member, content)  # the member's own compression, as Playwright chose it
    os.replace(partial, path)
    return sum(len(data[name]) for name in alias)
