"""Where a trial's CPU goes: one run's CPU time by process kind (pytest and its workers, Chromium,
the agent CLI, Node, the seal), from /proc sampled every 0.2 s, beside the whole machine's busy
time over the run (which includes the scripted model's process).

It says what bounds throughput at high `-n` on a small machine: trials per minute can never
exceed cores x 60 / (CPU seconds per trial).

    .venv/bin/python benchmarks/cpu_by_process.py [--attempts 1] [-k shop-price] [--no-trace]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from xdist_scaling import ENV, ROOT, busy_and_total_ticks, model_endpoint, tree_of  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def kind(comm: str, cmdline: str) -> str:
    if "chrom" in comm:
        return "chromium"
    if "codex" in comm or "codex" in cmdline.split(" ", 1)[0]:
        return "codex CLI"
    if comm == "node" or comm.startswith("node"):
        return "node (CLI wrapper, Playwright driver)"
    if "seal_init" in cmdline:
        return "seal (PID 1)"
    if "python" in comm or "pytest" in comm:
        return "python (pytest, workers, services)"
    return comm


def sample(pid: int, seen: dict[int, tuple[str, float]], done: threading.Event) -> None:
    while not done.wait(0.2):
        for p in tree_of(pid):
            try:
                stat = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
                comm = Path(f"/proc/{p}/comm").read_text().strip()
                cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, IndexError):
                continue
            cpu = (int(stat[11]) + int(stat[12])) / TICK  # utime + stime, at its last sample

            seen[p] = (kind(comm, cmd), cpu)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=1)
    parser.add_argument("-k", default="shop-price")
    parser.add_argument("--latency", type=float, default=3.0)
    parser.add_argument("--no-trace", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, model_endpoint(args.latency) as url:
        cmd = [sys.executable, "-m", "pytest", "--suite", "local-web", "--runner", "codex", "--model", "openai/webbench-script",
               f"--model-base-url={url}", "--model-price", "1.25,10", "--attempts", str(args.attempts), "-k", args.k,
               "-p", "no:cacheprovider", "-q", f"--results-dir={tmp}", "--experiment-id", "cpu",
               *(["--no-trace"] if args.no_trace else [])]
        busy, _ = busy_and_total_ticks()
        started = time.perf_counter()
        run = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seen: dict[int, tuple[str, float]] = {}
        done = threading.Event()
        sampler = threading.Thread(target=sample, args=(run.pid, seen, done), daemon=True)
        sampler.start()
        run.wait()
        done.set()
        sampler.join()
        wall = time.perf_counter() - started
        machine = (busy_and_total_ticks()[0] - busy) / TICK
        trials = len(list((Path(tmp) / "cpu" / "trials").glob("*.json")))
    totals: dict[str, float] = {}
    for name, cpu in seen.values():
        totals[name] = totals.get(name, 0.0) + cpu
    whole = sum(totals.values())
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores: {trials} trials in {wall:.1f} s, "
          f"the machine busy {machine:.1f} CPU s ({machine / max(trials, 1):.2f} per trial, start-up included); "
          f"by process kind, as sampled ({whole:.1f} s; processes that lived under 0.2 s are missed):")
    for name, cpu in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<40} {cpu:7.1f} s  {cpu / whole:5.1%}  {cpu / max(trials, 1):6.2f} s per trial")


if __name__ == "__main__":
    main()
