"""Remakes the README's screenshots of a run's report and of a pair's page (docs/img/*.png).

    .venv/bin/python docs/screenshots.py [RUN_DIR]

Without RUN_DIR it runs the README's main job (`pytest --suite local-web --runner reference
--attempts 3`) into a temporary results folder first. The pictures are taken with Playwright for
Python on the system Chromium, from the files on disk, as a reader opens them.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img"


def main_job(results: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pytest", "--suite", "local-web", "--runner", "reference", "--attempts", "3",
                    "-p", "no:cacheprovider", "-q", f"--results-dir={results}", "--experiment-id", "readme"],
                   cwd=ROOT, check=True)
    return results / "readme"


def shoot(run: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT))
    from pytest_webbench.browsers.pod import chromium_path

    pair = sorted((run / "pages").glob("pair-shop-price-*.html"))[0]
    OUT.mkdir(parents=True, exist_ok=True)
    made = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path())
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for source, name in ((run / "report.html", "report.png"), (pair, "pair-page.png")):
            page.goto(source.as_uri())
            page.screenshot(path=OUT / name)
            made.append(OUT / name)
        browser.close()
    return made


def main() -> None:
    if len(sys.argv) > 1:
        made = shoot(Path(sys.argv[1]).resolve())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            made = shoot(main_job(Path(tmp)))
    for path in made:
        print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
