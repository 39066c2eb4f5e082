"""A run's options, as the plugin reads them from the command line and ini (kept apart from the
services in run.py so that planning a run imports no web server)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RunOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    suite: str
    runner: str = "reference"
    model: str | None = None
    model_base_url: str | None = None
    attempts: int = Field(1, ge=1)
    arms: tuple[str, ...] | None = None
    paired: bool = True
    experiment_id: str
    results_dir: Path
    browser: Literal["local", "kernel"] = "local"
    shard: tuple[int, int] | None = None  # (I, N): this machine runs shard I of N
    # Where agents run: "host" (this machine, a private mount namespace) or a Harbor environment
    # type (docker, daytona, modal, ...), whose sandboxes reach the proxy at proxy_url.
    environment: str = "host"
    proxy_listen: tuple[str, int] = ("127.0.0.1", 0)
    proxy_url: str | None = None  # what agents are given, "{port}" filled in; None: the listening address
