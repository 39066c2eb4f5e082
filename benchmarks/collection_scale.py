"""How collection scales: a generated suite of 1,000 tasks x 5 attempts x 2 arms (10,000 items).

The suite is local-web's sites and tool batches with 1,000 copies of one of its tasks. Side by
side in one run, alternating: `pytest --suite GENERATED --attempts 5 --arms control,treatment
--collect-only` (load and validate 1,000 task files, parametrize, order the pairs, write the
manifest) and the same pytest collecting a plain test parametrized with 10,000 ids (what pytest
itself costs for that many items). Medians of each, and the difference: what webbench adds.

    .venv/bin/python benchmarks/collection_scale.py [--tasks 1000] [--rounds 5]

Target (issue 8): < 2 s for the webbench collection.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "suites" / "local-web"
TEMPLATE_TASK = TEMPLATE / "tasks" / "shop-price"
ENV = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
PLUGINS = ["-p", "pytest_webbench.plugin", "-p", "no:cacheprovider", "-p", "no:randomly"]


def make_suite(root: Path, tasks: int) -> Path:
    suite = root / "generated"
    (suite / "tasks").mkdir(parents=True)
    shutil.copy(TEMPLATE / "suite.toml", suite / "suite.toml")
    for shared in ("sites", "tools"):
        (suite / shared).symlink_to(TEMPLATE / shared)
    task_toml = (TEMPLATE_TASK / "task.toml").read_text()
    instruction = (TEMPLATE_TASK / "instruction.md").read_text()
    solution = (TEMPLATE_TASK / "solution" / "reference.py").read_text()
    for n in range(tasks):
        name = f"gen-{n:04d}"
        task = suite / "tasks" / name
        (task / "solution").mkdir(parents=True)
        (task / "environment").mkdir()
        (task / "task.toml").write_text(task_toml.replace("webbench/shop-price", f"webbench/{name}"))
        (task / "instruction.md").write_text(instruction)
        (task / "solution" / "reference.py").write_text(solution)
    return suite


def make_plain(root: Path, items: int) -> Path:
    plain = root / "plain"
    plain.mkdir()
    (plain / "test_plain.py").write_text(
        "import pytest\n"
        f"IDS = [f'gen-{{n // 10:04d}}-a{{n % 5 + 1}}-{{\"control\" if n % 2 else \"treatment\"}}-{{n}}' for n in range({items})]\n"
        "@pytest.mark.parametrize('trial', IDS, ids=IDS)\n"
        "def test_trial(trial):\n    pass\n")
    return plain


def collect(args: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *PLUGINS, *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"collection failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    items = args.tasks * 5 * 2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        suite = make_suite(root, args.tasks)
        plain = make_plain(root, items)
        results = root / "results"
        webbench, baseline = [], []
        for n in range(args.rounds + 1):  # round 0 warms the page cache and .pyc files
            w = collect(["--suite", str(suite), "--runner", "reference", "--attempts", "5", "--arms", "control,treatment",
                         "--results-dir", str(results), "--experiment-id", f"scale-{n}"], cwd=root)
            b = collect([str(plain)], cwd=root)
            if n:
                webbench.append(w)
                baseline.append(b)
        manifest = results / f"scale-{args.rounds}" / "manifest.json"
        assert manifest.exists(), "the webbench collection wrote no manifest"
    w, b = statistics.median(webbench), statistics.median(baseline)
    print(f"collect {items:,} items ({args.tasks:,} tasks x 5 attempts x 2 arms), {args.rounds} alternating rounds")
    print(f"  webbench suite:          median {w:.2f} s  (rounds: {', '.join(f'{x:.2f}' for x in webbench)})")
    print(f"  plain parametrized test: median {b:.2f} s")
    print(f"  added by webbench: {w - b:.2f} s; ratio {w / b:.2f}x")
    print(f"target < 2 s: {'met' if w < 2 else 'NOT met'}")


if __name__ == "__main__":
    main()
