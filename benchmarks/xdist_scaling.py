"""Throughput and memory at the concurrency real runs use: `-n 1, 2, 4, 8, 16`.

Settings (each a whole pytest run, pairs kept, the real Codex CLI against the scripted model
endpoint answering after `--latency` seconds a turn, as hosted models do):
- `local`: local-web, every task and arm, the local Chromium backend and the bundled sites.
- `kernel`: public-web with `--browser kernel` against stand-ins of Kernel's API and hosted MCP
  server, each answering after `--kernel-latency` seconds; no local Chromium or site may start
  (checked: the run's process tree is sampled for a browser process).
- `reference`: local-web with the reference runner (no model: a trial is all CPU), for contrast.

Throughput is trials per minute of the whole run (start-up, services, every trial, the report), so
the figure is what a user waits for. Memory is the peak, over the run, of the summed PSS of every
process of the run (pytest, its workers, their Chromium and sites, the agents' CLIs), sampled
every 0.5 s; PSS splits shared pages between their processes, so the sum is what the run costs the
machine. Alongside, the cores busy (from /proc/stat), which says whether CPU is the bound.

    .venv/bin/python benchmarks/xdist_scaling.py [--workers 1 2 4 8 16] [--attempts 2] [--settings local kernel]

Targets (issue 19): speed-up over `-n 1` of at least 0.8 x n up to `-n 8` and 0.6 x n at `-n 16`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = ROOT / "tests" / "support"
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "sk-scripted"}  # the scripted endpoint's
KERNEL_KEY = "sk-kernel-standin"


def busy_and_total_ticks() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def tree_of(root: int) -> list[int]:
    tree, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(tree.get(pid, []))
    return out


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Sampler(threading.Thread):
    """The run's summed PSS and whether a browser ever ran in it, every `every` seconds."""

    def __init__(self, pid: int, every: float = 0.5):
        super().__init__(daemon=True)
        self.pid, self.every, self.peak_kib, self.browsers = pid, every, 0, set()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            pids = tree_of(self.pid)
            self.peak_kib = max(self.peak_kib, sum(_pss_kib(p) for p in pids))
            for pid in pids:
                try:
                    name = Path(f"/proc/{pid}/comm").read_text().strip()
                except OSError:
                    continue
                if "chrom" in name:
                    self.browsers.add(name)


def timed_run(results: Path, experiment: str, args: list[str], workers: int, env: dict) -> dict:
    busy, total = busy_and_total_ticks()
    started = time.perf_counter()
    run = subprocess.Popen([sys.executable, "-m", "pytest", *args, "-n", str(workers), "-p", "no:randomly",
                            "-p", "no:cacheprovider", "-q", f"--results-dir={results}", "--experiment-id", experiment],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = Sampler(run.pid)
    sampler.start()
    out, _ = run.communicate()
    sampler.done.set()
    sampler.join()
    wall = time.perf_counter() - started
    busy_after, total_after = busy_and_total_ticks()
    records = [json.loads(p.read_text()) for p in (results / experiment / "trials").glob("*.json")]
    if run.returncode not in (0, 1) or not records:  # 1: some trials failed their grade, as the script does
        sys.exit(f"{experiment} failed ({run.returncode}):\n{out[-3000:]}")
    errored = [r["trial_id"] for r in records if r["outcome"] == "errored"]
    return {"wall": wall, "trials": len(records), "errored": errored, "peak_mib": sampler.peak_kib / 1024,
            "browsers": sorted(sampler.browsers),
            "cores": (busy_after - busy) / (total_after - total) * (os.cpu_count() or 1)}


def _wait_for_port(port: int) -> None:
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


@contextmanager
def model_endpoint(latency: float):
    """The scripted model, in its own process, answering after `latency` seconds."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(SUPPORT / "model_endpoint.py"), "--port", str(port), "--latency", str(latency)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait()


@contextmanager
def kernel_standins(latency: float, tmp: Path):
    port_file = tmp / "kernel-ports"
    server = subprocess.Popen([sys.executable, str(SUPPORT / "kernel_services.py"), "--key", KERNEL_KEY,
                               "--latency", str(latency), "--port-file", str(port_file)], stderr=subprocess.DEVNULL)
    try:
        for _ in range(400):
            if port_file.exists():
                break
            time.sleep(0.05)
        api, mcp = port_file.read_text().split()
        yield {"KERNEL_API_KEY": KERNEL_KEY, "KERNEL_BASE_URL": f"http://127.0.0.1:{api}",
               "KERNEL_MCP_URL": f"http://127.0.0.1:{mcp}/mcp"}
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--attempts", type=int, default=2)
    parser.add_argument("--latency", type=float, default=3.0, help="the scripted model's seconds per turn")
    parser.add_argument("--kernel-latency", type=float, default=0.2, help="the Kernel stand-ins' seconds per request")
    parser.add_argument("--settings", nargs="+", default=["local", "kernel"], choices=["local", "kernel", "reference"])
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB", flush=True)
    with tempfile.TemporaryDirectory() as tmp, model_endpoint(args.latency) as model_url:
        codex = ["--runner", "codex", "--model", "openai/webbench-script", f"--model-base-url={model_url}",
                 "--model-price", "1.25,10"]  # priced, so the gateway meters and caps as in a real run
        for setting in args.settings:
            env, run_args = dict(ENV), ["--attempts", str(args.attempts)]
            with kernel_standins(args.kernel_latency, Path(tmp)) if setting == "kernel" else _nothing() as kernel_env:
                env.update(kernel_env or {})
                run_args += {"local": ["--suite", "local-web", *codex],
                             "kernel": ["--suite", "public-web", "--browser", "kernel", *codex],
                             "reference": ["--suite", "local-web", "--runner", "reference"]}[setting]
                print(f"{setting}:", flush=True)
                base = None
                for workers in args.workers:
                    r = timed_run(Path(tmp), f"{setting}-n{workers}", run_args, workers, env)
                    rate = r["trials"] / r["wall"] * 60
                    base = base or rate / workers  # per worker at the smallest n given (normally -n 1)
                    speedup = rate / base
                    print(f"  -n {workers:>2}: {r['trials']} trials in {r['wall']:6.1f} s = {rate:6.1f}/min, "
                          f"speed-up {speedup:5.2f}x ({speedup / workers:.2f} x n), peak {r['peak_mib']:7.0f} MiB "
                          f"({r['peak_mib'] / workers:5.0f} MiB per concurrent trial), {r['cores']:.2f} cores busy"
                          + (f", {len(r['errored'])} errored" if r["errored"] else "")
                          + (f", browsers seen: {r['browsers']}" if setting == "kernel" and r["browsers"] else ""), flush=True)
                    if setting == "kernel" and r["browsers"]:
                        sys.exit("a local browser started in a --browser kernel run")


@contextmanager
def _nothing():
    yield None


if __name__ == "__main__":
    main()
