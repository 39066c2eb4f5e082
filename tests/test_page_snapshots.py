"""A page-graded trial keeps the page its check read, and the check can be re-run on it later
(grading/snapshots.py): the same page gives the same value and grade; a changed page is caught."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_webbench.grading.snapshots import SNAPSHOT_HTML, SNAPSHOT_META, main, recheck_saved_pages

pytestmark = pytest.mark.chromium
LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"


def test_the_page_a_check_read_is_saved_and_rechecks_the_same_until_it_changes(pytester, capsys):
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}",
                                           "--suite", str(LOCAL_WEB), "--runner", "reference", "--experiment-id", "snap",
                                           "-k", "shop-cart and not playwright")
    result.assert_outcomes(passed=2)
    experiment = pytester.path / "results" / "snap"
    saved = sorted((experiment / "jobs").glob(f"*/*/{SNAPSHOT_HTML}"))
    assert [p.parent.name for p in saved] == ["shop-cart-a1-control", "shop-cart-a1-treatment"]
    meta = json.loads((saved[0].parent / SNAPSHOT_META).read_text())
    assert meta["url"].endswith("/cart") and meta["value"]["items"] == {"MUG-BLU-S": 2, "LAN-TRL-X": 1}
    assert 'data-sku="MUG-BLU-S"' in saved[0].read_text()

    again = recheck_saved_pages(experiment)  # no live site now: only the saved pages
    assert [(r.trial_id, r.changed, r.outcome_now) for r in again] == [
        ("shop-cart-a1-control", False, "passed"), ("shop-cart-a1-treatment", False, "passed")]

    # The same check on a page that lost a cart line: the value and the grade change, and it says so.
    html = saved[1].read_text()
    start = html.index('<tr class="cart-item" data-sku="LAN-TRL-X"')
    saved[1].write_text(html[:start] + html[html.index("</tr>", start) + len("</tr>"):])
    assert main([str(experiment)]) == 1
    out = capsys.readouterr().out
    assert "same     shop-cart-a1-control: passed -> passed" in out
    assert "CHANGED  shop-cart-a1-treatment: passed -> failed; value" in out and "'LAN-TRL-X'" not in out.split("->")[-1]
