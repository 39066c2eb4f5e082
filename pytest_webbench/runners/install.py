"""Installs the pinned agent CLIs from npm into one project folder, and checks them.

    python -m pytest_webbench.runners.install [RUNNER ...]

Harbor's own install steps would fetch nvm from GitHub or Claude's bootstrap script, which
cannot work from machines that reach only the package registries; the presets pin each CLI's
npm package (and, where it needs one, an npm-packaged Node), and this puts them in
`$WEBBENCH_NPM_PREFIX` (default `.webbench/npm` beside the package: the repository root in a
checkout). Idempotent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from . import CliPin, load_presets


def npm_prefix() -> Path:
    # Beside the package: the repository root for a checkout, the venv for an installed package.
    default = Path(__file__).resolve().parents[2] / ".webbench" / "npm"
    return Path(os.environ.get("WEBBENCH_NPM_PREFIX", default)).resolve()


def installed_version(package: str, prefix: Path | None = None) -> str | None:
    manifest = (prefix or npm_prefix()) / "node_modules" / package / "package.json"
    try:
        return json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def bin_path(pin: CliPin) -> Path:
    return npm_prefix() / "node_modules" / ".bin" / pin.bin


def node_bin_dir(pin: CliPin) -> Path | None:
    """The folder of the npm-packaged Node a CLI needs, to put first on its PATH."""
    return npm_prefix() / "node_modules" / "node" / "bin" if pin.node else None


def cli_problem(pin: CliPin) -> str | None:
    """None when the pinned CLI (and its Node) are installed, else what to run."""
    wanted = [(pin.package, pin.version)] + ([("node", pin.node)] if pin.node else [])
    for package, version in wanted:
        have = installed_version(package)
        if have != version:
            return (f"{package}@{version} is not installed in {npm_prefix()} (found {have or 'nothing'}): "
                    "run `python -m pytest_webbench.runners.install` (bash .ci/setup does)")
    return None


def install(names: list[str]) -> int:
    specs = [load_presets()[n] for n in names] if names else [s for s in load_presets().values() if s.cli]
    wanted = {}
    for spec in specs:
        if spec.cli is None:
            continue
        wanted[spec.cli.package] = spec.cli.version
        if spec.cli.node:
            wanted["node"] = spec.cli.node
    missing = [f"{p}@{v}" for p, v in sorted(wanted.items()) if installed_version(p) != v]
    if not missing:
        print(f"agent CLIs up to date in {npm_prefix()}")
        return 0
    npm_prefix().mkdir(parents=True, exist_ok=True)
    command = ["npm", "install", "--prefix", str(npm_prefix()), "--no-audit", "--no-fund", "--loglevel=error", *missing]
    print("installing", " ".join(missing), "into", npm_prefix(), flush=True)
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(install(sys.argv[1:]))
