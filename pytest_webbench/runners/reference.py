"""The reference runner: plays a task's reference solution through the proxy.

Each task ships `solution/reference.py` with `async def solve(browser, arm) -> dict`. The solution
gets a `ReferenceBrowser`, an MCP client of the trial's proxy, so every step it takes is a real
MCP tool call that the proxy filters and logs; treatment solutions use the injected tools,
control and playwright ones do not. The answer goes to `answer.json` in the environment, as a
real agent's would.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import random
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harbor.agents.base import BaseAgent
from harbor.agents.capabilities import AgentCapabilities

from ..design.arms import ANSWER_PATH, GIVEN_PATH

if TYPE_CHECKING:  # the MCP SDK loads when a trial runs, not when a run is planned (~1 s)
    from mcp import Client


class ReferenceBrowser:
    def __init__(self, client: Client, session_id: str, start_url: str, environment=None):
        self.client, self.session_id, self.start_url = client, session_id, start_url
        self.environment = environment  # where the agent runs: the files it is given are there
        self._tools: dict[str, str] = {}
        self.transcript: list[dict] = []  # every call and what came back, for the agent's log

    async def call(self, tool: str, **arguments: Any) -> Any:
        result = await self.client.call_tool(tool, {"session_id": self.session_id, **arguments})
        text = "\n".join(getattr(c, "text", "") for c in result.content)
        self.transcript.append({"tool": tool, "arguments": arguments, "is_error": result.is_error, "result": text[:2000]})
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {text}")
        try:
            return json.loads(text)
        except ValueError:
            return text

    async def playwright(self, code: str) -> Any:
        out = await self.call("execute_playwright_code", code=code)
        if not out.get("success"):
            raise RuntimeError(f"playwright code failed: {out.get('error')}")
        return out.get("result")

    async def given_file(self, name: str) -> str:
        """A file the task gives its agent (my-info/), read where the agent runs, as an agent reads it."""
        with tempfile.TemporaryDirectory() as folder:
            await self.environment.download_file(f"{GIVEN_PATH}/{name}", Path(folder) / name)
            return (Path(folder) / name).read_text(encoding="utf-8")

    async def webmcp_tools(self) -> dict[str, dict]:
        listed = await self.call("webmcp", action="list")
        self._tools = {t["tool"]["name"]: t for t in listed["tools"]}
        return self._tools

    async def webmcp(self, name: str, /, **tool_input: Any) -> Any:  # a tool may take a `name` too
        if name not in self._tools:
            await self.webmcp_tools()
        if name not in self._tools:
            raise RuntimeError(f"no WebMCP tool {name!r} on this page (have {sorted(self._tools)})")
        out = await self.call("webmcp", action="invoke", tool_ref=self._tools[name]["tool_ref"], input=tool_input)
        if out.get("status") != "completed":
            raise RuntimeError(f"{name} ended {out.get('status')}: {out.get('error_text')}")
        return out.get("output")


def _starts_blank(task_dir: Path) -> bool:
    """The task's browser starts on about:blank (ClawBench's cases): its task.toml says so."""
    import tomllib

    with open(task_dir / "task.toml", "rb") as f:
        return bool(tomllib.load(f).get("metadata", {}).get("webbench", {}).get("start_blank"))


def load_solution(task_dir: Path):
    path = task_dir / "solution" / "reference.py"
    spec = importlib.util.spec_from_file_location(f"webbench_solution_{task_dir.name.replace('-', '_')}", path)
    if spec is None or spec.loader is None or not path.exists():
        raise FileNotFoundError(f"{path}: the reference runner needs this solution file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.solve


class ReferenceAgent(BaseAgent):
    capabilities = AgentCapabilities(mcp_servers=True)

    def __init__(self, *args, task_dir: str, arm: str, browser_session_id: str, start_url: str,
                 wrong_answers: dict[str, dict[str, float]] | None = None, seed: str = "webbench",
                 think_sec: float = 0.0, harness_urls: list[str] | None = None, **kwargs):
        """`wrong_answers` (task -> arm -> chance) makes the replay answer wrongly that often, drawn
        from `seed` and the trial, so a run's outcomes vary as an agent's do yet repeat exactly
        (sequential runs are tested with it: a task where one arm errs has a real effect).
        `think_sec` waits that long before the first call, as an agent waits on its model's first
        turn: a trial as short as a real agent's least (benchmarks/trial_overhead.py --think)."""
        super().__init__(*args, **kwargs)  # Harbor keeps its own session_id: ours is the browser's
        self.check_options({"think_sec": think_sec})
        self.task_dir, self.arm, self.browser_session_id, self.start_url = Path(task_dir), arm, browser_session_id, start_url
        self.wrong_answers, self.seed, self.think_sec = wrong_answers or {}, seed, float(think_sec)

    @staticmethod
    def check_options(options: dict) -> None:
        """A preset's options this agent would refuse, refused at planning (runners.check_preset)."""
        think_sec = options.get("think_sec", 0.0)
        if isinstance(think_sec, bool) or not (isinstance(think_sec, int | float) and 0 <= think_sec <= 600):
            raise ValueError(f"think_sec: {think_sec!r} is not a number of seconds from 0 to 600")

    @staticmethod
    def name() -> str:
        return "webbench-reference"

    def version(self) -> str | None:
        return "1"

    async def setup(self, environment) -> None:
        pass

    async def run(self, instruction, environment, context) -> None:
        solve = load_solution(self.task_dir)
        if self.think_sec:
            await asyncio.sleep(self.think_sec)
        server = self.mcp_servers[0]
        from mcp import Client

        async with Client(server.url, mode="legacy") as client:
            browser = ReferenceBrowser(client, self.browser_session_id, self.start_url, environment)
            try:
                if _starts_blank(self.task_dir):  # told "Start at ...", as every agent is (design/arms.py)
                    await browser.playwright(f"await page.goto({json.dumps(self.start_url)});")
                answer = await solve(browser, self.arm)
            finally:
                self.logs_dir.mkdir(parents=True, exist_ok=True)
                (self.logs_dir / "transcript.jsonl").write_text(
                    "".join(json.dumps(step, default=str) + "\n" for step in browser.transcript), encoding="utf-8")
        chance = self.wrong_answers.get(self.task_dir.name, {}).get(self.arm, 0.0)
        if chance and random.Random(f"{self.seed}/{self.browser_session_id}").random() < chance:
            answer = {}  # a wrong answer: none of the task's fields
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(answer, f)
        await environment.upload_file(f.name, ANSWER_PATH)
        Path(f.name).unlink()
        context.metadata = {"answer": answer}
