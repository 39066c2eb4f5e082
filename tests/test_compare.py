"""Two runs compared (`python -m pytest_webbench.report A B`): unpaired, on the tasks both planned,
the headline a mean over tasks; and a comparison that writes nothing into a run or over a file it
did not write."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_report import write_synthetic_run  # noqa: E402

from pytest_webbench.report.__main__ import main as report_main  # noqa: E402
from pytest_webbench.report.build import build_report_from_dir  # noqa: E402
from pytest_webbench.report.write import write_report  # noqa: E402


def test_two_runs_compared_unpaired(tmp_path, capsys):
    a = write_synthetic_run(tmp_path, "a")
    b = write_synthetic_run(tmp_path, "b", playwright_all_pass=True)
    write_report(a)
    before = {p: p.read_bytes() for d in (a, b) for p in d.rglob("*") if p.is_file()}
    assert report_main([str(a), str(b), "--out", str(tmp_path / "cmp.md")]) == 0
    # comparing changes neither run: a's report stays as it was, b (never rendered) gets none
    assert {p: p.read_bytes() for d in (a, b) for p in d.rglob("*") if p.is_file()} == before
    comparison = json.loads((tmp_path / "cmp.json").read_text())
    pw = next(r for r in comparison["rows"] if r["arm"] == "playwright" and r["task"] is None)
    # headline tasks alpha and beta (placebo out): A passes even attempts (2 of 4 each), B every one
    # (4 of 4 each). The headline is the mean over tasks of B - A = 0.5, 0.5. For these tasks, each
    # run's variance within each task from adjusted counts: B (4 + 1.5) / 7, A (2 + 1.5) / 7, each
    # p(1 - p) / 4; over two tasks SE = sqrt(2 x (0.785714 x 0.214286 + 0.25) / 4) / 2 = 0.228683:
    # 0.5 +- 1.959964 x SE = 0.051790 to 0.948210, z test p = erfc(0.5 / SE / sqrt 2) = 0.028784.
    # For tasks like these the t over tasks: no spread between tasks, so the floor sets the width
    # ((B: 5/6, A: 3/6) per task, 0.097222, two tasks / 4); 1 degree of freedom: 0.5 +- 12.706 x
    # 0.2205, cut at -1 and 1.
    assert (pw["a"]["passes"], pw["a"]["n"], pw["b"]["passes"], pw["b"]["n"]) == (4, 8, 8, 8)
    assert pw["a"]["rate"] == pytest.approx(0.5) and pw["b"]["rate"] == pytest.approx(1.0)
    assert pw["difference"] == pytest.approx(0.5) and pw["test"] == "these tasks"
    se = math.sqrt(2 * ((5.5 / 7) * (1.5 / 7) / 4 + 0.25 / 4)) / 2
    assert se == pytest.approx(0.228683, abs=1e-6)
    assert pw["p_value"] == pytest.approx(math.erfc(0.5 / se / math.sqrt(2)), abs=1e-9)
    assert (pw["ci_low"], pw["ci_high"]) == (pytest.approx(0.051790, abs=1e-6), pytest.approx(0.948210, abs=1e-6))
    assert (pw["like_these_low"], pw["like_these_high"]) == (-1.0, 1.0)
    assert "B - A for tasks like these" in (tmp_path / "cmp.md").read_text()
    # a task: B 4/4 against A 2/4. Fisher's two-sided p = (C(4,4) C(4,2) + C(4,2) C(4,4)) / C(8,6) = 12/28;
    # Wilson 4/4 = [0.510109, 1], 2/4 = [0.150039, 0.849961]; Newcombe's B - A = 0.5 - sqrt(0.489891^2 +
    # 0.349961^2) to 0.5 + sqrt(0^2 + 0.349961^2)
    alpha = next(r for r in comparison["rows"] if r["arm"] == "playwright" and r["task"] == "alpha")
    assert alpha["test"] == "fisher" and alpha["p_value"] == pytest.approx(12 / 28, rel=1e-9)
    assert (alpha["ci_low"], alpha["ci_high"]) == (pytest.approx(-0.102051, abs=2e-6), pytest.approx(0.849961, abs=2e-6))
    assert "Newcombe" in (tmp_path / "cmp.md").read_text()
    # stratified by the shared headline tasks (alpha, beta; placebo out): per task B 4/4 against A 2/4.
    # By hand, each stratum: a - E = 4 - 4*6/8 = 1, var = 4*4*6*2/(64*7) = 3/7; CMH (corrected) =
    # (|2| - 0.5)^2 / (6/7) = 2.625; the MH risk difference = sum(n1 n2/N (p1 - p2)) / sum(n1 n2/N) = 0.5
    cmh = comparison["stratified"]["playwright"]
    assert cmh["task_names"] == ["alpha", "beta"] and cmh["statistic"] == pytest.approx(2.625)
    assert cmh["risk_difference"] == pytest.approx(0.5)
    from scipy.stats import chi2

    assert cmh["p_value"] == pytest.approx(chi2.sf(2.625, 1))
    # B then A: the same figures, negated and the bounds swapped
    assert report_main([str(b), str(a), "--out", str(tmp_path / "rev.md")]) == 0
    rev = next(r for r in json.loads((tmp_path / "rev.json").read_text())["rows"] if r["arm"] == "playwright" and r["task"] is None)
    assert rev["difference"] == pytest.approx(-0.5) and rev["p_value"] == pytest.approx(pw["p_value"])
    assert (rev["ci_low"], rev["ci_high"]) == (pytest.approx(-pw["ci_high"]), pytest.approx(-pw["ci_low"]))
    assert report_main([str(tmp_path / "nope")]) == 2


def test_two_runs_are_compared_only_on_what_both_planned(tmp_path):
    from pytest_webbench.report.compare import CompareError, compare_reports

    a = build_report_from_dir(write_synthetic_run(tmp_path / "a"))
    only_alpha = a.model_copy(update={"experiment_id": "other", "by_arm_task": [r for r in a.by_arm_task if r.task == "alpha"]})
    c = compare_reports(a, only_alpha)
    assert c.shared_tasks == ["alpha"] and c.left_out == ["beta", "gamma", "placebo"]
    headline = next(r for r in c.rows if r.arm == "control" and r.task is None)
    alpha = next(r for r in a.by_arm_task if (r.arm, r.task) == ("control", "alpha"))
    assert (headline.a.passes, headline.a.n) == (alpha.rate.passes, alpha.rate.n)  # beta, in A only, is left out
    assert {r.task for r in c.rows if r.task} == {"alpha"}
    disjoint = a.model_copy(update={"experiment_id": "elsewhere", "by_arm_task": [r.model_copy(update={"task": "zeta"}) for r in a.by_arm_task]})
    with pytest.raises(CompareError, match="share no task"):
        compare_reports(a, disjoint)


def test_two_runs_with_the_same_rate_on_every_task_have_the_same_headline(tmp_path):
    """The comparison's headline is each run's own headline (a mean over tasks, every task weighted
    equally) and their difference is the mean of the tasks' differences: B repeats A's rate on every
    task with twice the trials on one task, which trials pooled over tasks turned into a difference."""
    from pytest_webbench.report.compare import compare_reports, render_comparison
    from pytest_webbench.report.rates import rate

    a = build_report_from_dir(write_synthetic_run(tmp_path / "a"))
    doubled = [r.model_copy(update={"rate": rate(2 * r.rate.passes, 2 * r.rate.n)}) if r.task == "alpha" else r
               for r in a.by_arm_task]
    b = a.model_copy(update={"experiment_id": "b", "by_arm_task": doubled})
    c = compare_reports(a, b)
    for arm, own in a.headline.items():
        headline = next(r for r in c.rows if r.arm == arm and r.task is None)
        assert headline.test == "these tasks" and headline.a.rate == pytest.approx(own.rate)
        assert headline.b.rate == pytest.approx(own.rate) and headline.difference == pytest.approx(0.0, abs=1e-12)
        assert headline.ci_low < 0 < headline.ci_high and headline.p_value == pytest.approx(1.0)
        assert (headline.b.passes, headline.b.n) != (headline.a.passes, headline.a.n)  # the pooled counts differ
    assert "every task weighted equally" in render_comparison(c)


def test_a_comparison_overwrites_nothing_it_did_not_write_and_never_writes_into_a_run(tmp_path, capsys):
    """Found by a review of bad inputs: --out A/manifest.md wrote the comparison's JSON over A's
    manifest, and --out any/file.md replaced whatever was there."""
    a = write_synthetic_run(tmp_path, "a")
    b = write_synthetic_run(tmp_path, "b", playwright_all_pass=True)
    before = {p: p.read_bytes() for d in (a, b) for p in d.rglob("*") if p.is_file()}
    precious = tmp_path / "notes.md"
    precious.write_text("my notes\n")
    for argv, why in [([a, b, "--out", a / "manifest.md"], "is inside the run"),
                      ([a, b, "--out", b / "sub" / "cmp.md"], "is inside the run"),
                      ([a, b, "--out", precious], "exists and is not a comparison"),
                      ([a, b, "--out", tmp_path / "cmp.json"], "give a .md path"),
                      ([a, a], "are one run")]:
        assert report_main([str(x) for x in argv]) == 2
        assert why in capsys.readouterr().err
    assert {p: p.read_bytes() for d in (a, b) for p in d.rglob("*") if p.is_file()} == before
    assert precious.read_text() == "my notes\n"
    assert report_main([str(a), str(b), "--out", str(tmp_path / "cmp.md")]) == 0
    assert report_main([str(a), str(b), "--out", str(tmp_path / "cmp.md")]) == 0  # its own comparison, written again
    assert report_main([str(tmp_path / "notes.md")]) == 2 and "no such folder" in capsys.readouterr().err


def test_an_earlier_comparison_of_an_older_schema_may_be_written_over(tmp_path):
    """Found by a review: the check that --out overwrites only a comparison read the file with the
    current model, so the previous version's comparison (schema 2) counted as someone else's file."""
    a = write_synthetic_run(tmp_path, "a")
    b = write_synthetic_run(tmp_path, "b", playwright_all_pass=True)
    (tmp_path / "cmp.md").write_text("# webbench comparison: a vs b\n")
    (tmp_path / "cmp.json").write_text(json.dumps({"schema_version": 2, "a": "a", "b": "b", "rows": [{"fisher_p": 1.0}]}))
    assert report_main([str(a), str(b), "--out", str(tmp_path / "cmp.md")]) == 0
    assert json.loads((tmp_path / "cmp.json").read_text())["schema_version"] == 4
