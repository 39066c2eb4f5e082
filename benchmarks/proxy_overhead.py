"""What the proxy adds to a browser call, measured side by side in one run.

Two copies of the local backend's MCP server run over stdio, one reached directly and one through
`python -m pytest_webbench.proxy` (stdio mode, control arm, logging every call). A raw JSON-RPC
line client sends the same request to each in turn, alternating, so drift and noise hit both:
`tools/list` and a small `tools/call` (`execute_playwright_code` returning 1). Then 10,000 calls
through the proxy, with its resident memory read from /proc before and after.

Two reference paths run in the same rounds: a forwarder that only copies bytes (the cost of the
extra process hop) and one that also parses and re-encodes every message (the least any proxy
that reads messages must do). It also times the relay's own work alone, hot, with no transport.

    .venv/bin/python benchmarks/proxy_overhead.py [--pairs 400] [--memory-calls 10000]

Needs Chromium (the local backend). Targets (issue 3): median added < 0.1 ms and < 5% of a direct
local call; memory flat over 10,000 calls.
"""

from __future__ import annotations

import argparse
import json
import os
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
    def __init__(self, argv: list[str], env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, env=env)
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--memory-calls", type=int, default=10_000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as d:
        def proxy(name: str) -> list[str]:
            return [sys.executable, "-m", "pytest_webbench.proxy", "--arm", "control", "--session-id", "S1",
                    "--log", str(Path(d) / f"{name}.jsonl"), "--", *SERVER]

        forwarder = Path(__file__).parent / "bare_forwarder.py"
        clients = {
            "direct": LineClient(SERVER),
            "proxy": LineClient(proxy("proxy")),
            "forwarder, parsing": LineClient([sys.executable, str(forwarder), "--parse", *SERVER]),
            "forwarder, bytes only": LineClient([sys.executable, str(forwarder), *SERVER]),
        }
        try:
            for client in clients.values():  # warm every path (the driver's JIT, the first page)
                for _ in range(50):
                    client.timed(CALL)
                    client.timed(LIST)
            print(f"proxy overhead: {args.pairs} rounds per request kind, every path once per round in rotating "
                  f"order; {os.cpu_count()} cores. 'added' = path minus direct, paired by round.")
            print(f"{'request':<11} {'path':<21} {'median':>8} {'added med':>9} {'added p99':>9} {'added/direct':>12}")
            names = list(clients)
            for kind, message in (("tools/list", LIST), ("tools/call", CALL)):
                times: dict[str, list[float]] = {name: [] for name in names}
                for i in range(args.pairs):
                    for name in names[i % len(names):] + names[:i % len(names)]:
                        times[name].append(clients[name].timed(message))
                direct_med = statistics.median(times["direct"])
                for name in names:
                    added = [a - b for a, b in zip(times[name], times["direct"])]
                    print(f"{kind:<11} {name:<21} {statistics.median(times[name]):>6.3f}ms "
                          + ("" if name == "direct" else
                             f"{statistics.median(added):>7.3f}ms {pct(added, 0.99):>7.3f}ms "
                             f"{statistics.median(added) / direct_med:>11.1%}"))

            proxied = clients["proxy"]
            for _ in range(1000):
                proxied.request(CALL)
            before = rss_kib(proxied.proc.pid)
            for _ in range(args.memory_calls - 1000):
                proxied.request(CALL)
            after = rss_kib(proxied.proc.pid)
            lines = sum(1 for _ in (Path(d) / "proxy.jsonl").open())
            print(f"memory: proxy RSS {before / 1024:.1f} MiB after 1,000 calls, {after / 1024:.1f} MiB after "
                  f"{args.memory_calls:,} ({(after - before) / 1024:+.2f} MiB); {lines:,} log lines written")
        finally:
            for client in clients.values():
                client.close()

    alone = relay_alone(5000)
    print(f"relay alone (rules, accounting, log write; no transport): median {statistics.median(alone) * 1000:.0f} us, "
          f"p99 {pct(alone, 0.99) * 1000:.0f} us per call")


if __name__ == "__main__":
    main()
