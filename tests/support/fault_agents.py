"""A Harbor agent for fault tests: the reference solution, with one real fault injected in the
trials named. Used through a runner preset file (`--runner faults.toml`), as a user's own agent is.

Faults, each done for real to this process or its children:
- crash_browser: SIGKILL the worker's Chromium after the agent's first call, then carry on.
- kill_upstream: SIGKILL the process named by $WEBBENCH_FAULT_PID (a browser MCP server).
- crash_agent: the agent's process dies by a signal (exit 137), and the agent reports it.
- hang: the agent's command never returns (Harbor's timeout ends it).
- interrupt: SIGINT to this pytest process (Ctrl-C), while an agent command is running.
- kill_worker: SIGKILL this pytest process (an xdist worker) mid-trial.
- shadow_verifier: answer wrongly and leave code where a task verifier's interpreter would load it
  (a json.py in /app, a usercustomize.py in $HOME's site-packages, a conftest.py in /tests), each
  writing reward 1 and killing its process group; checked to take over python3 where the agent runs.
- unholdable: solve, then leave what no record can hold, as a hostile agent may: text no UTF-8 file
  can hold (a lone UTF-16 surrogate, which JSON and JavaScript can spell) in the page's title and
  body, its trajectory and its answer, and a trajectory of the wrong shapes and nested too deep.

A fault fires once per armed file: `armed` names a file that must exist and is removed as the
fault fires, so a resumed run replays cleanly.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from pytest_webbench.runners.reference import ReferenceAgent, ReferenceBrowser


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def wait_dead(pid: int) -> None:
    """Until the process has exited (gone, or a zombie its parent has not reaped yet): its sockets
    and pipes are closed by then. Polls the kernel's state, with no fixed sleep to trust."""
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("Z", "X"):
            return
        os.sched_yield()


class FaultAgent(ReferenceAgent):
    def __init__(self, *args, fault: str, trials: list[str], armed: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.fault, self.trials, self.armed = fault, trials, Path(armed)

    @staticmethod
    def name() -> str:
        return "webbench-fault"

    def _fires(self) -> bool:
        if not any(self.browser_session_id.endswith("-" + t) for t in self.trials):
            return False
        try:
            self.armed.unlink()
        except FileNotFoundError:
            return False
        return True

    async def run(self, instruction, environment, context) -> None:
        if not self._fires():
            return await super().run(instruction, environment, context)
        if self.fault == "crash_agent":
            result = await environment.exec("kill -KILL $$")
            raise RuntimeError(f"the agent's process died: exit {result.return_code}")
        if self.fault == "plant_tests":  # leave a file where the task's own verifier will run, then solve
            planted = await environment.exec("echo planted > /tests/planted.txt && cat /tests/planted.txt")
            assert (planted.return_code, planted.stdout.strip()) == (0, "planted"), planted  # the plant took
            return await super().run(instruction, environment, context)
        if self.fault == "shadow_verifier":
            return await self._shadow_verifier(environment)
        if self.fault == "hang":
            await environment.exec("sleep 3600")
            return
        if self.fault == "interrupt":
            marker = self.armed.name  # the test looks for this process afterwards: it must be gone
            # The command says it has started through a FIFO in its working folder: the Ctrl-C fires on
            # that event, however loaded the machine (scanning /proc for it once missed it for 600 s).
            started = environment.host_path("/app") / f"{marker}.started"
            os.mkfifo(started)
            running = asyncio.ensure_future(environment.exec(f"echo go > {marker}.started; exec -a {marker} sleep 3600"))
            said = await asyncio.get_running_loop().run_in_executor(None, started.read_text)  # blocks until written
            assert said.strip() == "go", said
            # The user presses Ctrl-C now: the test, outside the run, sends it on this event.
            self.armed.with_name(self.armed.name + ".started").write_text("started")
            await running
            return
        if self.fault == "kill_worker":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.fault == "unholdable":
            return await self._unholdable(instruction, environment, context)
        # crash_browser / kill_upstream: one call, the fault, then the solution as usual
        from mcp import Client

        async with Client(self.mcp_servers[0].url, mode="legacy") as client:
            browser = ReferenceBrowser(client, self.browser_session_id, self.start_url)
            await browser.playwright("return page.url()")
        if self.fault == "crash_browser":
            victims = [p for p in descendants(os.getpid())
                       if (argv := cmdline(p)) and "chromium" in Path(argv[0]).name and not any(a.startswith("--type=") for a in argv)]
            assert victims, "no Chromium under this worker"
        elif self.fault == "kill_upstream":
            victims = [int(os.environ["WEBBENCH_FAULT_PID"])]
        else:
            raise ValueError(f"unknown fault {self.fault!r}")
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        for pid in victims:
            wait_dead(pid)
        return await super().run(instruction, environment, context)

    async def _shadow_verifier(self, environment) -> None:
        forge = ("import os, signal\nos.makedirs('/logs/verifier', exist_ok=True)\n"
                 "open('/logs/verifier/reward.txt', 'w').write('1')\nos.killpg(0, signal.SIGKILL)\n")
        plant = (f"cat > /app/json.py <<'EOF'\n{forge}EOF\n"
                 "site=$(python3 -S -c 'import site; print(site.getusersitepackages())') && mkdir -p \"$site\" && "
                 "cp /app/json.py \"$site/usercustomize.py\" && cp /app/json.py /tests/conftest.py && "
                 "printf '{\"price\": \"1.00\"}' > /app/answer.json")
        planted = await environment.exec(plant)
        assert planted.return_code == 0, planted.stderr
        for where in ("/app", "/"):  # each plant takes over python3 here, as the verifier would run it
            await environment.exec("rm -f /logs/verifier/reward.txt")
            await environment.exec(f"cd {where} && python3 -c 'import json'")
            took = await environment.exec("cat /logs/verifier/reward.txt")
            assert took.stdout.strip() == "1", f"the plant did not take over python3 in {where}: {took}"
        await environment.exec("rm -f /logs/verifier/reward.txt")

    async def _unholdable(self, instruction, environment, context) -> None:
        import json
        import tempfile

        from mcp import Client

        from pytest_webbench.design.arms import ANSWER_PATH

        await super().run(instruction, environment, context)
        async with Client(self.mcp_servers[0].url, mode="legacy") as client:
            browser = ReferenceBrowser(client, self.browser_session_id, self.start_url)
            await browser.playwright("await page.evaluate(() => { document.title = 'x\\ud800'; document.body.append('\\udfff'); });"
                                     " return 1")
        # its own account, where Harbor keeps an agent's trajectory (ATIF): its words with a lone
        # surrogate, tool calls that are no list or no object, arguments nested past any parser, and a
        # step nested deeper than pydantic reads (a whole file nested past Python's parser is unread)
        steps = [{"source": "agent", "message": "done \udfff", "timestamp": "2026-12-06T00:00:00Z"},
                 {"source": "agent", "tool_calls": 5, "message": [{"text": 7}]},
                 {"source": "agent", "tool_calls": [{"function_name": "x", "arguments": "[" * 5000}, "not a call"]}]
        text = json.dumps({"steps": steps})
        (self.logs_dir / "trajectory.json").write_text(text[:-2] + ', {"source": "agent", "extra": ' + "[" * 300 + "]" * 300 + "}]}")
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"price": "\ud800"}, f)  # written as the escape "\\ud800": valid JSON, not text
        await environment.upload_file(f.name, ANSWER_PATH)
        Path(f.name).unlink()
