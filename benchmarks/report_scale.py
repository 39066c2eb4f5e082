"""How the report scales: build and render it from disk for 1,000, 10,000 and 100,000 trials.

Each size is a synthetic experiment directory (a manifest, one record file per trial and the
trial and pair pages each trial writes as it ends, as a run leaves them: tasks x attempts x three
arms, mixed outcomes, tokens, calls). The report is then re-rendered in a fresh subprocess (every
form, the pages checked and the index written), which reports its wall time and peak memory
(ru_maxrss), so one size's allocations never flatter the next.

    .venv/bin/python benchmarks/report_scale.py [--sizes 1000 10000 100000]

Target (issue 4): 100,000 trials in < 5 s and < 1 GiB peak, growing linearly.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARMS = ("control", "treatment", "playwright")
ATTEMPTS = 5


def make_experiment(root: Path, trials: int, seed: int = 7) -> Path:
    from pytest_webbench.records import (
        BrowserCalls, PlannedTrial, RunManifest, TaskLimits, Timings, Tokens, TrialRecord, write_manifest,
    )

    rng = random.Random(seed)
    tasks = max(1, trials // (ATTEMPTS * len(ARMS)))
    directory = root / f"scale-{trials}"
    planned = []
    for t in range(tasks):
        for attempt in range(1, ATTEMPTS + 1):
            for position, arm in enumerate(ARMS):
                paired = arm != "playwright"
                pair = f"task{t:05d}-a{attempt}"
                planned.append(PlannedTrial(trial_id=f"{pair}-{arm}", task=f"task{t:05d}", attempt=attempt, arm=arm,
                                            pair_id=pair if paired else None, pair_position=position if paired else None))
    limits = {f"task{t:05d}": TaskLimits(grading=("pinned", "page", "format")[t % 3], turn_cap=40, spend_limit_usd=1.0,
                                         placebo=t == 0, tool_batch=None if t == 0 else "site", timeout_sec=600)
              for t in range(tasks)}
    write_manifest(directory, RunManifest(
        experiment_id=directory.name, created_at="2026-12-02T00:00:00+00:00", suite="synthetic", suite_path="/x",
        runner="codex", model="m", browser="local", attempts=ATTEMPTS, arms=list(ARMS), paired=True, trials=planned,
        task_limits=limits, content_hashes={}))
    (directory / "trials").mkdir(exist_ok=True)
    from pytest_webbench.viewer.pages import write_trial_pages

    for trial in planned:
        outcome = rng.choices(["passed", "failed", "errored"], weights=[6, 3, 1])[0]
        record = TrialRecord(
            **trial.model_dump(), experiment_id=directory.name, runner="codex", grading=limits[trial.task].grading,
            outcome=outcome, stop_reason=None if outcome == "passed" else rng.choice(["wrong_answer", "call_cap", "agent_error"]),
            answer={"value": rng.randint(0, 3)}, timings=Timings(trial_sec=30, agent_sec=rng.uniform(5, 60)),
            tokens=Tokens(input=rng.randint(1000, 90000), cached=rng.randint(0, 500), output=rng.randint(100, 3000),
                          cost_usd=rng.choice([None, rng.uniform(0.01, 0.5)])),
            calls=BrowserCalls(forwarded=rng.randint(1, 40), rejected=rng.choice([0, 0, 0, 1]),
                               webmcp_invokes={"injected:completed": rng.randint(0, 3)} if trial.arm == "treatment" else {}),
        )
        (directory / "trials" / f"{trial.trial_id}.json").write_text(record.model_dump_json(indent=2))
        write_trial_pages(directory, record)  # as the trial's worker does when it records it
    return directory


def measure(directory: Path) -> dict:
    """In this process: build and write the report, then report time and peak RSS."""
    from pytest_webbench.report.write import write_report

    started = time.perf_counter()
    report = write_report(directory)
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "recorded": report.recorded_trials}


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        print(json.dumps(measure(Path(sys.argv[2]))))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rows = []
        for size in args.sizes:
            directory = make_experiment(Path(d), size)
            out = subprocess.run([sys.executable, __file__, "--measure", str(directory)], capture_output=True, text=True, check=True)
            result = json.loads(out.stdout)
            rows.append((size, result))
            print(f"{result['recorded']:>7,} trials: {result['seconds']:6.2f} s, peak {result['peak_mib']:7.1f} MiB "
                  f"({result['seconds'] / result['recorded'] * 1e6:.0f} us per trial)", flush=True)
        if len(rows) > 1:
            (n0, r0), (n1, r1) = rows[0], rows[-1]
            print(f"growth {n0:,} -> {n1:,} trials: time x{r1['seconds'] / r0['seconds']:.1f} for x{n1 / n0:.0f} trials")


if __name__ == "__main__":
    main()
