"""Files into and out of an agent's folders, without following anything the agent planted there.

Everything under a trial's private folders is the agent's to shape: a name may be a symbolic link to
the harness's keys or the task's answer rule, a hard link, a FIFO that blocks a reader, a device
that never ends, a sparse file of terabytes. So:

- `copy_out` copies regular files only, each opened with O_NOFOLLOW below a folder opened the same
  way, at most `max_file_bytes` each and `max_total_bytes` in all, into a folder it creates; a link
  (symbolic or hard), a special file or an oversized one is left behind and named in the result;
- `copy_in` writes into the agent's folders through folders opened with O_NOFOLLOW|O_DIRECTORY (a
  planted link among the parents is refused) and replaces each file by renaming a fresh one over
  it, so a link planted at the file's own name is replaced, never written through.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024
MAX_ENTRIES = 20000
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1024 * 1024


class FileRefused(OSError):
    """A file could not be copied as asked (a link, a special file, too large)."""


@dataclass
class Refusal:
    path: str  # relative to what was copied
    why: str


@dataclass
class CopyResult:
    files: int = 0
    bytes: int = 0
    refused: list[Refusal] = field(default_factory=list)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _open_dir_below(root_fd: int, parts: tuple[str, ...], create: bool = False) -> int:
    """The folder at `parts` below `root_fd`, each step refusing a link; missing ones made if asked."""
    fd = os.dup(root_fd)
    try:
        for part in parts:
            if part in ("", ".", ".."):
                raise FileRefused(f"{'/'.join(parts)}: a path part {part!r} is not allowed")
            try:
                nxt = os.open(part, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:  # ELOOP or ENOTDIR: a link or a file where a folder should be
                raise FileRefused(f"{'/'.join(parts)}: {part} is not a folder of its own ({exc.strerror})") from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _parts(inside: str) -> tuple[str, ...]:
    """A path below the workspace as its names: none of them empty, '.', '..' or the root, the last
    one included (os.stat of '..' under a folder is its parent, and '/' is the machine's)."""
    parts = PurePosixPath(inside).parts
    if any(part in ("", ".", "..") or "/" in part for part in parts):
        raise FileRefused(f"{inside}: not a path below the workspace")
    return parts


def _open_below(root: Path, parts: tuple[str, ...], create: bool = False) -> int:
    """The folder at `parts` below the folder `root` (the harness's own), as `_open_dir_below`."""
    root_fd = os.open(root, _DIR)
    try:
        return _open_dir_below(root_fd, parts, create)
    finally:
        os.close(root_fd)


def _copy_fd(src_fd: int, dst_fd: int, limit: int) -> int:
    copied = 0
    while chunk := os.read(src_fd, min(_CHUNK, limit - copied + 1)):
        copied += len(chunk)
        if copied > limit:
            raise FileRefused(f"larger than {limit} bytes")
        os.write(dst_fd, chunk)
    return copied


def _copy_file(src_dir: int, name: str, dst_dir: int, result: CopyResult, where: str, max_file: int, max_total: int,
               dest_name: str | None = None) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src_dir)
    except OSError as exc:
        result.refused.append(Refusal(where, f"not opened: {exc.strerror}"))
        return
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            result.refused.append(Refusal(where, _kind(info.st_mode)))
            return
        if info.st_nlink > 1:  # the same file under another name, perhaps one the harness reads
            result.refused.append(Refusal(where, f"a hard link ({info.st_nlink} names)"))
            return
        room = min(max_file, max_total - result.bytes)
        if info.st_size > room:
            result.refused.append(Refusal(where, f"{info.st_size} bytes, over the {room}-byte limit left"))
            return
        dest_name = dest_name or name
        out = os.open(dest_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dst_dir)
        try:
            result.bytes += _copy_fd(fd, out, room)  # a file still growing is cut off at the limit, not followed
            result.files += 1
        except FileRefused as exc:
            os.unlink(dest_name, dir_fd=dst_dir)
            result.refused.append(Refusal(where, str(exc)))
        finally:
            os.close(out)
    finally:
        os.close(fd)


def copy_out(root: Path, inside: str, dest: Path, max_file_bytes: int = MAX_FILE_BYTES,
             max_total_bytes: int = MAX_TOTAL_BYTES) -> CopyResult:
    """Copies the file or folder at `inside` (a path below `root`, the agent's folders) to `dest`
    (the harness's), regular files only. For a folder, its contents merge into `dest`."""
    parts = _parts(inside)
    if not parts:
        raise FileRefused("nothing to copy")
    result = CopyResult()
    src_parent = _open_below(root, parts[:-1])
    name = parts[-1]
    try:
        info = os.stat(name, dir_fd=src_parent, follow_symlinks=False)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if stat.S_ISDIR(info.st_mode):
            dest.mkdir(exist_ok=True)
            src = os.open(name, _DIR, dir_fd=src_parent)
            dst = os.open(dest, _DIR)
            try:
                _copy_tree(src, dst, "", result, [0], max_file_bytes, max_total_bytes)
            finally:
                os.close(src)
                os.close(dst)
        elif stat.S_ISLNK(info.st_mode):
            result.refused.append(Refusal(name, _link(src_parent, name)))
        else:
            dst_parent = os.open(dest.parent, _DIR)
            try:
                _make_room(dst_parent, dest.name)
                _copy_file(src_parent, name, dst_parent, result, name, max_file_bytes, max_total_bytes, dest_name=dest.name)
            finally:
                os.close(dst_parent)
    finally:
        os.close(src_parent)
    return result


def kind_below(root: Path, inside: str) -> int | None:
    """The file type (`stat.S_IFMT`) of what is at `inside` below `root`, read without following a
    link on the way or at the end (a link is a link, whatever it points at); None if nothing is
    there, a link or file stands where a folder on the way should be, or the path leaves `root`."""
    try:
        if not (parts := _parts(inside)):
            return stat.S_IFDIR
        parent = _open_below(root, parts[:-1])
    except (FileNotFoundError, FileRefused):
        return None
    try:
        return stat.S_IFMT(os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:  # not there, a name too long, a folder the agent made unreadable
        return None
    finally:
        os.close(parent)


def _link(dir_fd: int, name: str) -> str:
    try:
        target = os.readlink(name, dir_fd=dir_fd)
    except OSError:
        target = "?"
    return f"a symbolic link to {target[:200]!r}"


def _make_room(dir_fd: int, name: str) -> None:
    """An earlier copy (or anything else) at `name` in the harness's folder goes first."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def _copy_tree(src: int, dst: int, where: str, result: CopyResult, seen: list[int], max_file: int, max_total: int) -> None:
    for entry in sorted(os.listdir(src)):
        seen[0] += 1
        path = f"{where}{entry}"
        if seen[0] > MAX_ENTRIES:
            result.refused.append(Refusal(path, f"past {MAX_ENTRIES} entries: the rest not copied"))
            return
        info = os.stat(entry, dir_fd=src, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            try:
                os.mkdir(entry, 0o755, dir_fd=dst)
            except FileExistsError:
                pass
            try:
                child_src = os.open(entry, _DIR, dir_fd=src)
                child_dst = os.open(entry, _DIR, dir_fd=dst)
            except OSError as exc:
                result.refused.append(Refusal(path, f"folder not opened: {exc.strerror}"))
                continue
            try:
                _copy_tree(child_src, child_dst, path + "/", result, seen, max_file, max_total)
            finally:
                os.close(child_src)
                os.close(child_dst)
        elif stat.S_ISLNK(info.st_mode):
            result.refused.append(Refusal(path, _link(src, entry)))
        else:
            _make_room(dst, entry)
            _copy_file(src, entry, dst, result, path, max_file, max_total)


def copy_in(source: Path, root: Path, inside: str) -> None:
    """Writes the harness's file or folder `source` to `inside` (a path below `root`, the agent's
    folders), refusing planted links among the parents and replacing, not following, one at a
    file's own name."""
    parts = _parts(inside)
    if not parts:
        raise FileRefused("no destination")
    if source.is_dir():
        target = _open_below(root, parts, create=True)
        try:
            _write_tree(source, target)
        finally:
            os.close(target)
    else:
        parent = _open_below(root, parts[:-1], create=True)
        try:
            _write_file(source, parent, parts[-1])
        finally:
            os.close(parent)


def copy_in_dirs(root: Path, inside: str) -> None:
    """Makes the folders of `inside` below `root`, refusing planted links among them."""
    os.close(_open_below(root, _parts(inside), create=True))


def _write_file(source: Path, dir_fd: int, name: str) -> None:
    temp = f".webbench-{os.getpid()}-{name}"[:255]
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        with open(source, "rb") as f:
            while chunk := f.read(_CHUNK):
                os.write(fd, chunk)
        os.fchmod(fd, stat.S_IMODE(os.stat(source).st_mode) & 0o777)
    except BaseException:
        os.close(fd)
        os.unlink(temp, dir_fd=dir_fd)
        raise
    os.close(fd)
    os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # over a planted link, not through it


def _write_tree(source: Path, dir_fd: int) -> None:
    for entry in sorted(source.iterdir()):
        if entry.is_symlink():
            continue  # the harness's own trees hold none; never recreated in the agent's
        if entry.is_dir():
            child = _open_dir_below(dir_fd, (entry.name,), create=True)
            try:
                _write_tree(entry, child)
            finally:
                os.close(child)
        elif entry.is_file():
            _write_file(entry, dir_fd, entry.name)
