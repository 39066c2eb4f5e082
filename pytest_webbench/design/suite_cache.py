"""A suite's loaded tasks kept between runs, under the digest of what loading them reads; and the
suite's content digest, which the manifest records.

Loading a task (its TOML, Harbor's TaskConfig, our metadata) is most of collecting a large suite:
0.18-0.25 s of 1,000 tasks (benchmarks/collection_scale.py), and every `pytest --suite` process
loads the suite, each xdist worker included. So the tasks are kept as JSON and read back with our
own models' validation, which skips Harbor's. The key is every input of `load_task` (each task
folder's path, the bytes of the files it reads and the files whose presence it checks: the
suite's `task_inputs`, held to what `load_task` opens by a test), the suite file as validated,
and the loading code: this package's design/ source and the versions of Harbor, pydantic and
rtoml. Kept only where the JSON reads back equal (a TOML date or a NaN does not) and loading warned
of nothing (a warning is for every run to see).

The cache folder (`$XDG_CACHE_HOME` or `~/.cache`, as ClawBench's converted cases) is trusted as
the user's home is: whoever writes it can change a task, as whoever writes the suite can. JSON,
not pickle, so reading it runs no code; a task read back must name the folder it was loaded from.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import TypeAdapter

FORMAT = "1"  # bump when what is kept changes shape
KEPT = 20  # suites (or versions of one) kept; the oldest go first


def content_hashes(path: Path, spec: Any, files_read: dict[str, bytes] | None = None) -> dict[str, str]:
    """sha256 of a suite's definition files and of each tool batch, what the manifest records;
    `spec` is its SuiteFile, `files_read` the bytes of files loading read, by path (not read again)."""
    # scandir and plain strings: pathlib costs ~1 s on a 1,000-task suite, and a stat a file
    # what the directory entry already says (benchmarks/collection_scale.py)
    files = []
    folders = [(str(path), "")]
    while folders:
        folder, prefix = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:  # a folder that cannot be read is passed over, as os.walk does
            continue
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
        content = files_read.get(full) if files_read else None
        digest.update(relative.encode() + b"\0" + (read_file(full) if content is None else content) + b"\0")
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


def read_file(path: str) -> bytes:
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


def kept_or_loaded(task_dirs: list[Path], suite_json: str, inputs_of: Callable[[Path], list],
                   load: Callable[[], list], model: TypeAdapter, files_read: dict[str, bytes] | None = None) -> list:
    """The tasks kept for exactly these inputs, else `load()`, kept when its inputs did not change
    while it ran, it warned of nothing and its JSON reads back equal. The files the key read are
    put in `files_read` by path."""
    key = tasks_key(task_dirs, suite_json, inputs_of, files_read)
    if key is not None and (tasks := read_tasks(key, model)) is not None and \
            [(t.name, t.path) for t in tasks] == [(d.name, d) for d in task_dirs]:
        return tasks
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tasks = load()
    for warning in caught:  # shown as loading would have shown them
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    if key is None or caught or tasks_key(task_dirs, suite_json, inputs_of, files_read) != key:
        return tasks
    try:
        same = model.validate_json(model.dump_json(tasks)) == tasks
    except ValueError:
        same = False
    if same:
        keep_tasks(key, tasks, model)
    return tasks


def tasks_key(task_dirs: list[Path], suite_json: str, inputs_of: Callable[[Path], list],
              files_read: dict[str, bytes] | None = None) -> str | None:
    """The digest of everything loading these task folders reads; None where a file cannot be read
    (loading then says which)."""
    digest = hashlib.sha256(f"{code_digest()}\0{os.getcwd()}\0{suite_json}\0".encode())
    try:
        for task_dir in task_dirs:
            digest.update(f"\0\0{task_dir}\0".encode())
            for name, content in inputs_of(task_dir):
                if isinstance(content, bytes):
                    if files_read is not None:
                        files_read[f"{task_dir}/{name}"] = content
                    digest.update(f"\0{name}\0".encode() + content)
                else:
                    digest.update(f"\0{name}\0".encode() + repr(content).encode())
    except (OSError, UnicodeError):
        return None
    return digest.hexdigest()


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
