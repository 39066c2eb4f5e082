"""A suite's tasks kept between runs (design/suite_cache.py): read back only for the same inputs
of loading, place and code, equal to what loading gives, and never a failure of their own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import pytest_webbench.design.suite as suite_module
from pytest_webbench.design import suite_cache
from pytest_webbench.design.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]
OWN_SUITES = sorted(p.parent for p in (ROOT / "suites").glob("*/suite.toml") if "[clawbench]" not in p.read_text())


@pytest.fixture
def loads(monkeypatch, tmp_path):
    """The number of task files loaded (not read from the cache), in a cache folder of the test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    count = {"tasks": 0}
    real = suite_module.load_task

    def counted(task_dir, spec):
        count["tasks"] += 1
        return real(task_dir, spec)

    monkeypatch.setattr(suite_module, "load_task", counted)
    return count


@pytest.mark.parametrize("suite_dir", OWN_SUITES, ids=[p.name for p in OWN_SUITES])
def test_tasks_read_back_are_the_tasks_loaded(suite_dir, loads):
    first = load_suite(suite_dir)
    assert loads["tasks"] == len(first.tasks) > 0
    again = load_suite(suite_dir)
    assert loads["tasks"] == len(first.tasks), "the second load read the task files again"
    assert again.tasks == first.tasks and [t.model_dump() for t in again.tasks] == [t.model_dump() for t in first.tasks]
    assert again.content_hashes == first.content_hashes == suite_module.content_hashes(suite_dir, first.spec)


def copy_of_local_web(tmp_path: Path) -> Path:
    copy = tmp_path / "suite"
    shutil.copytree(ROOT / "suites" / "local-web", copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_a_changed_file_is_loaded_again_and_seen(tmp_path, loads):
    copy = copy_of_local_web(tmp_path)
    before = load_suite(copy)
    instruction = next(copy.glob("tasks/*/instruction.md"))
    instruction.write_text("Say what the page says, now.\n")
    after = load_suite(copy)
    assert loads["tasks"] == 2 * len(before.tasks)
    assert after.task(instruction.parent.name).instruction == "Say what the page says, now.\n"
    (copy / "tasks" / "notes.txt").write_text("a file no task loads\n")  # the manifest's digest sees it; loading does not
    load_suite(copy)
    assert loads["tasks"] == 2 * len(before.tasks)
    (instruction.parent / "tests").mkdir()
    (instruction.parent / "tests" / "test.sh").write_text("#!/bin/sh\n")  # a file loading looks for
    load_suite(copy)
    assert loads["tasks"] == 3 * len(before.tasks)


def test_the_manifest_s_digest_is_of_the_task_files_as_loaded_and_read_once(tmp_path, loads, monkeypatch):
    copy = copy_of_local_web(tmp_path)
    suite = load_suite(copy)
    loaded = suite_module.content_hashes(copy, suite.spec)["suite"]
    instruction = next(copy.glob("tasks/*/instruction.md"))
    instruction.write_text("Edited after the tasks were loaded.\n")
    reads = []
    real = suite_cache.read_file
    monkeypatch.setattr(suite_cache, "read_file", lambda path: reads.append(path) or real(path))
    assert suite.content_hashes["suite"] == loaded
    task_files = {str(p) for p in copy.glob("tasks/*/task.toml")} | {str(p) for p in copy.glob("tasks/*/instruction.md")}
    assert reads and not task_files & set(reads)  # none of the files loading read is read again
    assert suite_module.content_hashes(copy, suite.spec)["suite"] != loaded  # read afresh, the edit shows


def test_the_same_files_elsewhere_are_not_the_same_tasks(tmp_path, loads):
    first, second = copy_of_local_web(tmp_path / "a"), copy_of_local_web(tmp_path / "b")
    a, b = load_suite(first), load_suite(second)
    assert a.content_hashes["suite"] == b.content_hashes["suite"] and loads["tasks"] == 2 * len(a.tasks)
    assert all(t.path.is_relative_to(second) for t in b.tasks)


def test_other_code_is_a_miss(tmp_path, loads, monkeypatch):
    copy = copy_of_local_web(tmp_path)
    n = len(load_suite(copy).tasks)
    monkeypatch.setattr(suite_cache, "code_digest", lambda: "another version of the loader")
    load_suite(copy)
    assert loads["tasks"] == 2 * n


def test_an_unreadable_cache_file_is_a_miss_not_a_failure(tmp_path, loads):
    copy = copy_of_local_web(tmp_path)
    expected = load_suite(copy).tasks
    [kept] = suite_cache.cache_dir().glob("*.json")
    for damage in (kept.read_bytes()[:100], b'[{"name": "not a task"}]', b"\xff"):
        kept.write_bytes(damage)
        assert load_suite(copy).tasks == expected
    assert kept.read_bytes().startswith(b"[{"), "the damaged file was not replaced"


def test_a_suite_edited_while_it_loads_is_not_kept(tmp_path, loads, monkeypatch):
    copy = copy_of_local_web(tmp_path)
    real = suite_module.load_task
    instruction = copy / "tasks" / "shop-price" / "instruction.md"

    def editing(task_dir, spec):
        instruction.write_text(f"edited while {task_dir.name} loaded\n")
        return real(task_dir, spec)

    monkeypatch.setattr(suite_module, "load_task", editing)
    load_suite(copy)
    assert not list(suite_cache.cache_dir().glob("*.json"))


def test_a_task_folder_behind_a_link_is_read_through_it(tmp_path, loads):
    """The key is what loading reads, wherever it lies: an edit behind a linked task folder (or a
    tasks folder elsewhere) is seen, and a task broken there is refused again."""
    copy = copy_of_local_web(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (copy / "tasks" / "shop-price").rename(elsewhere)
    (copy / "tasks" / "shop-price").symlink_to(elsewhere)
    load_suite(copy)
    (elsewhere / "instruction.md").write_text("Edited behind the link.\n")
    assert load_suite(copy).task("shop-price").instruction == "Edited behind the link.\n"
    toml = elsewhere / "task.toml"
    toml.write_text(toml.read_text().replace("turn_cap = ", "turn_cap = 'x' #"))
    with pytest.raises(suite_module.SuiteError, match="turn_cap"):
        load_suite(copy)


def test_what_json_would_change_is_not_kept(tmp_path, loads):
    """A TOML date, or a NaN, in a check's expected values reads back from JSON as a string or a
    null: such tasks are loaded every time, so a kept task grades as a loaded one."""
    copy = copy_of_local_web(tmp_path)
    toml = copy / "tasks" / "shop-cart" / "task.toml"
    toml.write_text(toml.read_text().replace('coupon = "LANTERN15"', 'coupon = "LANTERN15"\nsince = 2024-05-01\nratio = nan'))
    import datetime
    import math

    first, second = load_suite(copy), load_suite(copy)
    assert loads["tasks"] == 2 * len(first.tasks), "a suite whose tasks JSON changes was read back"
    expect = second.task("shop-cart").meta.page.expect
    assert expect["since"] == first.task("shop-cart").meta.page.expect["since"] == datetime.date(2024, 5, 1)
    assert math.isnan(expect["ratio"])


def test_a_task_loading_warns_of_is_loaded_and_warns_every_time(tmp_path, loads):
    copy = copy_of_local_web(tmp_path)
    toml = copy / "tasks" / "shop-price" / "task.toml"
    toml.write_text(toml.read_text().replace('workdir = "/app"', 'workdir = "/app"\nmemory = "2G"'))
    for _ in range(2):
        with pytest.warns(DeprecationWarning, match="memory"):
            load_suite(copy)


def test_a_kept_task_must_name_the_folder_it_was_loaded_from(tmp_path, loads):
    """A task file planted in the cache under the right key, naming another folder, is a miss."""
    import json

    copy = copy_of_local_web(tmp_path)
    n = len(load_suite(copy).tasks)
    [kept] = suite_cache.cache_dir().glob("*.json")
    tasks = json.loads(kept.read_text())
    tasks[0]["path"] = str(tmp_path / "evil")
    kept.write_text(json.dumps(tasks))
    assert load_suite(copy).tasks[0].path == copy / "tasks" / tasks[0]["name"]
    assert loads["tasks"] == 2 * n


def test_a_cache_folder_that_cannot_be_written_is_no_error(tmp_path, loads, monkeypatch):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    copy = copy_of_local_web(tmp_path)
    first, second = load_suite(copy), load_suite(copy)
    assert first.tasks == second.tasks and loads["tasks"] == 2 * len(first.tasks)


def walked_digest(root: Path) -> str:
    """The suite digest as os.walk spells it (the way it was first written): the oracle for the walk."""
    import hashlib
    import os

    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        prefix = folder[len(str(root)) + 1:] + "/" if folder != str(root) else ""
        files += [(prefix + n, f"{folder}/{n}") for n in names if os.path.isfile(f"{folder}/{n}")]
    digest = hashlib.sha256()
    for relative, full in sorted(files, key=lambda f: f[0].split("/")):
        digest.update(relative.encode() + b"\0" + Path(full).read_bytes() + b"\0")
    return digest.hexdigest()


def test_the_digest_takes_the_files_os_walk_takes(tmp_path):
    import os

    copy = copy_of_local_web(tmp_path)
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "f.txt").write_text("not walked into")
    (outside / "g.txt").write_text("linked to")
    (copy / "linked-folder").symlink_to(outside)  # a link to a folder: not entered
    (copy / "tasks" / "linked-file.txt").symlink_to(outside / "g.txt")  # a link to a file: read
    (copy / "broken").symlink_to(tmp_path / "nowhere")
    os.mkfifo(copy / "a-fifo")
    (copy / "tasks" / "__pycache__").mkdir(exist_ok=True)
    (copy / "tasks" / "__pycache__" / "x.pyc").write_bytes(b"skipped")
    spec = load_suite(ROOT / "suites" / "local-web").spec
    assert suite_module.content_hashes(copy, spec)["suite"] == walked_digest(copy)
    (outside / "g.txt").write_text("changed through the link")
    assert suite_module.content_hashes(copy, spec)["suite"] == walked_digest(copy)


def test_the_key_holds_every_file_loading_a_task_touches(monkeypatch):
    """task_inputs names what load_task reads or looks for; a file it opens or stats beyond them
    would be a change the cache could not see."""
    import os
    import sys

    from pytest_webbench.design.suite import task_inputs

    touched: set[str] = set()
    recording = {"on": False}

    def hook(event, args):
        if recording["on"] and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            touched.add(os.fsdecode(args[0]))

    sys.addaudithook(hook)  # an audit hook stays for the process: it records only while asked
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if recording["on"] and isinstance(path, (str, bytes, os.PathLike)):
            touched.add(os.fsdecode(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    for suite_dir in OWN_SUITES:
        spec = load_suite(suite_dir).spec
        for task_dir in sorted(p for p in (suite_dir / "tasks").iterdir() if p.is_dir()):
            for run in (lambda: suite_module.load_task(task_dir, spec), lambda: task_inputs(task_dir)):
                touched.clear()
                recording["on"] = True
                try:
                    run()
                finally:
                    recording["on"] = False
                inside = {p for p in touched if p.startswith(str(task_dir) + "/")}
                if run.__code__.co_names and "load_task" in run.__code__.co_names:
                    by_loading = inside
                else:
                    assert by_loading <= inside, f"{task_dir.name}: loading touches {sorted(by_loading - inside)} beyond the key"
                    assert by_loading, "nothing recorded: the recorder is broken"


def test_a_folder_that_cannot_be_read_is_passed_over_as_os_walk_does(tmp_path, monkeypatch):
    """A root-owned 0700 folder a container left in the suite: no crash in the manifest's digest."""
    import os

    copy = copy_of_local_web(tmp_path)
    private = copy / "tasks" / "shop-cart" / "private"
    private.mkdir()
    (private / "secret.txt").write_text("unreadable")
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path) == str(private):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    spec = load_suite(ROOT / "suites" / "local-web").spec
    assert suite_module.content_hashes(copy, spec)["suite"] == walked_digest(copy)
