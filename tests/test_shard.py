"""--shard I/N across machines (pairs never split) and merging the shards into one run."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_webbench.design.pairing import TrialKey, order_trials, shard_trials
from pytest_webbench.report.__main__ import main as report_main

ROOT = Path(__file__).resolve().parents[1]
LOCAL_WEB = ROOT / "suites" / "local-web"
DEPLOY = ROOT / "deploy"


def collected(result) -> list[str]:
    return [line.split("[", 1)[1].rstrip("]") for line in result.stdout.lines if "::test_trial[" in line]


def test_shards_cover_the_plan_once_with_whole_pairs(pytester):
    def plan(*args):
        return collected(pytester.runpytest_subprocess(
            "--suite", str(LOCAL_WEB), "--collect-only", "-q", "--attempts", "3", "--experiment-id", "cut",
            f"--results-dir={pytester.path / ('r' + ''.join(args).replace('/', '-'))}", *args))

    whole = plan()
    shards = [plan("--shard", f"{i}/3") for i in (1, 2, 3)]
    assert sorted(sum(shards, [])) == sorted(whole) and len(whole) == len(list((LOCAL_WEB / "tasks").iterdir())) * 3 * 3
    for shard in shards:
        assert shard == [t for t in whole if t in shard]  # run order kept within a shard
        pairs = {TrialKey.parse(t).pair_id for t in shard} - {None}
        for pair in pairs:  # both members, back to back
            members = [i for i, t in enumerate(shard) if TrialKey.parse(t).pair_id == pair]
            assert len(members) == 2 and members[1] == members[0] + 1, (pair, shard)
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 2  # dealt round-robin, a pair at a time


def test_shard_units_are_dealt_round_robin():
    keys = [TrialKey(t, a, arm) for t in ("x", "y") for a in (1, 2) for arm in ("control", "treatment", "playwright")]
    ordered = order_trials(keys, "seed")
    units = [k.pair_id or k.trial_id for k in ordered]
    units = [u for i, u in enumerate(units) if i == 0 or u != units[i - 1]]
    dealt = {}
    for n in (1, 2, 3):
        for k in shard_trials(ordered, n, 3):
            dealt.setdefault(k.pair_id or k.trial_id, set()).add(n)
    assert all(len(shards) == 1 for shards in dealt.values())  # a unit lives in exactly one shard
    assert [next(iter(dealt[u])) for u in units] == [(i % 3) + 1 for i in range(len(units))]


@pytest.mark.parametrize("args, message", [
    (["--shard", "3/2", "--experiment-id", "x"], "--shard '3/2': I must be between 1 and N"),
    (["--shard", "one", "--experiment-id", "x"], "--shard 'one': give I/N"),
    (["--shard", "1/2"], "--shard needs --experiment-id"),
])
def test_bad_shard_options_are_one_clear_error(pytester, args, message):
    result = pytester.runpytest_subprocess("--suite", str(LOCAL_WEB), "--collect-only", f"--results-dir={pytester.path / 'r'}", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


# what differs between two runs of the same trials: how long they took, and what that decides
TIMING = {"median_agent_sec", "median_model_sec", "median_tool_sec", "median_speedup", "speedups", "control_faster",
          "treatment_faster", "sign", "sign_p", "sign_p_holm"}


def bar_timings(value):
    if isinstance(value, dict):
        return {k: bar_timings(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [bar_timings(v) for v in value]
    return value


def report_of(directory: Path) -> dict:
    return json.loads((directory / "report.json").read_text())


@pytest.mark.chromium
def test_the_deploy_scripts_three_shards_merge_to_the_unsharded_run_s_report(tmp_path, capsys):
    """The commands a CI matrix and a Kubernetes Indexed Job run (deploy/run-shard on each shard,
    deploy/merge-shards after), run here for N = 3: the merged report is the unsharded run's, bar
    timings. Shard 2 runs under xdist, whose controller learns the whole plan from its workers."""
    env = {**os.environ, "SUITE": str(LOCAL_WEB), "RUNNER": "reference", "ATTEMPTS": "1", "BROWSER": "local",
           "TASKS": "shop-price or wiki-population or codehub-latest-release", "EXPERIMENT_ID": "wide"}
    pytest_bin = str(Path(sys.executable).parent / "pytest")
    whole = subprocess.run([pytest_bin, "-p", "no:cacheprovider", "--results-dir=whole", "--suite", env["SUITE"], "--runner",
                            "reference", "--browser", "local", "-k", env["TASKS"], "--experiment-id", "wide"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stdout[-2000:]
    for i in (1, 2, 3):  # relative results directories: taken from where the command runs
        shard = subprocess.run([str(DEPLOY / "run-shard")], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                               env={**env, "SHARD": f"{i}/3", "RESULTS_DIR": f"shards/s{i}", "WORKERS": "2" if i == 2 else "0"})
        assert shard.returncode == 0, shard.stdout[-2000:] + shard.stderr[-2000:]
    shards = [tmp_path / "shards" / f"s{i}" / "wide" for i in (1, 2, 3)]
    # a pod retried after its shard had finished resumes it, finds nothing left to run, and succeeds
    again = subprocess.run([str(DEPLOY / "run-shard")], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                           env={**env, "SHARD": "3/3", "RESULTS_DIR": "shards/s3", "WORKERS": "0"})
    assert again.returncode == 0 and "passed" not in again.stdout.splitlines()[-1], again.stdout[-2000:]
    plan = [t["trial_id"] for t in json.loads((tmp_path / "whole" / "wide" / "manifest.json").read_text())["trials"]]
    for directory in shards:  # each shard holds its own trials and the whole plan, as the unsharded run ordered it
        manifest = json.loads((directory / "manifest.json").read_text())
        assert manifest["plan"] == plan and 0 < len(manifest["trials"]) < len(plan)

    assert report_main(["merge", str(tmp_path / "refused" / "wide"), str(shards[0]), str(shards[2])]) == 2
    assert "shards of 3: missing [2], given twice none; --partial merges what there is" in capsys.readouterr().err
    assert report_main(["merge", str(tmp_path / "refused" / "wide"), str(shards[0]), str(shards[0]), str(shards[1])]) == 2
    assert "given twice [1]" in capsys.readouterr().err

    merged = subprocess.run([str(DEPLOY / "merge-shards"), "shards", "merged", "wide"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    expected = bar_timings(report_of(tmp_path / "whole" / "wide"))
    assert expected["complete"] and bar_timings(report_of(tmp_path / "merged" / "wide")) == expected
    assert sorted(p.name for p in (tmp_path / "merged" / "pytest-html").iterdir()) == [f"pytest-html-shard-{i}.html" for i in (1, 2, 3)]

    # shard 2's job failed before uploading: an honest, incomplete report, which --resume finishes
    for i in (1, 3):
        shutil.copytree(tmp_path / "shards" / f"s{i}", tmp_path / "uploaded" / f"shard-{i}" / "results")
    partial = subprocess.run([str(DEPLOY / "merge-shards"), "uploaded", "partial", "wide"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
    assert partial.returncode == 0, partial.stdout + partial.stderr
    report = report_of(tmp_path / "partial" / "wide")
    assert not report["complete"] and (report["planned_trials"], report["recorded_trials"]) == (len(plan), len(plan) - 3)
    resume = partial.stdout.strip().splitlines()[-1].split("to finish the run: ", 1)[1]
    assert "shard(s) 2/3 missing, 3 planned trial(s) without a result" in partial.stdout
    assert resume == "pytest --results-dir=partial --resume wide"
    # the printed command itself, as a user pastes it: `--results-dir partial` would be refused (an
    # existing directory given as a separate word is a test path to pytest)
    finished = subprocess.run([pytest_bin, "-p", "no:cacheprovider", *shlex.split(resume)[1:]],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stdout[-2000:]
    assert "3 passed" in finished.stdout
    assert bar_timings(report_of(tmp_path / "partial" / "wide")) == expected


def test_a_suite_file_changed_in_any_shard_is_changed_for_the_merged_run(tmp_path):
    from pytest_webbench.report.merge import _suite_checks
    from pytest_webbench.results.run_notes import SuiteCheck, write_suite_check

    before = {"tasks/a": "1", "tasks/b": "2", "tasks/c": "3"}
    shards = [tmp_path / f"s{i}" for i in (1, 2, 3)]
    for directory, after in zip(shards, [before, {**before, "tasks/b": "9"}, {"tasks/a": "1", "tasks/b": "2"}]):
        directory.mkdir()
        write_suite_check(directory, SuiteCheck(before=before, after=after))
    assert _suite_checks(shards).changed == ["tasks/b", "tasks/c"]
    assert _suite_checks(shards[:1]).changed == []
    (shards[0] / "suite-check.json").unlink()  # a shard that did not reach its end checked nothing
    assert _suite_checks(shards) is None


def test_a_partial_merge_keeps_the_whole_plan_and_refuses_a_plan_naming_no_trial_of_the_run(tmp_path):
    """Fast, on synthetic shard manifests: what a missing shard held comes from the plan the others
    recorded, and a plan is checked against the run's own tasks, attempts and arms."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_report import _manifest

    from pytest_webbench.report.merge import MergeError, merge_shards
    from pytest_webbench.results.records import write_manifest

    whole = _manifest("cut")
    ids = [t.trial_id for t in whole.trials]
    half = len(whole.trials) // 2

    def shards(plan: list[str], root: Path) -> list[Path]:
        out = []
        for i, trials in ((1, whole.trials[:half]), (2, whole.trials[half:])):
            write_manifest(root / f"s{i}" / "cut", whole.model_copy(update={"shard": f"{i}/2", "trials": trials, "plan": plan}))
            out.append(root / f"s{i}" / "cut")
        return out

    good = shards(ids, tmp_path / "good")
    merged, missing = merge_shards(tmp_path / "out" / "cut", good[:1], partial=True)
    assert missing == ["2/2"] and [t.trial_id for t in merged.trials] == ids  # shard 2's trials kept in the plan
    with pytest.raises(MergeError, match=r"missing \[2\].*--partial"):
        merge_shards(tmp_path / "out2" / "cut", good[:1])
    bad = shards(ids + ["ghost-a1-control"], tmp_path / "bad")
    with pytest.raises(MergeError, match="ghost-a1-control is no trial of this run"):
        merge_shards(tmp_path / "out3" / "cut", bad, partial=True)
    assert not (tmp_path / "out3").exists()  # refused before anything was written
    with pytest.raises(MergeError, match=r"must be named for its experiment, .*out4/cut"):
        merge_shards(tmp_path / "out4" / "merged", good[:1], partial=True)  # --resume cut would not find it
    assert not (tmp_path / "out4").exists()


def test_a_record_or_trial_folder_in_two_shards_is_refused_before_anything_is_merged(tmp_path):
    """Found by a review of bad inputs: the merge laid the shards over each other, so a stray copy of
    a trial's record in another shard silently replaced the one its own shard wrote."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_report import _manifest

    from pytest_webbench.report.merge import MergeError, merge_shards
    from pytest_webbench.results.records import write_manifest

    whole = _manifest("cut")
    half = len(whole.trials) // 2
    own, other = whole.trials[0].trial_id, whole.trials[half].trial_id
    dirs = []
    for i, trials in ((1, whole.trials[:half]), (2, whole.trials[half:])):
        directory = tmp_path / f"s{i}" / "cut"
        write_manifest(directory, whole.model_copy(update={"shard": f"{i}/2", "trials": trials,
                                                           "plan": [t.trial_id for t in whole.trials]}))
        (directory / "trials").mkdir()
        (directory / "trials" / "index.jsonl").write_text("")  # each shard has its own index: rebuilt, not refused
        (directory / "jobs" / "control").mkdir(parents=True)
        (directory / "jobs" / "control" / "result.json").write_text("{}")  # Harbor's job file: one per shard
        dirs.append(directory)
    (dirs[0] / "trials" / f"{own}.json").write_text('{"detail": "its own shard"}')
    (dirs[1] / "trials" / f"{own}.json").write_text('{"detail": "a stray copy"}')
    with pytest.raises(MergeError, match=rf"trials/{own}.json is in both .*s1/cut and .*s2/cut"):
        merge_shards(tmp_path / "out" / "cut", dirs)
    (dirs[0] / "trials" / f"{own}.json").unlink()
    with pytest.raises(MergeError, match=rf"a record of {own}, which .*s1/cut ran"):
        merge_shards(tmp_path / "out" / "cut", dirs)
    (dirs[1] / "trials" / f"{own}.json").unlink()
    (dirs[1] / "trials" / "zz-stray.json").write_text('{"detail": "a record under a name of no trial"}')
    with pytest.raises(MergeError, match=r"zz-stray.json: a record of no trial of this run"):
        merge_shards(tmp_path / "out" / "cut", dirs)
    (dirs[1] / "trials" / "zz-stray.json").unlink()
    (dirs[0] / "trials" / "superseded").mkdir()  # names alike but for case: one file on a case-insensitive disk
    (dirs[0] / "trials" / "superseded" / "x.json").write_text("{}")
    (dirs[1] / "trials" / "superseded").mkdir()
    (dirs[1] / "trials" / "superseded" / "X.json").write_text("{}")
    with pytest.raises(MergeError, match=r"trials/superseded/X.json is in both"):
        merge_shards(tmp_path / "out" / "cut", dirs)
    (dirs[1] / "trials" / "superseded" / "X.json").unlink()
    for directory in dirs:
        (directory / "jobs" / "control" / other).mkdir()
    with pytest.raises(MergeError, match=rf"jobs/control/{other} is in both"):
        merge_shards(tmp_path / "out" / "cut", dirs)
    assert not (tmp_path / "out").exists()  # refused before anything was written
