"""Runners: which Harbor agent plays each trial, as data.

`reference` replays each task's reference solution through the proxy, as an MCP client, so it
takes exactly the path a real agent takes; `nop` does nothing (every trial should fail). The
real agent CLIs (codex, claude, pi) come with their own issue.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RunnerSpec:
    name: str
    agent_import_path: str
    default_model: str | None = None
    kwargs: dict = field(default_factory=dict)


RUNNERS: dict[str, RunnerSpec] = {
    "reference": RunnerSpec("reference", "pytest_webbench.runners.reference:ReferenceAgent"),
    "nop": RunnerSpec("nop", "pytest_webbench.runners.nop:NopAgent"),
}
PLANNED = {"codex", "claude", "pi"}


class UnknownRunner(ValueError):
    pass


def runner_spec(name: str) -> RunnerSpec:
    if name in RUNNERS:
        return RUNNERS[name]
    if name in PLANNED:
        raise UnknownRunner(
            f"--runner {name}: the real agent CLIs are not wired in yet (see the runners issue); "
            f"available now: {', '.join(RUNNERS)}"
        )
    raise UnknownRunner(f"--runner {name}: unknown runner; choose from {', '.join(RUNNERS)}")
