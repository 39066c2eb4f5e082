"""A Harbor environment on this host: a private folder per trial, no container.

Harbor's built-in environments all need a container runtime, a VM or a cloud account; a browser
agent needs none of that, since its only tool is the browser behind the proxy. Paths inside the
environment (`/app`, `/logs/...`) map into `<trial dir>/environment/`, so nothing of the task's
tests, solutions or grading rules is ever in it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path, PurePosixPath

from harbor.environments.base import BaseEnvironment, ExecResult

WORKDIR = "/app"


class HostEnvironment(BaseEnvironment):
    @staticmethod
    def type() -> str:
        return "webbench-host"

    def _validate_definition(self) -> None:
        pass  # nothing to build

    @property
    def root(self) -> Path:
        return Path(self.trial_paths.trial_dir) / "environment"

    def host_path(self, env_path: str) -> Path:
        pure = PurePosixPath(env_path)
        if not pure.is_absolute():
            pure = PurePosixPath(WORKDIR) / pure
        parts = [p for p in pure.parts[1:] if p not in ("", ".")]
        if ".." in parts:
            raise ValueError(f"path {env_path!r} leaves the environment")
        return self.root.joinpath(*parts)

    async def start(self, force_build: bool) -> None:
        self.host_path(WORKDIR).mkdir(parents=True, exist_ok=True)

    async def stop(self, delete: bool) -> None:
        pass  # the folder stays with the trial's results

    async def upload_file(self, source_path, target_path: str) -> None:
        target = self.host_path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_path, target)

    async def upload_dir(self, source_dir, target_dir: str) -> None:
        shutil.copytree(source_dir, self.host_path(target_dir), dirs_exist_ok=True)

    async def download_file(self, source_path: str, target_path) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.host_path(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir) -> None:
        source = self.host_path(source_dir)
        if source.is_dir():
            shutil.copytree(source, target_dir, dirs_exist_ok=True)

    async def exec(self, command: str, cwd: str | None = None, env: dict[str, str] | None = None,
                   timeout_sec: int | None = None, user: str | int | None = None) -> ExecResult:
        workdir = self.host_path(cwd or WORKDIR)
        workdir.mkdir(parents=True, exist_ok=True)
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=workdir, env={**os.environ, **(env or {})},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_sec)
        except TimeoutError:
            proc.kill()
            out, err = await proc.communicate()
            return ExecResult(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace") + "\n(timed out)", return_code=124)
        return ExecResult(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"), return_code=proc.returncode or 0)
