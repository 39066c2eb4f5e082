"""The arms as data: which browser tools each may see and call, and what its agent is told.

The proxy enforces these policies; nothing else in the harness branches on an arm's name.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from .pairing import PAIRED_ARMS  # noqa: F401 - re-exported: the pairs' arms

ArmName = Literal["control", "treatment", "playwright"]

PLAYWRIGHT_TOOL = "execute_playwright_code"
# Kernel renamed its REPL tool; a policy allows either name so both server versions work.
REPL_TOOLS = ("browser_repl", "execute_browser_repl")
COMPUTER_TOOL = "computer_action"
WEBMCP_TOOL = "webmcp"


class ArmPolicy(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: ArmName
    tools: frozenset[str]
    webmcp_actions: frozenset[str] = frozenset()
    inject_tool_batch: bool = False
    # The playwright arm may not reach WebMCP through code either...
    forbid_webmcp_in_code: bool = False
    # ...nor go around the page: direct HTTP, raw CDP, rerouting traffic (proxy/rules.py names them).
    page_api_only: bool = False
    instructions: str

    def allows_tool(self, tool: str) -> bool:
        return tool in self.tools


_BROWSER_TOOLS = frozenset({PLAYWRIGHT_TOOL, *REPL_TOOLS, COMPUTER_TOOL, WEBMCP_TOOL})

# The answer file the instructions ask for, in the agent's working directory: /app, the trial's own
# folder under the host environment and the task's workdir in a sandbox. Harbor collects it from here.
ANSWER_PATH = "/app/answer.json"
# Where the files a task gives its agent go (ClawBench's extra_info and its dummy user's details):
# copied from the task folder's given/ before the agent starts; nothing else of the task goes in.
GIVEN_PATH = "/app/my-info"
GIVEN_FOLDER = "given"

_COMMON = """\
You work in a real web browser through the MCP server named `browser`. Your browser session id is
`{session_id}`: pass it as `session_id` in every browser tool call. Start at {start_url}.
Do the task without signing in anywhere. When you are done, write your final answer as one JSON
object to the file `answer.json` in your working directory, and also reply with that JSON object
alone as your last message."""

_WITH_WEBMCP = _COMMON + """
You may use Playwright code, the persistent browser REPL, computer actions, and the WebMCP tools
the page offers (webmcp list, then invoke)."""

ARM_POLICIES: dict[str, ArmPolicy] = {
    # Control and treatment are told the same, byte for byte: the injected tools are the only
    # difference between them (tests/test_arms.py holds them identical).
    "control": ArmPolicy(name="control", tools=_BROWSER_TOOLS, webmcp_actions=frozenset({"list", "invoke"}),
                         instructions=_WITH_WEBMCP),
    "treatment": ArmPolicy(name="treatment", tools=_BROWSER_TOOLS, webmcp_actions=frozenset({"list", "invoke"}),
                           inject_tool_batch=True, instructions=_WITH_WEBMCP),
    "playwright": ArmPolicy(
        name="playwright",
        tools=frozenset({PLAYWRIGHT_TOOL}),
        forbid_webmcp_in_code=True,
        page_api_only=True,
        instructions=_COMMON + """
Use only the execute_playwright_code tool. Do not use WebMCP (no webmcp tool, no
document.modelContext or navigator.modelContext in your code), the browser REPL, computer
actions, raw CDP sessions, or direct HTTP requests (fetch, page.request, curl or any other
client): drive the page through Playwright's page API.""",
    ),
}


def arm_policy(arm: str) -> ArmPolicy:
    try:
        return ARM_POLICIES[arm]
    except KeyError:
        raise ValueError(f"unknown arm {arm!r}: choose from {', '.join(ARM_POLICIES)}") from None


def arm_instructions(arm: str, session_id: str, start_url: str) -> str:
    return arm_policy(arm).instructions.format(session_id=session_id, start_url=start_url)
