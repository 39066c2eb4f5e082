"""How the report scales: re-render it as a user does for 1,000, 10,000 and 100,000 trials.

Each size is a synthetic experiment directory left as a run leaves it: a manifest, one record
file per trial of real size (~2.2 KB: an instruction, answer, expected value, timings, tokens,
calls, trace), each with its index line (`trials/index.jsonl`) vouching for the trial and pair
pages each trial writes as it ends, as a worker's line does: tasks x attempts x three arms, mixed
outcomes. The first render is then the one a run ends with (its report, the index of trials). The trial
folders (jobs/) are left out, as in results copied off a CI machine. The report is then timed as
a user runs it: `python -m pytest_webbench.report DIR`, start-up included, every form written
and the pages checked, with the child's own peak memory (wait4's ru_maxrss). A second render of
the same directory is timed too.

    .venv/bin/python benchmarks/report_scale.py [--sizes 1000 10000 100000] [--cold]

With --cold the experiment is made without its trial and pair pages and its records' index, as
in records copied without them: the first render then rebuilds the index from the records and
writes every page (133,320 at 100,000 trials). They are never made and deleted: on a file system
without a journal (this VM's ext4), making a file within minutes of deleting many walks past each
recently freed inode, and the render then measured the deletion (19 against 86 us a file).

Targets: 100,000 trials in < 5 s and < 1 GiB peak, growing linearly (issue 19); cold, the first
render in < 15 s and < 1 GiB (issue 50).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTRUCTION = ("On Shoply, how much does the Large Green Bottle cost, in dollars?\n\nAnswer with a JSON object: "
               "`{\"price\": <the price as a number, e.g. 12.34>}`.\n\n\nYou work in a real web browser through the "
               "MCP server named `browser`. Your browser session id is\n`{sid}`: pass it as `session_id` in every "
               "browser tool call. Start at http://shop.localhost:35699/.\nDo the task without signing in anywhere. "
               "When you are done, write your final answer as one JSON\nobject to the file `answer.json` in your "
               "working directory, and also reply with that JSON object\nalone as your last message.\nYou may use "
               "Playwright code, the persistent browser REPL, computer actions, and the WebMCP tools\nthe page offers.")
ARMS = ("control", "treatment", "playwright")
ATTEMPTS = 5


def make_experiment(root: Path, trials: int, seed: int = 7, pages: bool = True) -> Path:
    from pytest_webbench.results.record_index import write_trial_record
    from pytest_webbench.results.records import (
        BrowserCalls, BrowserTrace, PlannedTrial, RunManifest, TaskLimits, Timings, Tokens, TrialRecord, write_manifest,
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
    for trial in planned:
        outcome = rng.choices(["passed", "failed", "errored"], weights=[6, 3, 1])[0]
        value = rng.randint(0, 3)
        write_trial_record(directory, TrialRecord(
            **trial.model_dump(), experiment_id=directory.name, runner="codex", model="openai/gpt-5", grading=limits[trial.task].grading,
            outcome=outcome, stop_reason=None if outcome == "passed" else rng.choice(["wrong_answer", "call_cap", "agent_error"]),
            detail="answer matches" if outcome == "passed" else "answer differs: price 17.49 != 17.99",
            answer={"value": value}, answer_raw=f'{{"value": {value}}}', expected={"value": 2},
            instruction=INSTRUCTION.replace("{sid}", f"{directory.name}-{trial.trial_id}"),
            timings=Timings(trial_sec=30, agent_sec=rng.uniform(5, 60), model_sec=rng.uniform(3, 40), tool_sec=rng.uniform(1, 9)),
            tokens=Tokens(turns=rng.randint(2, 20), input=rng.randint(1000, 90000), cached=rng.randint(0, 500),
                          output=rng.randint(100, 3000), cost_usd=rng.choice([None, rng.uniform(0.01, 0.5)]), source="gateway"),
            calls=BrowserCalls(forwarded=rng.randint(1, 40), rejected=rng.choice([0, 0, 0, 1]), tool_sec=rng.uniform(1, 9),
                               webmcp_invokes={"injected:completed": rng.randint(0, 3)} if trial.arm == "treatment" else {}),
            harbor_trial_dir=f"jobs/{trial.arm}/{trial.trial_id}", trace=BrowserTrace(file="trace.zip"),
            started_at="2026-12-03T14:46:01.689327+00:00", model_requests=rng.randint(2, 20),
        ))
    if not pages:  # records copied without their pages and index
        (directory / "trials" / "index.jsonl").unlink()
        return directory
    # each trial's pages, as its worker writes them when it records it (on every core: it is setup, not measured)
    ids = [t.trial_id for t in planned]
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(_pages, [(str(directory), ids[i:i + 500]) for i in range(0, len(ids), 500)]))
    # and each index line says its trial's pages were written, as a worker's line does (recorder.py
    # writes the pages before the line): the first render below is then the one a run ends with
    from pytest_webbench.results.record_index import rewrite_index, scan_records

    rewrite_index(directory, scan_records(directory), set(ids))
    return directory


def _pages(job: tuple[str, list[str]]) -> None:
    from pytest_webbench.results.records import TrialRecord
    from pytest_webbench.viewer.pages import write_trial_pages

    directory = Path(job[0])
    for trial_id in job[1]:
        write_trial_pages(directory, TrialRecord.model_validate_json((directory / "trials" / f"{trial_id}.json").read_bytes()))


def render(directory: Path) -> dict:
    """`python -m pytest_webbench.report DIR` as a user runs it: wall time and the child's peak RSS."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "pytest_webbench.report", str(directory)], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"{directory}: the report failed ({child.returncode}): {child.stderr.read().decode()[-2000:]}")
    return {"seconds": elapsed, "peak_mib": usage.ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--cold", action="store_true", help="delete the pages and the index before the first render")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rows = []
        for size in args.sizes:
            made = time.perf_counter()
            directory = make_experiment(Path(d), size, pages=not args.cold)
            trials = sum(1 for _ in (directory / "trials").glob("*.json"))
            print(f"{trials:>7,} trials made in {time.perf_counter() - made:.0f} s", flush=True)
            first, second = render(directory), render(directory)
            rows.append((trials, first))
            for label, result in (("first render" + (" (cold)" if args.cold else ""), first), ("again", second)):
                print(f"  {label:>12}: {result['seconds']:6.2f} s, peak {result['peak_mib']:7.1f} MiB "
                      f"({result['seconds'] / trials * 1e6:.0f} us per trial)", flush=True)
            os.system(f"rm -rf {directory}")
        if len(rows) > 1:
            (n0, r0), (n1, r1) = rows[0], rows[-1]
            print(f"growth {n0:,} -> {n1:,} trials: time x{r1['seconds'] / r0['seconds']:.1f} for x{n1 / n0:.0f} trials")


if __name__ == "__main__":
    main()
