"""`python -m pytest_webbench.report EXPERIMENT_DIR [OTHER_DIR]`

One directory: re-render report.json, report.md and report.html from the results on disk.
Two: re-render both, then compare them (unpaired across runs), printing the comparison and
writing it to --out (Markdown, with a .json beside it) when given.

`python -m pytest_webbench.report merge OUT_DIR SHARD_DIR...`: merge the shards of one run
(`--shard I/N`) into OUT_DIR and write its report.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..records import atomic_write
from .compare import compare_reports, render_comparison
from .render import headline_lines, paired_lines, write_report


def merge_main(argv: list[str]) -> int:
    from .merge import MergeError, merge_shards

    parser = argparse.ArgumentParser(prog="python -m pytest_webbench.report merge",
                                     description="merge the shards of one run into one experiment directory")
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    parser.add_argument("shard_dirs", type=Path, nargs="+", metavar="SHARD_DIR")
    args = parser.parse_args(argv)
    try:
        merge_shards(args.out_dir, args.shard_dirs)
    except MergeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = write_report(args.out_dir)
    print("\n".join(headline_lines(report) + paired_lines(report)))
    print(f"report: {args.out_dir / 'report.md'}, {args.out_dir / 'report.html'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        return merge_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m pytest_webbench.report", description=__doc__.split("\n\n")[1])
    parser.add_argument("experiment_dirs", type=Path, nargs="+", metavar="EXPERIMENT_DIR")
    parser.add_argument("--out", type=Path, help="write the comparison of two runs here (Markdown)")
    parser.add_argument("--publish", choices=("braintrust",), help="publish each run (one experiment per arm)")
    parser.add_argument("--project", help="Braintrust project (default: webbench-<suite>)")
    args = parser.parse_args(argv)
    if len(args.experiment_dirs) > 2:
        parser.error("give one experiment directory to re-render, or two to compare")
    reports = []
    for directory in args.experiment_dirs:
        try:
            report = write_report(directory)
        except FileNotFoundError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        reports.append(report)
        print("\n".join(headline_lines(report) + paired_lines(report)))
        print(f"report: {directory / 'report.md'}, {directory / 'report.html'}")
        if args.publish:
            from .publish import PublishError, publish_braintrust

            try:
                for experiment in publish_braintrust(directory, args.project):
                    print(f"published {experiment.name} ({experiment.rows} rows): {experiment.url}")
            except PublishError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
    if len(reports) == 2:
        comparison = compare_reports(*reports)
        text = render_comparison(comparison)
        print(text)
        if args.out:
            atomic_write(args.out, text)
            atomic_write(args.out.with_suffix(".json"), comparison.model_dump_json(indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
