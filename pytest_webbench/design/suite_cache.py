"""A suite's validated tasks, kept between runs under the digest of everything they came from.

Loading a task (its TOML, Harbor's TaskConfig, our metadata) is most of collecting a large suite:
0.18-0.25 s of 1,000 tasks (benchmarks/collection_scale.py). Every `pytest --suite` process loads
the suite, each xdist worker included, so the tasks of a suite that did not change are kept as
JSON and read back with our own models' validation, which skips Harbor's. The key is the suite's
content digest (every file under it, which the manifest records anyway), where it lies, and the
code that loads it: this package's design/ source and the versions of Harbor, pydantic and rtoml.
JSON, not pickle: whoever can write the user's cache folder must not get code run by the harness.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import TypeAdapter

FORMAT = "1"  # bump when what is kept changes shape
KEPT = 20  # suites (or versions of one) kept; the oldest go first


def content_hashes(path: Path, spec: Any) -> dict[str, str]:
    """sha256 of a suite's definition files and of each tool batch (what the manifest records, and
    the tasks are kept by); `spec` is its SuiteFile."""
    # scandir and plain strings: pathlib costs ~1 s on a 1,000-task suite, and a stat a file
    # what the directory entry already says (benchmarks/collection_scale.py)
    files = []
    folders = [(str(path), "")]
    while folders:
        folder, prefix = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                # folders as os.walk takes them (links to folders are not entered); regular files
                # only, links followed (as Path.is_file): no broken link, FIFO or socket
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        folders.append((entry.path, prefix + entry.name + "/"))
                elif _is_file(entry):
                    files.append((prefix + entry.name, entry.path))
    digest = hashlib.sha256()
    for relative, full in sorted(files, key=lambda f: f[0].split("/")):  # Path order, as hashes were made
        digest.update(relative.encode() + b"\0" + _read(full) + b"\0")
    hashes = {"suite": digest.hexdigest()}
    for site, site_spec in spec.sites.items():
        if site_spec.tool_batch:
            hashes[f"tool_batch:{site}"] = hashlib.sha256((path / site_spec.tool_batch).read_bytes()).hexdigest()
        app = (path / site_spec.app).resolve() if site_spec.app else None
        if app is not None and not app.is_relative_to(path.resolve()):  # a site of another suite's
            folder = hashlib.sha256()
            for source in sorted(app.parent.glob("*.py")):  # the app and the page shell it imports
                folder.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
            hashes[f"site:{site}"] = folder.hexdigest()
    return hashes


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:  # a link to itself: no file, as os.path.isfile says
        return False


def _read(path: str) -> bytes:
    """A file's bytes by plain system calls: a buffered file object costs a quarter of hashing a
    1,000-task suite (~13 of ~53 ms)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def kept_or_loaded(root: Path, spec: Any, task_dirs: list[Path], hashes: dict[str, str],
                   load: Callable[[], list], model: TypeAdapter) -> list:
    """The tasks as kept for these files, else `load()`, kept only when the suite's digest after
    loading is `hashes`, the one before: nothing edited meanwhile is kept."""
    key = suite_key(root, hashes, [d.name for d in task_dirs])
    if (tasks := read_tasks(key, model)) is not None:
        return tasks
    tasks = load()
    try:
        unchanged = content_hashes(root, spec) == hashes
    except OSError:  # a file gone meanwhile
        unchanged = False
    if unchanged:
        keep_tasks(key, tasks, model)
    return tasks


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-webbench" / "suites"


@functools.cache
def code_digest() -> str:
    """The code a task's validation runs: design/'s own source and the libraries it calls."""
    digest = hashlib.sha256(f"{FORMAT}\0{sys.version}\0".encode())
    for name in ("harbor", "pydantic", "pydantic-core", "rtoml"):
        digest.update(f"{name}={importlib.metadata.version(name)}\0".encode())
    design = Path(__file__).parent
    for source in sorted(design.glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()


def suite_key(root: Path, hashes: dict[str, str], choice: Any) -> str:
    """`choice`: what else the tasks depend on (the task folders' names, the case set)."""
    where = f"{os.getcwd()}\0{root}"  # the tasks hold their folders' paths, as given
    parts = [code_digest(), where, repr(sorted(hashes.items())), repr(choice)]
    return hashlib.sha256("\0\0".join(parts).encode()).hexdigest()


def read_tasks(key: str, model: TypeAdapter) -> list | None:
    """The tasks kept under `key`, or None: not kept, or unreadable (then loaded again)."""
    try:
        data = (cache_dir() / f"{key}.json").read_bytes()
    except OSError:
        return None
    try:
        return model.validate_json(data)
    except ValueError:  # a file cut short, or of a shape that changed since: a miss, never a failure
        return None


def keep_tasks(key: str, tasks: list, model: TypeAdapter) -> None:
    """Written whole or not at all; a cache that cannot be written (read-only home) is no error."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(model.dump_json(tasks))
        os.replace(tmp, folder / f"{key}.json")
        kept = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[KEPT:]:
            old.unlink(missing_ok=True)
    except OSError:
        return
