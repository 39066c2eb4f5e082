"""What the proxy adds to a browser call, measured side by side in one run.

Copies of the local backend's MCP server run over stdio, each its own process: one reached
directly, one through `python -m pytest_webbench.proxy` (stdio mode, control arm, logging every
call). A raw JSON-RPC line client sends the same request to each in turn, alternating, so drift
and noise hit both: `tools/list` and a small `tools/call` (`execute_playwright_code` returning 1).
A second direct path is the null: what two servers differ by with nothing between. Everything is
started afresh per session. Then 10,000 calls through the proxy, with its resident memory read
from /proc before and after.

Two reference paths run in the same rounds: a forwarder that only copies bytes (the cost of the
extra process hop) and one that also parses and re-encodes every message (the least any proxy
that reads messages must do). It also times the relay's own work alone, hot, with no transport.

    .venv/bin/python benchmarks/proxy_overhead.py [--pairs 400] [--memory-calls 10000] [--against TREE]

`--against TREE` adds a path through the proxy of another checkout (say, `git worktree add
/tmp/old HEAD~3`), run from that tree's source, so a change is measured beside what it replaces.

Needs Chromium (the local backend). Targets (issue 3): median added < 0.1 ms and < 5% of a direct
local call; memory flat over 10,000 calls.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVER = [sys.executable, "-m", "pytest_webbench.browsers.mcp_server", "--session", "S1"]
INIT = {"jsonrpc": "2.0", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
CALL = {"jsonrpc": "2.0", "method": "tools/call", "params": {
    "name": "execute_playwright_code", "arguments": {"session_id": "S1", "code": "return 1"}}}
LIST = {"jsonrpc": "2.0", "method": "tools/list"}


class LineClient:
    def __init__(self, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, env=env, cwd=cwd)
        self.next_id = 0
        self.request(INIT)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")

    def request(self, message: dict) -> dict:
        self.next_id += 1
        self.send({**message, "id": self.next_id})
        while True:
            reply = json.loads(self.proc.stdout.readline())
            if reply.get("id") == self.next_id:
                if "error" in reply or reply.get("result", {}).get("isError"):
                    raise RuntimeError(f"call failed: {reply}")
                return reply

    def timed(self, message: dict) -> float:
        started = time.perf_counter()
        self.request(message)
        return (time.perf_counter() - started) * 1000

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def relay_alone(n: int) -> list[float]:
    """The relay's own work per call (rules, accounting, log write), no transport at all."""
    from pytest_webbench.design.arms import arm_policy
    from pytest_webbench.proxy.log import CallLog
    from pytest_webbench.proxy.relay import ProxySession

    text = '{"success": true, "result": 1}'
    with tempfile.TemporaryDirectory() as d:
        session = ProxySession(arm_policy("control"), "S1", None, CallLog(Path(d) / "log.jsonl"), trial="bench")
        line = json.dumps({**CALL, "id": 1}).encode()
        times = []
        for _ in range(n):
            started = time.perf_counter()
            step = session.receive_line(line)
            reply = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}}
            json.dumps(session.complete(step, reply))
            times.append((time.perf_counter() - started) * 1000)
        session.log.close()
        return times


def session(args: argparse.Namespace, d: str, number: int, rng: random.Random) -> dict[str, dict[str, list[float]]]:
    """One set of fresh processes, started in a shuffled order: each path's server is its own, and
    which one lands where on two cores shifts a path's times by ~0.1 ms (a second direct path
    shows it), so that placement is drawn again per session and the figures are their medians."""
    def proxy(name: str) -> list[str]:
        return [sys.executable, "-m", "pytest_webbench.proxy", "--arm", "control", "--session-id", "S1",
                "--log", str(Path(d) / f"{name}-{number}.jsonl"), "--", *SERVER]

    forwarder = str(Path(__file__).parent / "bare_forwarder.py")
    paths = {
        "direct": lambda: LineClient(SERVER),
        "direct, a second": lambda: LineClient(SERVER),
        "proxy": lambda: LineClient(proxy("proxy")),
        "forwarder, parsing": lambda: LineClient([sys.executable, forwarder, "--parse", *SERVER]),
        "forwarder, bytes only": lambda: LineClient([sys.executable, forwarder, *SERVER]),
    }
    if args.against:  # run from that tree: `-m` puts the working folder first on the path, ahead of PYTHONPATH
        tree = args.against.resolve()
        paths[f"proxy of {tree.name}"] = lambda: LineClient(
            proxy("against"), env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree)
    order = list(paths)
    rng.shuffle(order)
    clients = {}
    try:
        for name in order:
            clients[name] = paths[name]()
        for client in clients.values():  # warm every path (the driver's JIT, the first page)
            for _ in range(50):
                client.timed(CALL)
                client.timed(LIST)
        times: dict[str, dict[str, list[float]]] = {}
        names = list(paths)
        for kind, message in (("tools/list", LIST), ("tools/call", CALL)):
            times[kind] = {name: [] for name in names}
            for i in range(args.pairs):
                for name in names[i % len(names):] + names[:i % len(names)]:
                    times[kind][name].append(clients[name].timed(message))
        if number == 0:
            memory(clients["proxy"], args.memory_calls, Path(d) / "proxy-0.jsonl")
        return times
    finally:
        for client in clients.values():
            client.close()


def memory(proxied: LineClient, calls: int, log: Path) -> None:
    for _ in range(1000):
        proxied.request(CALL)
    before = rss_kib(proxied.proc.pid)
    for _ in range(calls - 1000):
        proxied.request(CALL)
    after = rss_kib(proxied.proc.pid)
    lines = sum(1 for _ in log.open())
    print(f"memory: proxy RSS {before / 1024:.1f} MiB after 1,000 calls, {after / 1024:.1f} MiB after "
          f"{calls:,} ({(after - before) / 1024:+.2f} MiB); {lines:,} log lines written")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=300, help="rounds per request kind in each session")
    parser.add_argument("--sessions", type=int, default=5, help="fresh sets of processes, each placed anew")
    parser.add_argument("--memory-calls", type=int, default=10_000)
    parser.add_argument("--against", type=Path, help="another checkout whose proxy runs beside this one")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    added: dict[tuple[str, str], list[float]] = {}
    direct: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as d:
        for number in range(args.sessions):
            times = session(args, d, number, rng)
            for kind, by_path in times.items():
                direct.setdefault(kind, []).append(statistics.median(by_path["direct"]))
                for name, values in by_path.items():
                    if name != "direct":
                        diffs = [a - b for a, b in zip(values, by_path["direct"])]
                        added.setdefault((kind, name), []).append(statistics.median(diffs))
    print(f"proxy overhead: {args.sessions} sessions of fresh processes (started in shuffled order), {args.pairs} "
          f"rounds each per request kind, every path once per round in rotating order; {os.cpu_count()} cores.")
    print("'added' = path minus direct, paired by round: its median in each session, then the median of those.")
    print(f"{'request':<11} {'path':<23} {'added':>8}  per session")
    for kind in direct:
        print(f"{kind:<11} {'direct (its median)':<23} {statistics.median(direct[kind]):>6.3f}ms")
        for (k, name), values in added.items():
            if k == kind:
                print(f"{kind:<11} {name:<23} {statistics.median(values):>6.3f}ms  "
                      + " ".join(f"{v:+.3f}" for v in values))

    alone = relay_alone(5000)
    print(f"relay alone (rules, accounting, log write; no transport): median {statistics.median(alone) * 1000:.0f} us, "
          f"p99 {pct(alone, 0.99) * 1000:.0f} us per call")


if __name__ == "__main__":
    main()
