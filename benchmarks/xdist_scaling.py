"""Throughput of `-n 2` against `-n 0` on local-web, pairs kept, in two settings:

- `reference`: the reference runner, every task and arm. Its agent is a few MCP calls made at
  once from the pytest process, so a trial is all CPU work (Chromium, Node, Python) on this
  machine: the harness's worst case.
- `codex`: the real Codex CLI against the scripted model endpoint answering after `--latency`
  seconds, as a hosted model does (`-k shop-price`, the task the script solves, every arm). A
  trial mostly waits, as a real run's do.

Side by side in one run, alternating: the same run serially and on two xdist workers.
Throughput is trials per minute of the whole pytest run (start-up, services, every trial, the
report), so the figure is what a user waits for.
Alongside, how many of the machine's cores were busy during each run (from /proc/stat: every
process, Chromium's included), which says whether the cores, not the harness, are the bound.

    .venv/bin/python benchmarks/xdist_scaling.py [--attempts 2] [--rounds 2] [--latency 2] [--settings reference codex]

Needs Chromium. Target (issue 8): >= 1.8x on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def busy_and_total_ticks() -> tuple[int, int]:
    """The machine's CPU ticks: busy (everything but idle and iowait) and total."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def timed_run(results: Path, experiment: str, runner_args: list[str], workers: int) -> tuple[float, int, float]:
    """Wall seconds, trials recorded, cores busy on average."""
    busy, total = busy_and_total_ticks()
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "--suite", "local-web", *runner_args,
                           "-n", str(workers), "-p", "no:randomly", "-p", "no:cacheprovider",
                           "-q", f"--results-dir={results}", "--experiment-id", experiment],
                          cwd=ROOT, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{experiment} failed ({done.returncode}):\n{done.stdout[-3000:]}")
    records = [json.loads(p.read_text()) for p in (results / experiment / "trials").glob("*.json")]
    if not records or any(r["outcome"] != "passed" for r in records):
        sys.exit(f"{experiment}: every reference trial should pass")
    busy_after, total_after = busy_and_total_ticks()
    return wall, len(records), (busy_after - busy) / (total_after - total) * (os.cpu_count() or 1)


@contextmanager
def model_endpoint(latency: float):
    """The scripted model, in its own process, answering after `latency` seconds."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "model_endpoint.py"), "--port", str(port),
                               "--latency", str(latency)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):  # until it accepts connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--latency", type=float, default=2.0, help="the scripted model's seconds per answer (codex)")
    parser.add_argument("--settings", nargs="+", default=["reference", "codex"], choices=["reference", "codex"])
    args = parser.parse_args()
    os.environ["OPENAI_API_KEY"] = ENV["OPENAI_API_KEY"] = "sk-scripted"  # the scripted endpoint's, not a real key
    with tempfile.TemporaryDirectory() as tmp, model_endpoint(args.latency) as model_url:
        settings = {
            "reference": ["--runner", "reference", "--attempts", str(args.attempts)],
            "codex": ["--runner", "codex", "--model", "openai/webbench-script", f"--model-base-url={model_url}",
                      "-k", "shop-price", "--attempts", str(args.attempts * 2)],
        }
        for setting in args.settings:
            rates: dict[int, list[float]] = {0: [], 2: []}
            cores: dict[int, list[float]] = {0: [], 2: []}
            print(f"{setting}:", flush=True)
            for n in range(args.rounds):
                for workers in (0, 2):
                    wall, trials, busy = timed_run(Path(tmp), f"{setting}-{n}-n{workers}", settings[setting], workers)
                    rates[workers].append(trials / wall * 60)
                    cores[workers].append(busy)
                    print(f"  round {n + 1}, -n {workers}: {trials} trials in {wall:.1f} s ({trials / wall * 60:.1f}/min), "
                          f"{busy:.2f} cores busy", flush=True)
            serial, parallel = statistics.median(rates[0]), statistics.median(rates[2])
            print(f"  medians: -n 0 {serial:.1f} trials/min ({statistics.median(cores[0]):.2f} cores busy), "
                  f"-n 2 {parallel:.1f} trials/min ({statistics.median(cores[2]):.2f} cores busy)")
            print(f"  speed-up {parallel / serial:.2f}x on {os.cpu_count()} cores; target >= 1.8x: "
                  f"{'met' if parallel / serial >= 1.8 else 'NOT met'}", flush=True)


if __name__ == "__main__":
    main()
