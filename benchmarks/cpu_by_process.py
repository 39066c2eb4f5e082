"""Where a trial's CPU goes: one run's CPU time by process kind (pytest and its workers, Chromium,
the agent CLI, Node, the seal), from /proc sampled every 0.2 s, beside the whole machine's busy
time over the run (which includes the scripted model's process).

It says what bounds throughput at high `-n` on a small machine: trials per minute can never
exceed cores x 60 / (CPU seconds per trial).

    .venv/bin/python benchmarks/cpu_by_process.py [--attempts 1] [-k shop-price] [--no-trace] [--marginal 4]

With --marginal MORE it runs again with MORE attempts and prints the difference per extra trial,
which leaves out what a run pays once (imports, services, start-up): a trial's own cost.

With --steady (and --attempts 3 or more) it also prints, from the same run, the CPU spent between
the first trial's record and the last one's, per trial: a trial's own cost without a second run,
so a run's start-up, which varies by a second or more from run to run, does not enter the
figure (the difference of two runs divides that noise by the extra trials only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from xdist_scaling import ENV, ROOT, busy_and_total_ticks, model_endpoint, tree_of  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
SHORT_LIVED = "short-lived processes (in the run's cgroup, never sampled)"


def kind(comm: str, cmdline: str) -> str:
    if "chrom" in comm:
        return "chromium"
    if "codex" in comm or "codex" in cmdline.split(" ", 1)[0]:
        return "codex CLI"
    if comm == "node" or comm.startswith("node"):
        if "driver.js" in cmdline or "run-driver" in cmdline:
            return "node: the harness's Playwright driver"
        if "runner.js" in cmdline:
            return "node: the agent's sealed code runner"
        return "node: the CLI's wrapper, other"
    if "seal_init" in cmdline:
        return "seal (PID 1)"
    if "python" in comm or "pytest" in comm:
        return "python (pytest, workers, services)"
    return comm


def sample(pid: int, seen: dict[int, tuple[str, float]], done: threading.Event,
           timeline: list[tuple[float, dict[str, float], float | None]] | None = None, group: Path | None = None) -> None:
    """Every 0.2 s, each process's CPU so far into `seen`; with a timeline, also the time, the totals
    by kind and the run's cgroup usage (s) at that moment."""
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
        if timeline is not None:
            kinds: dict[str, float] = {}
            for name, cpu in seen.values():
                kinds[name] = kinds.get(name, 0.0) + cpu
            timeline.append((time.time(), kinds, _group_usage(group)))


def _group_usage(group: Path | None) -> float | None:
    return int((group / "cpuacct.usage").read_text()) / 1e9 if group else None


def steady(timeline: list[tuple[float, dict[str, float], float | None]], ends: list[float]) -> tuple[int, dict[str, float]]:
    """CPU s by kind between the samples nearest the first and the last trial's end, per trial between."""
    if len(ends) < 3 or len(timeline) < 2:
        return 0, {}
    at = lambda t: min(timeline, key=lambda row: abs(row[0] - t))  # noqa: E731
    (_, first, group0), (_, last, group1) = at(ends[0]), at(ends[-1])
    trials = len(ends) - 1
    per = {name: (last.get(name, 0.0) - first.get(name, 0.0)) / trials for name in set(first) | set(last)}
    if group0 is not None and group1 is not None:
        per[SHORT_LIVED] = max(0.0, (group1 - group0) / trials - sum(per.values()))
    return trials, per


def measure(attempts: int, k: str, latency: float, no_trace: bool,
            timeline: list | None = None, ends: list[float] | None = None) -> tuple[int, float, float, dict[str, float]]:
    """One run: its trials, wall time, the machine's busy CPU s, and CPU s by process kind, the
    scripted model's process (which stands in for the provider, so it is no one's cost) included."""
    with tempfile.TemporaryDirectory() as tmp, model_endpoint(latency) as url:
        cmd = [sys.executable, "-m", "pytest", "--suite", "local-web", "--runner", "codex", "--model", "openai/webbench-script",
               f"--model-base-url={url}", "--model-price", "1.25,10", "--attempts", str(attempts), "-k", k,
               "-p", "no:cacheprovider", "-q", f"--results-dir={tmp}", "--experiment-id", "cpu",
               *(["--no-trace"] if no_trace else [])]
        busy, _ = busy_and_total_ticks()
        model_before = _model_cpu()
        group = _cgroup()
        started = time.perf_counter()
        run = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               preexec_fn=(lambda: (group / "cgroup.procs").write_text(str(os.getpid()))) if group else None)
        seen: dict[int, tuple[str, float]] = {}
        done = threading.Event()
        sampler = threading.Thread(target=sample, args=(run.pid, seen, done, timeline, group), daemon=True)
        sampler.start()
        run.wait()
        model = _model_cpu() - model_before
        tree = _group_usage(group)
        done.set()
        sampler.join()
        wall = time.perf_counter() - started
        machine = (busy_and_total_ticks()[0] - busy) / TICK
        records = list((Path(tmp) / "cpu" / "trials").glob("*.json"))
        trials = len(records)
        if ends is not None:
            ends.extend(sorted(datetime.fromisoformat(json.loads(r.read_text())["finished_at"]).timestamp() for r in records))
    totals: dict[str, float] = {}
    for name, cpu in seen.values():
        totals[name] = totals.get(name, 0.0) + cpu
    if tree is not None:  # every process the run started, however short its life, and wherever it was reparented
        totals[SHORT_LIVED] = max(0.0, tree - sum(totals.values()))
        try:
            group.rmdir()
        except OSError:
            pass
    totals["the scripted model (the provider's stand-in)"] = model
    return trials, wall, machine, totals


def _cgroup() -> Path | None:
    """A cgroup v1 cpuacct group of the run's own, where the machine offers one (root): it counts
    the CPU of processes too short-lived for a sample, which /proc sampling misses."""
    base = Path("/sys/fs/cgroup/cpuacct")
    group = base / f"webbench-cpu-{os.getpid()}-{time.monotonic_ns()}"
    try:
        group.mkdir()
    except OSError:
        return None
    return group


def _model_cpu() -> float:
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"model_endpoint.py" in stat.read_bytes():
                fields = (stat.parent / "stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / TICK
        except (OSError, IndexError):
            continue
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=1)
    parser.add_argument("-k", default="shop-price")
    parser.add_argument("--latency", type=float, default=3.0)
    parser.add_argument("--no-trace", action="store_true")
    parser.add_argument("--marginal", type=int, metavar="MORE", help="also run MORE attempts and print what each extra "
                        "trial costs (the difference of the two runs: start-up, imports and services left out)")
    parser.add_argument("--steady", action="store_true", help="also print each trial's own CPU from within the run "
                        "(between the first and the last trial's end); needs --attempts 3 or more")
    args = parser.parse_args()
    timeline: list = []
    ends: list[float] = []
    trials, wall, machine, totals = measure(args.attempts, args.k, args.latency, args.no_trace,
                                            *((timeline, ends) if args.steady else ()))
    whole = sum(totals.values())
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores: {trials} trials in {wall:.1f} s, "
          f"the machine busy {machine:.1f} CPU s ({machine / max(trials, 1):.2f} per trial, start-up included); "
          f"by process kind, as sampled ({whole:.1f} s; processes that lived under 0.2 s are missed):")
    for name, cpu in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<40} {cpu:7.1f} s  {cpu / whole:5.1%}  {cpu / max(trials, 1):6.2f} s per trial")
    if args.steady:
        between, per = steady(timeline, ends)
        print(f"between the first trial's end and the last's ({between} trials; every process of the run, "
              "sampled every 0.2 s, the cgroup for the rest), per trial:")
        for name, cpu in sorted(per.items(), key=lambda kv: -kv[1]):
            print(f"  {name:<40} {cpu:6.3f} s per trial")
    if args.marginal:
        more, wall2, machine2, totals2 = measure(args.marginal, args.k, args.latency, args.no_trace)
        extra = more - trials
        unseen = ((machine2 - sum(totals2.values())) - (machine - sum(totals.values()))) / extra
        print(f"{time.strftime('%Y-%m-%d %H:%M')}: {more} trials in {wall2:.1f} s, the machine busy {machine2:.1f} CPU s; "
              f"each of the {extra} extra trials cost the machine {(machine2 - machine) / extra:.2f} CPU s, of which "
              f"{unseen:.2f} s in no sampled process (the kernel's own work, processes shorter than a sample); by process kind:")
        for name in sorted(set(totals) | set(totals2), key=lambda n: -(totals2.get(n, 0) - totals.get(n, 0))):
            print(f"  {name:<40} {(totals2.get(name, 0) - totals.get(name, 0)) / extra:6.2f} s per extra trial")


if __name__ == "__main__":
    main()
