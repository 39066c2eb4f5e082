"""What the harness costs per trial, against the least a browser trial can cost.

Side by side in one run, alternating rounds:
- a harness round: `pytest --suite local-web --runner reference` (every task and arm, one attempt).
  Per trial, the harness's overhead is the item's wall time (set-up, call and tear-down, from the
  JUnit XML) minus the runner's own time (the record's `agent_sec`: the agent process, start to end).
  What is left is opening the session, registering tools, the proxy route, Harbor's trial set-up,
  grading (page reads), the screenshot, the record and Harbor's result files.
- a bare round: as many times, with Playwright for Python on the same Chromium, a new browser
  context and page, `goto` the same start page (served the same way), and close the context: what
  any harness that gives each trial a fresh page pays. Then the same traced as a trial is
  (screenshots and DOM snapshots, the zip saved), the bare page "with traces on".

- an untraced harness round (`--no-trace`), beside the traced one: what the browser trace
  (Playwright tracing with screenshots and DOM snapshots, saved as trace.zip) adds per trial.
- a walled round: the local backend's own session as a trial has it (browsers/pod.py: a Chromium of
  its own in a seal, the harness's connection through the seal's door), `goto` the same start page,
  the agent's code runner started by a first call (its own seal), and closed: what the walls around
  an agent's browser code cost per trial, against the bare page above.

    .venv/bin/python benchmarks/trial_overhead.py [--rounds 3] [--think SEC]

`--think SEC`: the reference runner waits SEC seconds before its first call (its `think_sec`), as
an agent waits on its model, so a trial lasts as long as a real agent's least and the next
trial's pod, started while it runs, is ready when it ends (issue 50). Only the traced harness and
bare rounds run then; the first trial of the session (services and the first pod started while
it waits) is reported apart.

Needs Chromium. Targets: median overhead <= 1.5x the bare median (issue 8); tracing adds at most
5% to a trial of a real agent, taken as one minute (issue 17: stated share of a trial's time).
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
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


REAL_TRIAL_SEC = 60.0  # a real agent's trial, for the tracing share


def harness_round(tmp: Path, n: int, *extra: str, runner: str = "reference") -> tuple[list[float], list[float], float, list[float]]:
    """Overheads and agent times (s) of one suite run, the first item's overhead (the session's
    services start in it), and the item times of the trials counted."""
    junit = tmp / f"junit-{n}.xml"
    results = tmp / "results"
    experiment = f"overhead-{n}"
    subprocess.run([sys.executable, "-m", "pytest", "--suite", "local-web", "--runner", runner, "--attempts", "1",
                    "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "--results-dir", str(results),
                    "--experiment-id", experiment, f"--junitxml={junit}", "-o", "junit_duration_report=total", *extra],
                   cwd=ROOT, env=ENV, check=True, capture_output=True)
    item_sec = {case.get("name", "").split("[", 1)[-1].rstrip("]"): float(case.get("time", 0))
                for case in ET.parse(junit).getroot().iter("testcase")}
    first_id, last_id = next(iter(item_sec)), list(item_sec)[-1]
    overheads, agents, items, first = [], [], [], None
    for record_file in sorted((results / experiment / "trials").glob("*.json")):
        record = json.loads(record_file.read_text())
        agent = record["timings"]["agent_sec"]
        if record["outcome"] != "passed" or agent is None:
            sys.exit(f"{record['trial_id']}: {record['outcome']} ({record['stop_reason']}): the reference runner should pass")
        if record["trial_id"] == first_id:
            first = item_sec[first_id] - agent
        elif record["trial_id"] != last_id:  # the first and last also start and stop the session's services
            overheads.append(item_sec[record["trial_id"]] - agent)
            agents.append(agent)
            items.append(item_sec[record["trial_id"]])
    return overheads, agents, first, items


def bare_round(browser, start_urls: list[str], trace_to: Path | None = None) -> list[float]:
    """A new context and page, goto the start page, close: what any harness that gives each trial a
    fresh page pays (Playwright for Python on the same Chromium, nothing made ahead). With
    `trace_to`, traced as a trial is (screenshots and DOM snapshots, saved as a zip there)."""
    times = []
    for url in start_urls:
        started = time.perf_counter()
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        if trace_to:
            context.tracing.start(screenshots=True, snapshots=True)
        page = context.new_page()
        page.goto(url, wait_until="load")
        if trace_to:
            context.tracing.stop(path=trace_to / "bare-trace.zip")
        context.close()
        times.append(time.perf_counter() - started)
    return times


def walled_round(services, start_urls: list[str]) -> tuple[list[float], list[float]]:
    """Per trial: a walled session opened at its start page and closed; and the code runner's start
    (the first call's time less a warm call's)."""
    backend = services.backend
    opened, runner = [], []
    for n, url in enumerate(start_urls):
        session = f"walled-{n}"
        started = time.perf_counter()
        services.loop.run(backend.create_session(session, site_urls=[url]), timeout=120)
        services.loop.run(backend.goto(session, url), timeout=60)
        first = time.perf_counter()
        services.loop.run(backend.execute_playwright(session, "return 1"), timeout=60)
        warm = time.perf_counter()
        services.loop.run(backend.execute_playwright(session, "return 1"), timeout=60)
        done = time.perf_counter()
        services.loop.run(backend.delete_session(session), timeout=60)
        opened.append(first - started + (time.perf_counter() - done))
        runner.append((warm - first) - (done - warm))
    return opened, runner


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--think", type=float, default=0.0, help="seconds the runner waits before its first call")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sys.path.insert(0, str(ROOT))
    from playwright.sync_api import sync_playwright

    from pytest_webbench.browsers.pod import chromium_path
    from pytest_webbench.trial.services import RunServices
    from pytest_webbench.design.suite import load_suite

    suite = load_suite(ROOT / "suites" / "local-web")
    services = RunServices.start(suite, "local")  # the bundled sites, served as in a run
    arms = len(suite.spec.arms)
    start_urls = [services.site_urls[t.meta.site] + t.meta.start_path for t in suite.tasks for _ in range(arms)]
    overheads, agents, firsts, bare, bare_traced, traced, untraced, walled, runners = [], [], [], [], [], [], [], [], []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"])
            bare_round(browser, start_urls[:3])  # Chromium and the sites warm up
            with tempfile.TemporaryDirectory() as tmp:
                runner = "reference"
                if args.think:
                    runner = str(Path(tmp) / "thinking.toml")
                    Path(runner).write_text(f'name = "reference-thinking"\nagent = "pytest_webbench.runners.reference:ReferenceAgent"\n'
                                            f'takes_trial_context = true\n[options]\nthink_sec = {args.think}\n')
                for n in range(args.rounds):
                    o, a, first, items = harness_round(Path(tmp), n, runner=runner)
                    overheads += o
                    agents += a
                    firsts.append(first)
                    traced += items
                    if not args.think:
                        untraced += harness_round(Path(tmp), 1000 + n, "--no-trace")[3]
                    bare += bare_round(browser, start_urls)
                    bare_traced += bare_round(browser, start_urls, trace_to=Path(tmp))
                    if not args.think:
                        w, r = walled_round(services, start_urls)
                        walled += w
                        runners += r
            browser.close()
    finally:
        services.close()
    o, b = statistics.median(overheads), statistics.median(bare)
    think = f", waiting {args.think:g} s before its first call" if args.think else ""
    print(f"local-web, reference runner{think}: {args.rounds} alternating rounds, {len(overheads)} trials and {len(bare)} bare pages")
    print(f"  harness overhead per trial: median {o * 1000:.0f} ms (p90 {statistics.quantiles(overheads, n=10)[-1] * 1000:.0f} ms); "
          f"the runner itself: median {statistics.median(agents) * 1000:.0f} ms")
    # Work moved into the runner's time (a browser made ahead starts while the runner runs) leaves the
    # overhead above and shows here: the whole item, runner included.
    print(f"  the whole item, runner included: median {statistics.median(traced) * 1000:.0f} ms")
    print(f"  the first trial's overhead (the session's services and its first pod start in it): "
          f"median {statistics.median(firsts) * 1000:.0f} ms")
    print(f"  bare context + goto + close: median {b * 1000:.0f} ms")
    print(f"  ratio {o / b:.2f}x")
    print(f"target <= 1.5x: {'met' if o / b <= 1.5 else 'NOT met'}")
    bt = statistics.median(bare_traced)
    print(f"  the bare page traced as a trial is (screenshots, DOM snapshots, the zip saved): median {bt * 1000:.0f} ms; "
          f"ratio {o / bt:.2f}x")
    if args.think:
        return
    w, r = statistics.median(walled), statistics.median(runners)
    print(f"  walls: a sealed Chromium opened at the start page and closed: median {w * 1000:.0f} ms "
          f"({w / b:.2f}x the bare page, +{(w - b) * 1000:.0f} ms); the sealed code runner's start: median {r * 1000:.0f} ms; "
          f"together +{(w - b + r) * 1000:.0f} ms a trial, {(w - b + r) / REAL_TRIAL_SEC:.2%} of a {REAL_TRIAL_SEC:.0f} s agent trial")
    t, u = statistics.median(traced), statistics.median(untraced)
    share = (t - u) / REAL_TRIAL_SEC
    print(f"  tracing: item median {t * 1000:.0f} ms traced against {u * 1000:.0f} ms untraced: +{(t - u) * 1000:.0f} ms, "
          f"{(t - u) / u:.0%} of a reference trial, {share:.2%} of a {REAL_TRIAL_SEC:.0f} s agent trial")
    print(f"target tracing <= 5% of a {REAL_TRIAL_SEC:.0f} s trial: {'met' if share <= 0.05 else 'NOT met'}")


if __name__ == "__main__":
    main()
