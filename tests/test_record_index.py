"""The records' index (trials/index.jsonl) never disagrees with the per-trial files.

The oracle is each record file read on its own with the report's model; the index's answer must
equal it after every kind of change a results directory sees: records written and rewritten,
moved aside by a resume, deleted, replaced by hand, the directory copied (new inodes), the index
torn or garbled, and workers appending at once. The fast path is checked too: after a write or a
repair the index, not the files, must serve every record.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_webbench.results.record_index import (
    INDEX, IndexLine, ReportedTrial, as_model, rewrite_index, scan_records, write_trial_record,
)
from pytest_webbench.results.records import (
    BrowserCalls, JudgeRecord, PlannedTrial, RunManifest, TaskLimits, Timings, Tokens, TrialRecord, Wall, supersede_record,
    write_manifest,
)

ROOT = Path(__file__).resolve().parents[1]


def _record(trial_id: str, rng: random.Random) -> TrialRecord:
    task, attempt, arm = trial_id.rsplit("-", 2)
    outcome = rng.choice(["passed", "failed", "errored"])
    return TrialRecord(
        trial_id=trial_id, task=task, attempt=int(attempt[1:]), arm=arm, experiment_id="exp", runner="r",
        grading="pinned", outcome=outcome, stop_reason=None if outcome == "passed" else "wrong_answer",
        detail="x" * rng.randint(0, 50), answer={"value": rng.randint(0, 9)}, instruction="Find the price. " * 20,
        timings=Timings(trial_sec=rng.uniform(1, 9), agent_sec=rng.uniform(1, 9)),
        tokens=Tokens(input=rng.randint(1, 999), output=rng.randint(1, 99)),
        calls=BrowserCalls(forwarded=rng.randint(0, 30), rejected=rng.choice([0, 1])),
    )


def _oracle(exp: Path) -> dict[str, dict]:
    """Every record file, each read alone: what the report must see."""
    return {p.stem: ReportedTrial.model_validate_json(p.read_bytes()).model_dump()
            for p in (exp / "trials").glob("*.json")}


def _agrees(exp: Path, repair: bool = False):
    scan = scan_records(exp)
    assert {r.trial_id: as_model(r).model_dump() for r in scan.records} == _oracle(exp)
    assert not scan.problems
    if repair:
        rewrite_index(exp, scan)
    return scan


def _replace_by_hand(path: Path, rng: random.Random) -> None:
    """As an editor saves: a new file renamed over the old one."""
    edited = TrialRecord.model_validate_json(path.read_bytes()).model_copy(update={"outcome": "failed", "detail": f"edited {rng.random()}"})
    tmp = path.with_name(f".{path.name}.edit")
    tmp.write_text(edited.model_dump_json(indent=2))
    os.replace(tmp, path)


@pytest.mark.parametrize("stat_in", ["this process", "a child"])
def test_the_index_agrees_with_the_files_through_every_kind_of_change(tmp_path, monkeypatch, stat_in):
    from pytest_webbench.results import record_index

    if stat_in == "a child":  # as at 100,000 trials: the files are statted in a second process
        monkeypatch.setattr(record_index, "CHILD_ABOVE_BYTES", 0)
    rng = random.Random(19)
    exp = tmp_path / "exp"
    ids = [f"t{t}-a{a}-{arm}" for t in range(4) for a in range(1, 4) for arm in ("control", "treatment")]
    for trial_id in ids[:8]:
        write_trial_record(exp, _record(trial_id, rng))
    assert _agrees(exp).from_files == 0  # every record served by the index
    kinds = ["write", "rewrite", "supersede", "move_back", "delete", "by_hand", "copy", "tear", "garble", "repair"]
    seen, busy_steps = set(), 0
    for step in range(300):
        kind = rng.choice(kinds + ["write"] * 3)  # writes outweigh removals, so records accumulate
        present = sorted(p.stem for p in (exp / "trials").glob("*.json"))
        if kind == "write":
            write_trial_record(exp, _record(rng.choice(ids), rng))
        elif kind == "rewrite" and present:
            write_trial_record(exp, _record(rng.choice(present), rng))  # the old one moves to superseded/
        elif kind == "supersede" and present:
            supersede_record(exp, rng.choice(present))  # as a resume does, with no new record yet
        elif kind == "move_back" and (aside := sorted((exp / "trials" / "superseded").glob("*.json"))):
            moved = rng.choice(aside)  # by hand: same inode, size and mtime as when it was indexed
            os.replace(moved, exp / "trials" / f"{moved.name.split('.')[0]}.json")
        elif kind == "delete" and present:
            (exp / "trials" / f"{rng.choice(present)}.json").unlink()
        elif kind == "by_hand" and present:
            _replace_by_hand(exp / "trials" / f"{rng.choice(present)}.json", rng)
        elif kind == "copy":
            copy = tmp_path / f"copy{step}"
            shutil.copytree(exp, copy)  # timestamps kept, inodes new
            shutil.rmtree(exp)
            exp = copy
        elif kind == "tear" and (exp / "trials" / INDEX).exists():
            index = exp / "trials" / INDEX
            index.write_bytes(index.read_bytes()[:-rng.randint(1, 40)])  # a worker died mid-line
        elif kind == "garble" and (exp / "trials" / INDEX).exists():
            with open(exp / "trials" / INDEX, "ab") as f:
                f.write(rng.choice([b"{not json\n", b'{"stamp":[1,2,3],"record":{}}\n', b"\x00\x01\n"]))
        scan = _agrees(exp, repair=kind == "repair")
        seen.add(kind)
        busy_steps += len(scan.records) >= 5
        if kind == "repair":
            assert _agrees(exp).from_files == 0 and _agrees(exp).dead_lines == 0  # repaired: fast again
    assert seen == set(kinds)
    assert busy_steps > 200  # most steps compared many records, not an empty directory


def test_an_edit_in_place_that_changes_size_or_time_is_seen(tmp_path):
    exp = tmp_path / "exp"
    write_trial_record(exp, _record("t-a1-control", random.Random(1)))
    path = exp / "trials" / "t-a1-control.json"
    record = TrialRecord.model_validate_json(path.read_bytes())
    with open(path, "r+", encoding="utf-8") as f:  # same inode
        f.write(record.model_copy(update={"detail": record.detail + "!"}).model_dump_json(indent=2))
    assert _agrees(exp).from_files == 1


def _write_many(args: tuple[str, int]) -> None:
    exp, worker = args
    rng = random.Random(worker)
    for attempt in range(1, 41):
        write_trial_record(Path(exp), _record(f"w{worker}-a{attempt}-control", rng))


def test_workers_appending_at_once_leave_one_whole_line_per_record(tmp_path):
    exp = tmp_path / "exp"
    (exp / "trials").mkdir(parents=True)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(_write_many, [(str(exp), w) for w in range(8)])
    scan = _agrees(exp)
    assert len(scan.records) == 320 and scan.from_files == 0 and scan.dead_lines == 0


def _planned_run(exp: Path, tasks: list[str], attempts: int, shard: str | None = None) -> list[PlannedTrial]:
    """A paired control/treatment run's manifest; returns its planned trials."""
    planned = [PlannedTrial(trial_id=f"{t}-a{n}-{arm}", task=t, attempt=n, arm=arm, pair_id=f"{t}-a{n}", pair_position=i)
               for t in tasks for n in range(1, attempts + 1) for i, arm in enumerate(("control", "treatment"))]
    write_manifest(exp, RunManifest(
        experiment_id="exp", created_at="2026-12-03T00:00:00+00:00", suite="s", suite_path="/s", runner="r", model=None,
        browser="local", attempts=attempts, arms=["control", "treatment"], paired=True, shard=shard, trials=planned,
        task_limits={t: TaskLimits(grading="pinned", turn_cap=9, spend_limit_usd=1, placebo=False, tool_batch=None,
                                   timeout_sec=60) for t in tasks}, content_hashes={}))
    return planned


def test_a_resume_and_a_merge_leave_an_index_the_report_reads_whole(tmp_path):
    from pytest_webbench.report.merge import merge_shards
    from pytest_webbench.planning.resume import trials_to_skip

    rng = random.Random(3)
    shards = []
    for shard, tasks in (("1/2", ["a"]), ("2/2", ["b"])):
        exp = tmp_path / f"shard{shard[0]}" / "exp"
        planned = _planned_run(exp, tasks, 1, shard)
        for trial in planned:
            write_trial_record(exp, _record(trial.trial_id, rng))
        shards.append(exp)
    (shards[1] / "trials" / "b-a1-treatment.json").unlink()  # an incomplete pair: a resume moves its other half aside
    assert trials_to_skip(shards[1], rerun_errored=False) == set()
    scan = _agrees(shards[1])
    assert scan.from_files == 0 and scan.dead_lines == 0 and not scan.records
    merged = tmp_path / "merged" / "exp"
    merge_shards(merged, shards)
    scan = _agrees(merged)
    assert scan.from_files == 0 and {r.trial_id for r in scan.records} == {"a-a1-control", "a-a1-treatment"}


def test_the_report_renders_from_records_copied_without_their_trial_folders(tmp_path):
    """Results copied off a machine without jobs/ (nor pages/): the report and every page still render."""
    rng = random.Random(5)
    exp = tmp_path / "exp"
    planned = _planned_run(exp, ["a"], 2)
    for trial in planned:
        write_trial_record(exp, _record(trial.trial_id, rng).model_copy(
            update={"harbor_trial_dir": f"jobs/{trial.arm}/{trial.trial_id}"}))
    done = subprocess.run([sys.executable, "-m", "pytest_webbench.report", str(exp)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (exp / "report.html").exists() and not (exp / "jobs").exists()
    assert sorted(p.name for p in (exp / "pages").glob("a-a*.html")) == sorted(f"{t.trial_id}.html" for t in planned)
    assert "a-a1-control" in (exp / "report.html").read_text()


def test_a_current_line_vouches_for_the_trial_s_pages_and_a_changed_record_gets_new_ones(tmp_path):
    from pytest_webbench.report.write import write_report
    from pytest_webbench.viewer.pages import write_trial_pages

    rng = random.Random(9)
    exp = tmp_path / "exp"
    planned = _planned_run(exp, ["a"], 2)

    def pages(record):
        write_trial_pages(exp, record)
        return True

    for trial in planned:  # as a run's workers do: the record, its pages, then its index line
        write_trial_record(exp, _record(trial.trial_id, rng), then=pages)
    scan = scan_records(exp)
    assert scan.pages_current == {t.trial_id for t in planned} and not scan.stale
    built = {p.name: p.stat().st_mtime_ns for p in (exp / "pages").iterdir()}
    write_report(exp)
    assert {p.name: p.stat().st_mtime_ns for p in (exp / "pages").iterdir() if p.name in built} == built  # none rebuilt
    (exp / "pages" / "pair-a-a2.html").unlink()
    _replace_by_hand(exp / "trials" / "a-a1-control.json", rng)
    write_report(exp)
    assert (exp / "pages" / "pair-a-a2.html").exists()
    assert "edited" in (exp / "pages" / "a-a1-control.html").read_text()  # the changed record's own page
    assert "edited" in (exp / "pages" / "pair-a-a1.html").read_text()  # and its pair's
    again = scan_records(exp)  # the report repaired the index: fast, and vouching for every page again
    assert not again.stale and again.pages_current == {t.trial_id for t in planned}


def test_an_index_written_again_keeps_each_line_that_still_holds_and_makes_the_others_anew(tmp_path):
    """rewrite_index reuses a line read from the index only where its stamp and its word on the
    pages are still what the new index says: the index then reads as the one made by writing every
    line again, and a changed record or a new word on its pages gets its own line."""
    from pytest_webbench.results.file_stamps import stamp_of
    from pytest_webbench.results.index_lines import indexed_records, line_json

    rng = random.Random(5)
    exp = tmp_path / "exp"
    planned = _planned_run(exp, ["a", "b"], 2)
    for trial in planned:
        write_trial_record(exp, _record(trial.trial_id, rng))
    before = {t: line[3] for t, line in indexed_records((exp / "trials" / INDEX).read_bytes()).items()}
    _replace_by_hand(exp / "trials" / "a-a1-control.json", rng)
    scan = scan_records(exp)
    assert len(scan.lines) == len(planned) - 1  # the edited record's line is no longer current
    rewrite_index(exp, scan, pages={"b-a2-treatment"})
    written = (exp / "trials" / INDEX).read_bytes()
    remade = "".join(f"{line_json(scan.stamps[r.trial_id], r, r.trial_id == 'b-a2-treatment')}\n"  # as it was made before
                     for r in scan.records)
    after = indexed_records(written)
    assert written.count(b"\n") == len(planned) and len(after) == len(planned)
    assert {t: (s, as_model(r), p) for t, (s, r, p, _) in after.items()} == \
        {t: (s, as_model(r), p) for t, (s, r, p, _) in indexed_records(remade.encode()).items()}
    assert {t for t in after if after[t][3] == before[t]} == {t.trial_id for t in planned} - {"a-a1-control", "b-a2-treatment"}
    assert after["b-a2-treatment"][2] and not after["b-a1-treatment"][2]
    edited = exp / "trials" / "a-a1-control.json"
    assert after["a-a1-control"][0] == stamp_of(edited.stat())
    assert as_model(after["a-a1-control"][1]) == ReportedTrial.model_validate_json(edited.read_bytes())
    # a line held for another stamp than the scan's (the edited record's line from before) is never kept
    old = indexed_records(b"\n".join(before.values()))["a-a1-control"]
    held_before = dataclasses.replace(scan, lines={**scan.lines, "a-a1-control": (old[0], old[2], old[3])})
    rewrite_index(exp, held_before, pages={"b-a2-treatment"})
    assert {t: line[0] for t, line in indexed_records((exp / "trials" / INDEX).read_bytes()).items()} == scan.stamps


def _varied_record(trial_id: str, rng: random.Random) -> TrialRecord:
    """Every field the report reads, with defaults left out and not: the walls, a judge, the CLI's tokens."""
    from pytest_webbench.results.records import JudgeVerdict

    base = _record(trial_id, rng)
    return base.model_copy(update=rng.choice([
        {},
        {"flags": ["reached the site directly"], "tokens_cli": Tokens(input=5, output=1), "agent_tool_calls": 7},
        {"walls": [Wall(route="shell: keys", status="held", evidence="nothing")], "submissions": 1,
         "judge": JudgeRecord(model="openai/gpt-5", strict=JudgeVerdict(match=True, reason="same"))},
        {"calls": BrowserCalls(forwarded=3, rejected=1, cap_hit=True, rejected_rules={"raw-cdp": 1},
                               webmcp_invokes={"injected:completed": 2}), "answer": [1, "two", None], "detail": "ünïcode ✓"},
        {"timings": Timings(), "tokens": Tokens(), "stop_reason": None, "answer": None},
    ]))


def _same_attributes(indexed, model) -> None:
    """Every attribute of a model, read from the indexed record as the report reads it."""
    from collections.abc import Mapping

    from pydantic import BaseModel

    if isinstance(model, BaseModel) and not isinstance(indexed, BaseModel):
        for name in type(model).model_fields:
            _same_attributes(getattr(indexed, name), getattr(model, name))
    elif isinstance(model, list):
        assert isinstance(indexed, (list, tuple)) and len(indexed) == len(model), (indexed, model)
        for a, b in zip(indexed, model):
            _same_attributes(a, b)
    elif isinstance(model, dict):
        assert isinstance(indexed, Mapping) and dict(indexed) == model, (indexed, model)
    else:
        assert indexed == model and type(indexed) is type(model), (indexed, model)


def test_indexed_records_are_what_pydantic_reads_from_each_line(tmp_path):
    """The index's lines are read without pydantic (index_lines.py): each record must equal the
    model pydantic validates from the same line, every line must validate as IndexLine, and a
    rewritten index must read back the same."""
    rng = random.Random(23)
    exp = tmp_path / "exp"
    for n in range(60):
        write_trial_record(exp, _varied_record(f"t{n}-a1-control", rng), then=lambda r: rng.random() < 0.5)
    lines = [IndexLine.model_validate_json(line) for line in (exp / "trials" / INDEX).read_bytes().splitlines()]
    scan = scan_records(exp)
    assert scan.from_files == 0 and len(scan.records) == 60 == len(lines)
    by_line = {line.record.trial_id: line for line in lines}
    for record in scan.records:
        assert not isinstance(record, ReportedTrial)  # served by the index's fast path
        assert as_model(record) == by_line[record.trial_id].record
        assert (record.trial_id in scan.pages_current) == by_line[record.trial_id].pages
        _same_attributes(record, by_line[record.trial_id].record)  # as the report reads them, defaults included
    rewrite_index(exp, scan, scan.pages_current)
    assert (exp / "trials" / INDEX).read_bytes().splitlines() != []
    again = scan_records(exp)
    assert [as_model(r) for r in again.records] == [as_model(r) for r in scan.records]
    assert again.pages_current == scan.pages_current and again.from_files == 0


def test_the_index_s_structs_have_the_models_fields_types_and_defaults():
    """The index is decoded into structs made from the models (index_lines.indexed_struct): each
    has the model's fields, a record with only the required ones reads as the model's defaults,
    and a default list or dict is a record's own."""
    import msgspec

    from pytest_webbench.results.index_lines import indexed_struct
    from pytest_webbench.results.records import JudgeVerdict

    for model in (ReportedTrial, Timings, Tokens, BrowserCalls, Wall, JudgeRecord, JudgeVerdict):
        struct = indexed_struct(model)
        assert [f.name for f in msgspec.structs.fields(struct)] == list(model.model_fields), model
        assert {f.name for f in msgspec.structs.fields(struct) if f.required} == {
            name for name, info in model.model_fields.items() if info.is_required()}, model
    required = {"trial_id": "t1-a1-control", "task": "t1", "attempt": 1, "arm": "control", "experiment_id": "e", "outcome": "failed"}
    decoded = msgspec.json.decode(json.dumps(required), type=indexed_struct(ReportedTrial))
    _same_attributes(decoded, ReportedTrial(**required))
    other = msgspec.json.decode(json.dumps(required), type=indexed_struct(ReportedTrial))
    decoded.flags.append("x")
    decoded.calls.rejected_rules["y"] = 1
    assert other.flags == [] and other.calls.rejected_rules == {}


@pytest.mark.parametrize("field", ["n: int = Field(0, ge=0)", "s: Annotated[str, Field(max_length=3)] = ''", "b: bytes = b''",
                                   "k: int = Field(0, alias='kk')", "when: datetime = datetime(2026, 1, 1)",
                                   "counts: dict[int, int] = Field(default_factory=dict)"])
def test_what_a_struct_would_read_otherwise_than_pydantic_is_refused_when_it_is_made(field):
    """A constraint, an alias, or a type msgspec decodes otherwise (bytes from base64, datetimes, int
    keys) would have the index accept what the model refuses: the struct is refused instead."""
    from pytest_webbench.results.index_lines import indexed_struct

    namespace: dict = {}
    exec(f"from datetime import datetime\nfrom typing import Annotated\nfrom pydantic import BaseModel, Field\n"
         f"class Model(BaseModel):\n    {field}\n", namespace)
    with pytest.raises(TypeError):
        indexed_struct(namespace["Model"])


def _indexed(tmp_path: Path, count: int, seed: int) -> tuple[Path, Path]:
    """An experiment of `count` records t0-a1-control..., and its index."""
    rng = random.Random(seed)
    exp = tmp_path / "exp"
    for n in range(count):
        write_trial_record(exp, _record(f"t{n}-a1-control", rng))
    return exp, exp / "trials" / INDEX


def test_an_index_line_edited_by_hand_is_read_from_its_file(tmp_path):
    """Even an edit pydantic would accept (an outcome changed, a time changed) fails the line's
    CRC: the record comes from its file, the untouched lines from the index."""
    exp, index = _indexed(tmp_path, count=6, seed=31)
    raw = index.read_bytes().splitlines()
    edited = [json.loads(line) for line in raw[:3]]
    edited[0]["record"]["outcome"] = "passed" if edited[0]["record"]["outcome"] != "passed" else "failed"
    edited[1]["record"]["timings"]["agent_sec"] = 1.0
    edited[2]["record"]["outcome"] = []  # not even a string
    index.write_bytes(b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in edited)
                      + b"".join(line + b"\n" for line in raw[3:]))
    scan = _agrees(exp)
    assert scan.from_files == 3 and scan.dead_lines == 3


def test_a_signed_line_of_the_wrong_shape_is_read_from_its_file(tmp_path):
    """What a harness bug could write with a valid CRC: another schema, the wrong types where the
    report would crash or miscount. Each is refused, and its record read from its file."""
    from pytest_webbench.results.index_lines import _signed

    exp, index = _indexed(tmp_path, count=9, seed=29)
    lines = [json.loads(line) for line in index.read_bytes().splitlines()]
    lines[6]["record"]["tokens"]["source"] = "a guess"  # not one of the model's Literal values
    lines[7]["record"]["judge"] = {"model": "m", "strict": {"match": "yes"}}
    lines[0]["v"] = "an-older-schema"
    lines[1]["record"]["outcome"] = ["passed"]
    lines[2]["record"]["timings"] = [1, 2]
    lines[3]["stamp"] = lines[3]["stamp"][:3]
    lines[4]["record"]["walls"] = [{"route": "x", "status": "maybe"}]
    lines[5]["record"]["trial_id"] = 5

    def signed(line: dict) -> str:
        del line["c"]
        return _signed(json.dumps(line, separators=(",", ":"))[1:])

    index.write_text("".join(signed(line) + "\n" for line in lines))
    scan = _agrees(exp)
    assert scan.from_files == 8 and scan.dead_lines == 8
    assert not isinstance(next(r for r in scan.records if r.trial_id == "t8-a1-control"), ReportedTrial)  # re-signed intact: used


def test_a_signed_line_that_is_not_one_object_of_this_schema_is_read_from_its_file(tmp_path):
    """Lines a harness bug could sign that pydantic refuses: a second `v` after the first (pydantic
    reads the last), two objects on one line (the index is read as one array, so the second, with
    its CRC and schema unchecked, would have joined it), one object over two lines (swallowing the
    good line between), and nesting deeper than any parser reads (msgspec's own limit raised
    RecursionError). Each is refused, the good lines kept."""
    from pytest_webbench.results.index_lines import _signed, fingerprint

    exp, index = _indexed(tmp_path, count=5, seed=37)
    raw = index.read_text().splitlines()
    lines = [json.loads(line) for line in raw]

    def body(line: dict) -> str:  # the line after its CRC
        return json.dumps({k: v for k, v in line.items() if k != "c"}, separators=(",", ":"))[1:]

    older = {**lines[1], "v": "an-older-schema", "record": {**lines[1]["record"], "outcome": "passed", "detail": "forged"}}
    bad = [
        _signed(body(lines[0])[:-1] + ',"v":"an-older-schema"}'),
        _signed(body(lines[0])[:-1] + "}," + json.dumps(older, separators=(",", ":"))),
        _signed(body(lines[2])[:-2] + ',"answer":[0'),
        _signed(f'"v":"{fingerprint()}","stamp":[0,0,0,0],"record":{{"trial_id":"zz","task":"t","attempt":1,"arm":"a",'
                '"outcome":"o"}}]}}'),
        _signed(body(lines[4])[:-2] + ',"answer":' + "[" * 3000 + "]" * 3000 + "}}"),
    ]
    assert IndexLine.model_validate_json(bad[0]).v == "an-older-schema"
    for line in bad[1:]:
        with pytest.raises(ValueError):
            IndexLine.model_validate_json(line)
    # t3's good line between the halves of one object; t0's and t4's records from their files
    index.write_text("\n".join([bad[0], bad[1], bad[2], raw[3], bad[3], bad[4]]) + "\n")
    scan = _agrees(exp)
    from pytest_webbench.results.index_lines import indexed_records

    assert scan.from_files == 4 and set(indexed_records(index.read_bytes())) == {"t3-a1-control"}
    assert all(r.detail != "forged" for r in scan.records)


def test_the_child_that_stats_the_files_lists_what_this_process_would(tmp_path):
    """A broken link among the records is listed by both as no file (a problem the report names), as a
    folder would be."""
    from pytest_webbench.results import file_stamps, record_index

    exp = tmp_path / "exp"
    for n in range(5):
        write_trial_record(exp, _record(f"t{n}-a1-control", random.Random(n)))
    (exp / "trials" / "gone-a1-control.json").symlink_to(tmp_path / "nowhere.json")
    record_index.CHILD_ABOVE_BYTES, saved = 0, record_index.CHILD_ABOVE_BYTES
    try:
        child = record_index._stat_in_child(exp / "trials")
    finally:
        record_index.CHILD_ABOVE_BYTES = saved
    assert child is not None
    listed = record_index._child_listing(child)
    assert child.returncode == 0
    assert sorted(listed) == sorted(file_stamps.entries(str(exp / "trials"))) and len(listed) == 6
    assert ("gone-a1-control.json", "not a file", True) in listed


@pytest.mark.parametrize("records_read", ["whole", "in batches", "a pool that cannot start"])
def test_pages_written_by_a_pool_are_the_pages_one_process_writes(tmp_path, monkeypatch, records_read):
    """Records copied without their pages: the stale pages are written unit by unit (a pair and its
    trials), in one process or, past PARALLEL_FROM, by a spawned pool (two workers even on one
    core, here); byte for byte the same pages, and the records read in batches give the scan the
    records read whole do. A pool that cannot start (no interpreter to spawn) leaves the pages to
    this process: the report is never lost to it."""
    import multiprocessing.spawn

    from pytest_webbench.results import record_index
    from pytest_webbench.viewer import pages

    monkeypatch.setattr(pages.os, "sched_getaffinity", lambda pid: {0, 1})
    if records_read == "in batches":
        monkeypatch.setattr(record_index, "READ_BATCH", 3)
    if records_read == "a pool that cannot start":
        monkeypatch.setattr(multiprocessing.spawn, "_python_exe", os.fsencode("/nonexistent/python"))
    rng = random.Random(23)
    made = {}
    for how in ("one process", "a pool"):
        exp = tmp_path / how.replace(" ", "-")
        rng.seed(23)
        for trial_id in [f"t{t}-a{a}-{arm}" for t in range(3) for a in (1, 2) for arm in ("control", "treatment", "playwright")]:
            write_trial_record(exp, _record(trial_id, rng))
        scan = _agrees(exp)
        monkeypatch.setattr(pages, "PARALLEL_FROM", 10**9 if how == "one process" else 1)
        pairs = {f"t{t}-a{a}": [f"t{t}-a{a}-control", f"t{t}-a{a}-treatment"] for t in range(3) for a in (1, 2)}
        pair_of = {m: p for p, ms in pairs.items() for m in ms}
        written, unreadable = pages._write_stale_pages(exp, scan.mtimes, set(), set(), pairs, pair_of, {})
        assert (written, unreadable) == (18 + 6, set())
        made[how] = {p.name: p.read_text() for p in (exp / "pages").glob("*.html")}
    assert made["one process"].keys() == made["a pool"].keys() and len(made["a pool"]) == 24
    strip = lambda text: text.replace("one-process", "").replace("a-pool", "")  # noqa: E731 - the folders' names
    assert {k: strip(v) for k, v in made["one process"].items()} == {k: strip(v) for k, v in made["a pool"].items()}
    assert not any((tmp_path / "a-pool" / "pages" / ".staging").iterdir())  # every page renamed into place


@pytest.mark.parametrize("pool", ["that starts", "that cannot start"])
def test_a_first_render_from_records_alone_reads_each_once_in_the_pool_and_says_what_one_process_says(tmp_path, monkeypatch, pool):
    """Past PARALLEL_FROM, a record no index line vouches for is read by the pool that writes its
    pages, which hands the scan its index line (viewer/first_render.py): the report, the pages, the
    index and the problems are those of this process reading every record itself, bad files
    included; a pool that cannot start leaves it all to this process."""
    import multiprocessing.spawn

    from pytest_webbench.report.write import write_report
    from pytest_webbench.results.index_lines import indexed_records
    from pytest_webbench.viewer import first_render, pages

    monkeypatch.setattr(pages.os, "sched_getaffinity", lambda pid: {0, 1})
    if pool == "that cannot start":
        monkeypatch.setattr(multiprocessing.spawn, "_python_exe", os.fsencode("/nonexistent/python"))
    read_by_pool = []
    real = first_render.read_and_render
    monkeypatch.setattr(first_render, "read_and_render", lambda *a: read_by_pool.append(r := real(*a)) or r)
    import pytest_webbench.report.write as write_module

    monkeypatch.setattr(write_module, "read_and_render", first_render.read_and_render)
    made = {}
    for how in ("one process", "the pool"):
        monkeypatch.setattr(pages, "PARALLEL_FROM", 10**9 if how == "one process" else 1)
        exp = tmp_path / how.replace(" ", "-") / "exp"
        rng = random.Random(31)
        planned = _planned_run(exp, ["a", "b", "c"], 2)
        for trial in planned:
            write_trial_record(exp, _record(trial.trial_id, rng))
        (exp / "trials" / "b-a1-treatment.json").write_text("{not json")  # its pair page has one side
        other = json.loads((exp / "trials" / "c-a2-control.json").read_text())
        (exp / "trials" / "c-a2-control.json").write_text(json.dumps({**other, "trial_id": "c-a1-control"}))  # another's
        reported_only = json.loads((exp / "trials" / "a-a2-control.json").read_text())  # the report's fields hold,
        (exp / "trials" / "a-a2-control.json").write_text(json.dumps({**reported_only, "trace": "not a trace"}))  # not the record
        (exp / "trials" / INDEX).unlink()
        write_report(exp)
        lines = indexed_records((exp / "trials" / INDEX).read_bytes())
        made[how] = {
            "report": json.loads((exp / "report.json").read_text().replace(str(exp.parent), "")),
            "pages": {p.name: p.read_text().replace(str(exp.parent), "") for p in (exp / "pages").glob("*.html")},
            "index": {t: (as_model(r).model_dump(), vouched) for t, (_, r, vouched, _) in lines.items()},
        }
    given = read_by_pool[-1][0]
    if pool == "that starts":  # every good record, and only those, came from the pool
        assert set(given) == {t.trial_id for t in planned} - {"b-a1-treatment", "c-a2-control", "a-a2-control"}
    else:
        assert given == {}
    assert made["one process"]["index"] == made["the pool"]["index"] and len(made["the pool"]["index"]) == 10
    assert made["one process"]["pages"] == made["the pool"]["pages"]
    assert made["one process"]["report"] == made["the pool"]["report"]
    assert len(made["the pool"]["report"]["problems"]) == 2  # the two files no model reads as that trial's record


@pytest.mark.parametrize("how", ["one process", "the pool"])
def test_trials_merged_in_with_their_old_times_are_listed_on_the_trials_index_page(tmp_path, monkeypatch, how):
    """Records copied in with their times kept (cp -p, rsync -a), older than pages/index.html: the
    pages the pool writes count as written, so the trials index is written again (found by review)."""
    from pytest_webbench.report.write import write_report
    from pytest_webbench.results.records import atomic_write
    from pytest_webbench.viewer import pages

    monkeypatch.setattr(pages.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(pages, "PARALLEL_FROM", 10**9 if how == "one process" else 1)
    exp = tmp_path / "exp"
    rng = random.Random(5)
    planned = _planned_run(exp, ["a", "b", "c"], 1)
    for trial in planned:
        if trial.task != "c":
            write_trial_record(exp, _record(trial.trial_id, rng))
    write_report(exp)
    assert "c-a1-control" not in (exp / "pages" / "index.html").read_text()
    for trial in planned:
        if trial.task == "c":
            path = exp / "trials" / f"{trial.trial_id}.json"
            atomic_write(path, _record(trial.trial_id, rng).model_dump_json(indent=2))
            os.utime(path, (1_600_000_000, 1_600_000_000))
    write_report(exp)
    assert (exp / "pages" / "c-a1-control.html").exists() and "c-a1-control" in (exp / "pages" / "index.html").read_text()


def test_a_pair_page_drawn_with_one_side_vouches_for_neither_member_whichever_path_drew_it(tmp_path, monkeypatch):
    """One member's file holds the report's fields but not a whole record (its time kept, so its own
    page looks current); the other is copied in again and its pages are gone: the pool, like one
    process, draws the pair page with one side and vouches for neither member (found by review)."""
    from pytest_webbench.report.write import write_report
    from pytest_webbench.results.index_lines import indexed_records
    from pytest_webbench.results.records import atomic_write
    from pytest_webbench.viewer import pages

    monkeypatch.setattr(pages.os, "sched_getaffinity", lambda pid: {0, 1})
    made = {}
    for how in ("one process", "the pool"):
        monkeypatch.setattr(pages, "PARALLEL_FROM", 10**9)
        exp = tmp_path / how.replace(" ", "-") / "exp"
        rng = random.Random(7)
        for trial in _planned_run(exp, ["a", "b"], 1):
            write_trial_record(exp, _record(trial.trial_id, rng))
        write_report(exp)
        half = exp / "trials" / "a-a1-treatment.json"
        half.write_text(json.dumps({**json.loads(half.read_text()), "trace": "not a trace"}))
        os.utime(half, (1_600_000_000, 1_600_000_000))
        again = exp / "trials" / "a-a1-control.json"
        atomic_write(again, again.read_text())
        (exp / "pages" / "a-a1-control.html").unlink()
        (exp / "pages" / "pair-a-a1.html").unlink()
        monkeypatch.setattr(pages, "PARALLEL_FROM", 10**9 if how == "one process" else 1)
        write_report(exp)
        made[how] = {t: vouched for t, (_, _, vouched, _) in indexed_records((exp / "trials" / INDEX).read_bytes()).items()}
    assert made["one process"] == made["the pool"]
    assert made["the pool"]["a-a1-control"] is False and made["the pool"]["a-a1-treatment"] is False
