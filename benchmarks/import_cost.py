"""What the plugin adds to a pytest run that does not use it (no --suite).

Side by side in one run, alternating: `pytest --collect-only` of a tiny project with the plugin
loaded (`-p pytest_webbench.plugin`) and without it, other plugins' autoloading off in both (the
installed ones, braintrust's above all, cost seconds and bury a few milliseconds in noise); the
difference of the medians is what a project pays for having pytest-webbench installed. Then, in one process, which of the
harness's heavy dependencies such a run imported (none may be).

    .venv/bin/python benchmarks/import_cost.py [--rounds 31]

Target (issue 8): < 50 ms added, and nothing heavy imported (Harbor and litellm load lazily).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("harbor", "litellm", "pydantic", "scipy", "mcp", "httpx", "uvicorn", "starlette", "playwright", "kernel",
         "pytest_webbench.trial.fixtures", "pytest_webbench.trial.harbor_run")


ISOLATED = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
WITH_PLUGIN = ["-p", "pytest_webbench.plugin"]


def timed_run(project: Path, extra: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *extra],
                   cwd=project, check=True, capture_output=True, env=ISOLATED)
    return time.perf_counter() - started


def modules_loaded_by_a_plain_run(project: Path) -> list[str]:
    probe = project / "conftest.py"
    probe.write_text(
        "import sys\n"
        "def pytest_sessionfinish(session):\n"
        f"    loaded = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "    open('loaded.txt', 'w').write(' '.join(loaded))\n")
    try:
        # other installed plugins (hypothesis, braintrust) may import some of these themselves:
        # compare with the plugin blocked, and count only what the plugin adds
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project, check=True, capture_output=True)
        with_plugin = set((project / "loaded.txt").read_text().split())
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:webbench"], cwd=project,
                       check=True, capture_output=True)
        without = set((project / "loaded.txt").read_text().split())
    finally:
        probe.unlink()
        (project / "loaded.txt").unlink(missing_ok=True)
    return sorted(with_plugin - without)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=31)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "test_plain.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        for _ in range(3):  # page cache and .pyc files
            timed_run(project, WITH_PLUGIN), timed_run(project, [])
        with_plugin, without = [], []
        for _ in range(args.rounds):
            with_plugin.append(timed_run(project, WITH_PLUGIN))
            without.append(timed_run(project, []))
        added = statistics.median(with_plugin) - statistics.median(without)
        paired = statistics.median(a - b for a, b in zip(with_plugin, without))
        print(f"pytest --collect-only, {args.rounds} alternating rounds")
        print(f"  without it:     median {statistics.median(without) * 1000:.1f} ms")
        print(f"  plugin loaded:  median {statistics.median(with_plugin) * 1000:.1f} ms")
        print(f"  added: {added * 1000:.1f} ms (difference of medians), {paired * 1000:.1f} ms (median of round differences); "
              f"ratio {statistics.median(with_plugin) / statistics.median(without):.3f}x")
        heavy = modules_loaded_by_a_plain_run(project)
        print(f"  heavy modules the plugin imported without --suite: {', '.join(heavy) or 'none'}")
        print(f"target < 50 ms and none: {'met' if added < 0.05 and not heavy else 'NOT met'}")


if __name__ == "__main__":
    main()
