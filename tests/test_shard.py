"""--shard I/N across machines (pairs never split) and merging the shards into one run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_webbench.design.pairing import TrialKey, order_trials, shard_trials
from pytest_webbench.report.__main__ import main as report_main

LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"


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


@pytest.mark.chromium
def test_two_shards_merged_give_the_unsharded_run_s_report(pytester, capsys):
    from test_resume import outcome_figures

    def run(results: str, *args):
        return pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", f"--results-dir={pytester.path / results}", "--suite", str(LOCAL_WEB),
            "--runner", "reference", "-k", "shop-price or wiki-population or shop-cart", "--experiment-id", "wide", *args)

    run("whole").assert_outcomes(passed=9)
    one, two = run("m1", "--shard", "1/2"), run("m2", "--shard", "2/2")
    assert one.parseoutcomes()["passed"] + two.parseoutcomes()["passed"] == 9
    shard_one = json.loads((pytester.path / "m1" / "wide" / "manifest.json").read_text())
    assert shard_one["shard"] == "1/2" and 0 < len(shard_one["trials"]) < 9

    merged = pytester.path / "merged" / "wide"
    assert report_main(["merge", str(merged), str(pytester.path / "m1" / "wide")]) == 2  # shard 2 missing
    assert "shards of 2: missing [2]" in capsys.readouterr().err
    assert report_main(["merge", str(merged), str(pytester.path / "m1" / "wide"), str(pytester.path / "m1" / "wide")]) == 2
    assert report_main(["merge", str(merged), str(pytester.path / "m1" / "wide"), str(pytester.path / "m2" / "wide")]) == 0

    whole = pytester.path / "whole" / "wide"
    manifest, whole_manifest = (json.loads((d / "manifest.json").read_text()) for d in (merged, whole))
    assert manifest["shard"] is None and manifest["trials"] == whole_manifest["trials"]  # the whole plan, in run order
    report, whole_report = (json.loads((d / "report.json").read_text()) for d in (merged, whole))
    assert report["complete"] and outcome_figures(report) == outcome_figures(whole_report)
    assert len(list((merged / "trials").glob("*.json"))) == 9
    assert len(list((merged / "jobs").glob("*/*/proxy-log.jsonl"))) == 9
