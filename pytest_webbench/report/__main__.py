"""`python -m pytest_webbench.report EXPERIMENT_DIR`: re-render the report from disk."""

from __future__ import annotations

import argparse
from pathlib import Path

from .render import headline_lines, paired_lines, write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_webbench.report")
    parser.add_argument("experiment_dir", type=Path)
    args = parser.parse_args(argv)
    report = write_report(args.experiment_dir)
    print("\n".join(headline_lines(report) + paired_lines(report)))
    print(f"report: {args.experiment_dir / 'report.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
