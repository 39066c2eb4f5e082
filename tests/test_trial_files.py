"""Files in and out of a trial's folders (environments/files.py, through HostEnvironment as Harbor
calls it), tried as a hostile agent would: links planted where the harness copies from or writes
to, special files, files too large to copy, a workspace filled up. Nothing is followed, nothing is
written outside the trial, every refusal is named, and no disk fills."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from harbor.models.task.config import EnvironmentConfig
from harbor.models.trial.paths import TrialPaths

from pytest_webbench.environments.files import FileRefused, copy_in, copy_out
from pytest_webbench.environments.host import REFUSALS, WORKSPACE_BYTES, HostEnvironment

SECRET = "harness-secret-b71"


def _env(tmp_path: Path) -> HostEnvironment:
    trial_dir = tmp_path / "results" / "jobs" / "control" / "t1"
    trial_dir.mkdir(parents=True)
    return HostEnvironment(environment_dir=tmp_path, environment_name="t1", session_id="t1",
                           trial_paths=TrialPaths(trial_dir), task_env_config=EnvironmentConfig())


@pytest.fixture
def outside(tmp_path) -> Path:
    """Files of the harness's, outside any trial: what a planted link would point at."""
    folder = tmp_path / "harness"
    folder.mkdir()
    (folder / "keys.env").write_text(f"KERNEL_API_KEY={SECRET}\n")
    (folder / "canary.txt").write_text("untouched")
    return folder


def test_links_and_special_files_are_not_copied_out_and_are_named(tmp_path, outside):
    env = _env(tmp_path)

    async def scenario():
        await env.start(force_build=False)
        try:
            logs = env.host_path("/logs/agent")
            logs.mkdir(parents=True, exist_ok=True)
            (logs / "ok.txt").write_text("fine")
            (logs / "environ").symlink_to("/proc/self/environ")
            (logs / "keys").symlink_to(outside / "keys.env")
            (logs / "harness-dir").symlink_to(outside)
            (logs / "sub").mkdir()
            (logs / "sub" / "deep-link").symlink_to(outside / "keys.env")
            os.link(logs / "ok.txt", logs / "hard.txt")
            os.mkfifo(logs / "pipe")
            with open(logs / "sparse.bin", "wb") as f:  # 10 GiB on paper, no disk used
                f.truncate(10 * 1024**3)
            await env.download_dir("/logs/agent", env.trial_paths.trial_dir / "agent")
        finally:
            await env.stop(delete=True)

    asyncio.run(scenario())
    copied = env.trial_paths.trial_dir / "agent"
    assert sorted(p.relative_to(copied).as_posix() for p in copied.rglob("*")) == ["sub"]  # nothing else was plain
    assert SECRET not in "".join(p.read_text() for p in copied.rglob("*") if p.is_file())
    refused = {r["path"]: r["why"] for r in json.loads((env.trial_paths.trial_dir / REFUSALS).read_text())}
    assert "symbolic link" in refused["/logs/agent/environ"] and "symbolic link" in refused["/logs/agent/keys"]
    assert "symbolic link" in refused["/logs/agent/harness-dir"] and "symbolic link" in refused["/logs/agent/sub/deep-link"]
    assert "FIFO" in refused["/logs/agent/pipe"] and "over the" in refused["/logs/agent/sparse.bin"]
    # a file with two names is refused under both (the other name could be anything of the agent's)
    assert "hard link" in refused["/logs/agent/ok.txt"] and "hard link" in refused["/logs/agent/hard.txt"]


def test_a_folder_that_is_a_link_is_not_followed(tmp_path, outside):
    env = _env(tmp_path)

    async def scenario():
        await env.start(force_build=False)
        try:
            (env.host_path("/logs") / "agent").symlink_to(outside)  # the whole folder Harbor downloads is a link out
            await env.download_dir("/logs/agent", env.trial_paths.trial_dir / "agent")
            (env.host_path("/app") / "sub").symlink_to(outside)  # a link among the parents of a file asked for
            with pytest.raises(FileRefused, match="not a folder of its own"):
                await env.download_file("/app/sub/keys.env", env.trial_paths.trial_dir / "keys.env")
        finally:
            await env.stop(delete=True)

    asyncio.run(scenario())
    assert not list((env.trial_paths.trial_dir / "agent").rglob("*")) if (env.trial_paths.trial_dir / "agent").exists() else True
    assert not (env.trial_paths.trial_dir / "keys.env").exists()
    refused = {r["path"]: r["why"] for r in json.loads((env.trial_paths.trial_dir / REFUSALS).read_text())}
    assert "symbolic link" in refused["/logs/agent"]



def test_harbor_s_check_before_it_copies_out_runs_nothing_and_follows_no_link(tmp_path, outside, monkeypatch):
    """Harbor asks is_dir of each artifact before it copies it out (by default a `test -d` command):
    the environment answers from the host folders, as copy_out reads them, running no command. A
    planted link is neither a folder nor a file, whatever it points at, nor is a path through one."""
    env = _env(tmp_path)
    paths = ["/app", "/app/out", "/app/answer.json", "/app/dir-link", "/app/file-link", "/app/via/x.txt",
             "/app/pipe", "/app/missing", "/app/answer.json/below", "/logs/artifacts"]

    async def no_command(*args, **kwargs):
        raise AssertionError("a command was run")

    async def scenario():
        await env.start(force_build=False)
        try:
            monkeypatch.setattr(env, "exec", no_command)
            app = env.host_path("/app")
            (app / "out").mkdir()
            (app / "out" / "x.txt").write_text("x")
            (app / "answer.json").write_text("{}")
            (app / "dir-link").symlink_to(outside)
            (app / "file-link").symlink_to(outside / "keys.env")
            (app / "via").symlink_to(app / "out")  # a link among the parents
            os.mkfifo(app / "pipe")
            return {p: (await env.is_dir(p), await env.is_file(p)) for p in paths}
        finally:
            await env.stop(delete=True)

    seen = asyncio.run(scenario())
    assert seen == {"/app": (True, False), "/app/out": (True, False), "/app/answer.json": (False, True),
                    **{p: (False, False) for p in paths[3:-1]}, "/logs/artifacts": (False, False)}

def test_harbor_s_write_back_replaces_a_planted_link_instead_of_writing_through_it(tmp_path, outside):
    """After the agent runs, Harbor uploads the trial's agent folder back to /logs/agent: a link
    the agent left at trajectory.json (or a folder link at images/) must not carry that write out."""
    env = _env(tmp_path)
    ours = tmp_path / "ours"
    (ours / "images").mkdir(parents=True)
    (ours / "trajectory.json").write_text('{"steps": []}')
    (ours / "images" / "shot.png").write_bytes(b"png")

    async def scenario():
        await env.start(force_build=False)
        try:
            logs = env.host_path("/logs/agent")
            logs.mkdir(parents=True, exist_ok=True)
            (logs / "trajectory.json").symlink_to(outside / "canary.txt")
            (logs / "images").symlink_to(outside)  # a folder link: the write must stop at it
            with pytest.raises(FileRefused, match="not a folder of its own"):
                await env.upload_dir(ours, "/logs/agent")
            (logs / "images").unlink()
            await env.upload_dir(ours, "/logs/agent")
            return (logs / "trajectory.json").is_symlink(), (logs / "trajectory.json").read_text()
        finally:
            await env.stop(delete=True)

    is_link, content = asyncio.run(scenario())
    assert (outside / "canary.txt").read_text() == "untouched" and not (outside / "shot.png").exists()
    assert not is_link and content == '{"steps": []}'


def test_the_workspace_is_outside_the_results_capped_and_gone_after(tmp_path):
    env = _env(tmp_path)

    async def scenario():
        await env.start(force_build=False)
        workspace = env.root
        try:
            inside = workspace.resolve().is_relative_to(env.trial_paths.trial_dir.resolve())
            if os.geteuid() == 0:  # the cap is a tmpfs: writing past it fails in the agent's folder
                with open(env.host_path("/app") / "big", "wb") as f:
                    with pytest.raises(OSError):
                        os.posix_fallocate(f.fileno(), 0, WORKSPACE_BYTES + 1024 * 1024)
            return workspace, inside
        finally:
            await env.stop(delete=True)

    workspace, inside = asyncio.run(scenario())
    assert not inside and not workspace.exists()


def test_copy_in_and_out_refuse_dot_segments(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "f").write_text("x")
    with pytest.raises(FileRefused):
        copy_in(tmp_path / "f", tmp_path / "root", "app/../../escaped")
    with pytest.raises(FileRefused):
        copy_out(tmp_path / "root", "../f", tmp_path / "out")
    assert not (tmp_path / "escaped").exists()


@pytest.mark.parametrize("inside", ["..", "app/..", "/etc", "/", "app/../.."])
def test_the_file_walk_itself_keeps_below_the_workspace_whatever_path_it_is_given(tmp_path, inside):
    """The host environment maps every path below the workspace before files.py sees it; files.py
    holds the line too. Before, a last name of '..' was stat'ed as the parent (copy_out('app/..')
    copied the whole workspace) and an absolute path opened the machine's own root (copy_out('/etc'))."""
    from pytest_webbench.environments.files import copy_in_dirs, kind_below

    root = tmp_path / "root"
    (root / "app").mkdir(parents=True)
    (root / "app" / "answer.json").write_text("{}")
    dest = tmp_path / "dest"
    assert kind_below(root, inside) is None
    with pytest.raises(FileRefused, match="not a path below the workspace"):
        copy_out(root, inside, dest)
    with pytest.raises(FileRefused, match="not a path below the workspace"):
        copy_in(root / "app" / "answer.json", root, inside)
    with pytest.raises(FileRefused, match="not a path below the workspace"):
        copy_in_dirs(root, inside)
    assert not dest.exists() and sorted(p.name for p in root.rglob("*")) == ["answer.json", "app"]
