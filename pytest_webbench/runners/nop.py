"""An agent that does nothing: the floor every report must show as zero passes."""

from __future__ import annotations

from harbor.agents.base import BaseAgent
from harbor.agents.capabilities import AgentCapabilities


class NopAgent(BaseAgent):
    capabilities = AgentCapabilities(mcp_servers=True)

    def __init__(self, *args, **kwargs):
        for key in ("task_dir", "arm", "browser_session_id", "start_url", "harness_urls"):
            kwargs.pop(key, None)
        super().__init__(*args, **kwargs)

    @staticmethod
    def name() -> str:
        return "webbench-nop"

    def version(self) -> str | None:
        return "1"

    async def setup(self, environment) -> None:
        pass

    async def run(self, instruction, environment, context) -> None:
        pass
