"""`python -m pytest_webbench.report EXPERIMENT_DIR [OTHER_DIR]`

One directory: re-render report.json, report.md and report.html from the results on disk.
Two: compare them (A then B: each figure is B minus A), printing the comparison, and writing it to
--out (Markdown, with a .json beside it) when given. Comparing reads both runs and changes
neither: their own report files stay as they are.

`python -m pytest_webbench.report merge OUT_DIR SHARD_DIR...`: merge the shards of one run
(`--shard I/N`) into OUT_DIR, a folder named for the experiment (RESULTS/ID), and write its report.

`python -m pytest_webbench.report clawbench-export EXPERIMENT_DIR OUT_DIR`: write the run's judged
write tasks as ClawBench's run folders, for its own rescore.py and analyze.py.

`python -m pytest_webbench.report review EXPERIMENT_DIR [--all] [--review-model M]`: review a run on
disk (docs/report.md, "The review"), without running it again, and write its report.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path

from ..results.claims import resume_command
from ..results.records import ManifestError, atomic_write
from .compare import CompareError, compare_reports, render_comparison
from .build import build_report_from_dir
from .render import headline_lines, paired_lines
from .write import write_report


def merge_main(argv: list[str]) -> int:
    from .merge import MergeError, merge_shards

    parser = argparse.ArgumentParser(prog="python -m pytest_webbench.report merge",
                                     description="merge the shards of one run into one experiment directory")
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    parser.add_argument("shard_dirs", type=Path, nargs="+", metavar="SHARD_DIR")
    parser.add_argument("--partial", action="store_true",
                        help="merge even if shards are missing: their trials are reported missing, for --resume to run")
    args = parser.parse_args(argv)
    try:
        _, missing = merge_shards(args.out_dir, args.shard_dirs, partial=args.partial)
    except MergeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = write_report(args.out_dir)
    print("\n".join(headline_lines(report) + paired_lines(report)))
    print(f"report: {args.out_dir / 'report.md'}, {args.out_dir / 'report.html'}")
    if missing:
        print(f"incomplete: shard(s) {', '.join(missing)} missing, "
              f"{report.planned_trials - report.recorded_trials} planned trial(s) without a result; to finish the run: "
              f"{resume_command(args.out_dir)}")
    return 0


def clawbench_export_main(argv: list[str]) -> int:
    from ..results.records import read_manifest, read_trial_records
    from .clawbench_figures import export_runs

    parser = argparse.ArgumentParser(prog="python -m pytest_webbench.report clawbench-export",
                                     description="write a run's judged write tasks as ClawBench's run folders, one batch per "
                                                 "arm, for ClawBench's own rescore.py and analyze.py")
    parser.add_argument("experiment_dir", type=Path, metavar="EXPERIMENT_DIR")
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    args = parser.parse_args(argv)
    try:
        manifest = read_manifest(args.experiment_dir)
    except (OSError, ManifestError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    records, problems = read_trial_records(args.experiment_dir)  # whole records: the agent's final message goes too
    for problem in problems:
        print(f"skipped: {problem}", file=sys.stderr)
    batches = export_runs(manifest, records, args.out_dir)
    for arm, folder in sorted(batches.items()):
        print(f"{arm}: {folder}")
    if not batches:
        print("no judged write task in this run: nothing written")
    return 0


def review_main(argv: list[str]) -> int:
    from ..results.records import read_manifest
    from ..review.reviewer import ReviewConfigError, review_run, reviewer_setup, setup_for_run

    parser = argparse.ArgumentParser(prog="python -m pytest_webbench.report review",
                                     description="review a run's trials on disk with a reviewer model, and write its report")
    parser.add_argument("experiment_dir", type=Path, metavar="EXPERIMENT_DIR")
    parser.add_argument("--all", action="store_true", help="every trial, not only the failed, errored, flagged and discordant")
    parser.add_argument("--review-model", metavar="PROVIDER/MODEL", help="default: the run's judge, else its model")
    parser.add_argument("--review-base-url", help="the reviewer's API base URL (default: its provider's, or the run's)")
    parser.add_argument("--model-price", metavar="IN,OUT[,CACHED]", help="the reviewer's price, $ per million tokens")
    parser.add_argument("--allow-unpriced", action="store_true", help="review with a model no price table prices")
    args = parser.parse_args(argv)
    try:
        manifest = read_manifest(args.experiment_dir)
        model, base_url, price, unpriced = setup_for_run(manifest, args.review_model, args.review_base_url,
                                                        args.model_price, args.allow_unpriced)
        setup = reviewer_setup(model, base_url, price, unpriced)
    except (OSError, ManifestError, ReviewConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from ..results.claims import ExperimentBusy, hold_experiment

    try:
        lock = hold_experiment(args.experiment_dir)  # not while a run (or another review) of it is going
    except (ExperimentBusy, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        run = review_run(args.experiment_dir, setup, every_trial=args.all)
    finally:
        os.close(lock)
    report = write_report(args.experiment_dir)
    print("\n".join(headline_lines(report)))
    cost = "unpriced" if run.cost_usd is None else f"${run.cost_usd:.4f}"
    print(f"reviewed {run.trials_reviewed} trial(s) and {run.pairs_reviewed} pair(s) with {run.model} ({run.requests} "
          f"request(s), {cost}; {run.errors} without a finding): {args.experiment_dir / 'report.md'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        return merge_main(argv[1:])
    if argv[:1] == ["clawbench-export"]:
        return clawbench_export_main(argv[1:])
    if argv[:1] == ["review"]:
        return review_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m pytest_webbench.report", description=__doc__.split("\n\n")[1])
    parser.add_argument("experiment_dirs", type=Path, nargs="+", metavar="EXPERIMENT_DIR")
    parser.add_argument("--out", type=Path, help="write the comparison of two runs here (Markdown; JSON beside it)")
    parser.add_argument("--publish", choices=("braintrust",), help="publish each run (one experiment per arm)")
    parser.add_argument("--project", help="Braintrust project (default: webbench-<suite>)")
    args = parser.parse_args(argv)
    if len(args.experiment_dirs) > 2:
        parser.error("give one experiment directory to re-render, or two to compare")
    if len(args.experiment_dirs) == 2:
        if args.publish:
            parser.error("--publish takes one experiment directory")
        return compare_main(*args.experiment_dirs, args.out)
    if args.out:
        parser.error("--out is for comparing two runs")
    directory = args.experiment_dirs[0]
    if not directory.is_dir():
        print(f"error: {directory}: no such folder (an experiment's folder holds its manifest.json and trials/)", file=sys.stderr)
        return 2
    try:
        report = write_report(directory, keep=_READ)
    except (OSError, ManifestError) as exc:  # no such folder, a file where it or its trials folder should be
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(headline_lines(report) + paired_lines(report)))
    print(f"report: {directory / 'report.md'}, {directory / 'report.html'}")
    if args.publish:
        from .publish import PublishError, publish_braintrust

        gc.enable()  # network code from here on: let it collect

        try:
            for experiment in publish_braintrust(directory, args.project):
                print(f"published {experiment.name} ({experiment.rows} rows): {experiment.url}")
        except PublishError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return 0


def _refused_out(a_dir: Path, b_dir: Path, out: Path | None) -> str | None:
    """Why the comparison must not be written where asked: comparing changes neither run, and
    overwrites nothing it did not write itself."""
    if a_dir.resolve() == b_dir.resolve():
        return f"{a_dir} and {b_dir} are one run: compare two runs"
    if out is None:
        return None
    if out.suffix == ".json":
        return f"--out {out}: the Markdown goes there and its JSON beside it, so give a .md path"
    for target in (out, out.with_suffix(".json")):
        resolved = target.resolve()
        for run in (a_dir, b_dir):
            if resolved.is_relative_to(run.resolve()):
                return f"--out {out}: {target} is inside the run {run}, and comparing changes neither run"
        if target.exists() and not _a_comparison(target):
            return f"--out {out}: {target} exists and is not a comparison this command wrote; nothing was overwritten"
    return None


def _a_comparison(path: Path) -> bool:
    """An earlier comparison, of this schema or an older one (its JSON's shape, its Markdown's title)."""
    import json

    try:
        text = path.read_text()
        if path.suffix == ".json":
            data = json.loads(text)
            return isinstance(data, dict) and {"schema_version", "a", "b", "rows"} <= data.keys()
        return text.startswith("# webbench comparison: ")
    except (OSError, ValueError):
        return False


def compare_main(a_dir: Path, b_dir: Path, out: Path | None) -> int:
    if why := _refused_out(a_dir, b_dir, out):
        print(f"error: {why}", file=sys.stderr)
        return 2
    try:
        a, b = build_report_from_dir(a_dir), build_report_from_dir(b_dir)
    except (OSError, ManifestError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        comparison = compare_reports(a, b)
    except CompareError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = render_comparison(comparison)
    print(text)
    if out:
        atomic_write(out, text)
        atomic_write(out.with_suffix(".json"), comparison.model_dump_json(indent=2))
    return 0


_READ: list = []  # what a re-render read, left for the process's exit to free at once


if __name__ == "__main__":
    # A one-shot process, ended by os._exit: the cyclic collector could only re-scan, again and
    # again, the millions of objects a large report reads and keeps to the end (0.2 s at 100,000).
    gc.disable()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # every file is written and closed; the interpreter's teardown would only free objects one by one
