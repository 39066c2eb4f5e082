"""The real agent CLIs: Harbor's own installed agents, with the pinned CLI from npm.

Harbor's install steps fetch nvm from GitHub or Claude's bootstrap script; here `install` only
checks that the pinned CLI is in the project's npm folder (`python -m pytest_webbench.runners.install`),
and the trial puts that folder first on the agent's PATH. Everything else (config files, the
command line, parsing the CLI's output into tokens, cost and an ATIF trajectory) is Harbor's.
"""

from __future__ import annotations

from typing import Any

from harbor.agents.installed.claude_code import ClaudeCode
from harbor.agents.installed.codex import Codex

from . import runner_spec
from .install import cli_problem

# Settings that keep Codex from dialling hosts other than the model endpoint and the proxy.
CODEX_OFFLINE = {
    "check_for_update_on_startup": False,
    "analytics": {"enabled": False},
    "features": {"plugins": False, "apps": False, "remote_plugin": False, "in_app_updates": False},
}


class PinnedCli:
    preset: str

    async def install(self, environment) -> None:
        problem = cli_problem(runner_spec(self.preset).cli)
        if problem:
            raise RuntimeError(problem)


class WebbenchCodex(PinnedCli, Codex):
    preset = "codex"

    def _build_effective_config(self, openai_base_url: str | None = None) -> dict[str, Any]:
        config = super()._build_effective_config(openai_base_url)
        for key, value in CODEX_OFFLINE.items():
            config.setdefault(key, value)
        for server in (config.get("mcp_servers") or {}).values():
            # Without it Codex may send its first request before the MCP tools are listed.
            server.setdefault("required", True)
        return config


class WebbenchClaude(PinnedCli, ClaudeCode):
    preset = "claude"
