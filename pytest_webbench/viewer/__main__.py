"""`python -m pytest_webbench.viewer EXPERIMENT_DIR NAME [-o OUT]`: one trial's or pair's page,
self-contained (its screenshots inside it at full size), for sending or keeping apart from the run.
The pages in `EXPERIMENT_DIR/pages/` link their pictures instead, which keeps a run's disk small."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..results.records import atomic_write
from .pages import export_page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_webbench.viewer", description=__doc__.split("\n")[0])
    parser.add_argument("experiment_dir", type=Path, metavar="EXPERIMENT_DIR")
    parser.add_argument("name", metavar="NAME", help="a trial ID (shop-cart-a1-control) or a pair ID (shop-cart-a1)")
    parser.add_argument("-o", "--out", type=Path, help="where to write it (default: NAME.html here)")
    args = parser.parse_args(argv)
    try:
        page = export_page(args.experiment_dir, args.name)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = args.out or Path(f"{args.name}.html")
    atomic_write(out, page)
    print(f"wrote {out} ({len(page.encode()) // 1024} KB, self-contained)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
