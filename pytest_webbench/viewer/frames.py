"""Screenshots out of a Playwright trace.zip, each with the wall-clock time it was taken.

The trace's `trace.trace` (JSON lines) opens with a `context-options` event holding both clocks
(`wallTime`, `monotonicTime`, in ms); each `screencast-frame` event has a monotonic `timestamp` and
names its JPEG in the archive. Format as written by Playwright 1.65 (trace version 10).
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Frame:
    wall: float  # seconds since the epoch
    member: str  # its JPEG in the archive


@dataclass
class TraceContents:
    frames: list[Frame]
    actions: list[str]  # the Playwright calls recorded, as Class.method


def read_trace(path: Path) -> TraceContents | None:
    """None when there is no readable trace (tracing was off, or the trial ended before it saved)."""
    try:
        with zipfile.ZipFile(path) as archive:
            lines = archive.read("trace.trace").decode("utf-8", "replace").splitlines()
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    offset = None  # wall ms minus monotonic ms
    frames, actions = [], []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        kind = event.get("type")
        if kind == "context-options" and offset is None:
            offset = float(event.get("wallTime", 0)) - float(event.get("monotonicTime", 0))
        elif kind == "before":
            actions.append(f"{event.get('class')}.{event.get('method')}")
        elif kind == "screencast-frame" and offset is not None:
            member = event.get("file") or (f"resources/{event['sha1']}" if event.get("sha1") else None)
            if member:
                frames.append(Frame((offset + float(event.get("timestamp", 0))) / 1000, member))
    return TraceContents(sorted(frames, key=lambda f: f.wall), actions)


def nearest_frame(frames: list[Frame], at: float) -> Frame | None:
    """The first frame taken at or after `at` (the page once a call has returned), else the last."""
    for frame in frames:
        if frame.wall >= at:
            return frame
    return frames[-1] if frames else None


def frame_bytes(path: Path, member: str) -> bytes | None:
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.read(member)
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


THUMBNAIL_WIDTH = 400  # near twice the 220 px a page shows a frame at; half of 800, so JPEG draft decodes straight to it


def thumbnail(data: bytes) -> bytes | None:
    """A small JPEG of a trace's screenshot for the pages to link (a fifth of its bytes); the full
    frame stays in trace.zip. JPEG's draft mode decodes at the reduced size, the cheap way down."""
    import io

    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
        if image.width > THUMBNAIL_WIDTH:
            image.draft("RGB", (THUMBNAIL_WIDTH, image.height * THUMBNAIL_WIDTH // image.width))
            image = image.convert("RGB")
            if image.width > THUMBNAIL_WIDTH:
                image = image.resize((THUMBNAIL_WIDTH, image.height * THUMBNAIL_WIDTH // image.width))
        out = io.BytesIO()
        image.convert("RGB").save(out, "JPEG", quality=70)
    except (OSError, UnidentifiedImageError, ValueError):
        return None
    return out.getvalue()

