"""The real agent CLIs: Harbor's own installed agents, with the pinned CLI from npm.

Harbor's install steps fetch nvm from GitHub or Claude's bootstrap script; here `install` only
checks that the pinned CLI is in the project's npm folder (`python -m pytest_webbench.runners.install`),
and the trial puts that folder first on the agent's PATH. Everything else (config files, the
command line, parsing the CLI's output into tokens, cost and an ATIF trajectory) is Harbor's.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

from harbor.agents.installed.claude_code import ClaudeCode
from harbor.agents.installed.codex import Codex
from harbor.agents.installed.pi import Pi

from . import runner_spec
from .install import cli_problem

# Settings that keep Codex from dialling hosts other than the model endpoint and the proxy.
CODEX_OFFLINE = {
    "check_for_update_on_startup": False,
    "analytics": {"enabled": False},
    "features": {"plugins": False, "apps": False, "remote_plugin": False, "in_app_updates": False},
}

# Pi: its agent folder (set by the preset's PI_CODING_AGENT_DIR, as Harbor's Pi agent uses it) and
# settings: a rate limit is reported at once, not after retries with backoff.
PI_AGENT_DIR = "/tmp/harbor-pi-agent"
PI_SETTINGS = {"retry": {"enabled": False}}


class PinnedCli:
    """Harbor's agent with the pinned CLI. Its presets route the model through the gateway (a
    preset without `[model_api]` is refused: runners/__init__.py), which meters and prices every
    call, so the agents below leave Harbor's own estimate from the CLI's figures unmade: it imports
    litellm, about 4.7 CPU s in every process that runs trials (docs/performance.md)."""

    preset: str

    async def install(self, environment) -> None:
        from ..environments.host import HostEnvironment

        pin = runner_spec(self.preset).cli
        if isinstance(environment, HostEnvironment):  # on this machine: the project's npm folder
            if problem := cli_problem(pin):
                raise RuntimeError(problem)
            return
        # In a sandbox (--environment docker|daytona|modal): the same pin, from the npm registry.
        result = await environment.exec(f"npm install --global --no-fund --no-audit {pin.package}@{pin.version}")
        if result.return_code != 0:
            raise RuntimeError(f"installing {pin.package}@{pin.version} in the sandbox failed "
                               f"(exit {result.return_code}): {(result.stderr or result.stdout or '')[-500:]}")


class WebbenchCodex(PinnedCli, Codex):
    preset = "codex"

    def _compute_cost_from_pricing(self, *args: Any, **kwargs: Any) -> float | None:
        return None  # the gateway priced the call (PinnedCli)

    def _build_effective_config(self, openai_base_url: str | None = None) -> dict[str, Any]:
        config = super()._build_effective_config(openai_base_url)
        for key, value in CODEX_OFFLINE.items():
            config.setdefault(key, value)
        for server in (config.get("mcp_servers") or {}).values():
            # Without it Codex may send its first request before the MCP tools are listed.
            server.setdefault("required", True)
        return config


class WebbenchClaude(PinnedCli, ClaudeCode):
    """Claude Code reports its own total cost, which Harbor keeps; its per-step estimate is left
    unmade (PinnedCli)."""

    preset = "claude"

    def _estimate_step_costs(self, steps: list[Any]) -> float | None:
        return None


class WebbenchPi(PinnedCli, Pi):
    """Pi 1.x has MCP built in (`mcp.json` in its agent folder); Harbor's Pi agent instead loads
    the pi-mcp-adapter extension, which supports only Pi 0.84-0.85. Same agent otherwise."""

    preset = "pi"

    def _build_mcp_config(self) -> dict[str, Any]:
        servers = {}
        for server in self.mcp_servers:
            entry = {"command": server.command, "args": list(server.args)} if server.transport == "stdio" else {"url": server.url}
            servers[server.name] = {**entry, "exposure": "direct"}  # tools as mcp__<server>__<tool>, not behind a script tool
        return {"mcpServers": servers}

    async def run(self, instruction, environment, context) -> None:
        await self._write_mcp_config(environment)
        await self._upload_config_text(
            environment, content=json.dumps(PI_SETTINGS) + "\n",
            remote_path=(PurePosixPath(PI_AGENT_DIR) / "settings.json").as_posix(), filename="settings.json",
        )
        servers, self.mcp_servers = self.mcp_servers, []  # so Harbor does not add its adapter extension
        try:
            await super().run(instruction, environment, context)
        finally:
            self.mcp_servers = servers
        # Pi exits 0 when the model API refuses (401, 429): its last message says so instead.
        output = (self.environment_logs_dir / self._OUTPUT_FILENAME).as_posix()
        last = await environment.exec(f"grep '\"type\":\"message_end\"' {output} | tail -n 1")
        try:
            message = json.loads(last.stdout or "{}").get("message") or {}
        except ValueError:
            return
        if message.get("role") == "assistant" and message.get("stopReason") == "error":
            raise PiModelError(f"pi: the model request failed: {str(message.get('errorMessage'))[:500]}")


class PiModelError(RuntimeError):
    """The model API refused Pi's request (Pi itself exited 0): the trial is errored."""