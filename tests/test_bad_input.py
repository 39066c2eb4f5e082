"""Bad input is a clear refusal that names what is wrong, and writes nothing: experiment IDs that
are paths, limits out of range in a task file, a model the runner does not use."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"


def _run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", *args)


@pytest.mark.parametrize("bad", ["../outside", "/tmp/absolute-id", "a" * 300, "a/b", ".hidden", "x..y", "-n"])
def test_an_experiment_id_that_is_not_a_plain_name_is_refused_and_nothing_is_written(pytester, bad):
    result = _run(pytester, "--suite", str(LOCAL_WEB), "--runner", "nop", f"--experiment-id={bad}", "-k", "shop-price")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert "an experiment ID is 1 to 100 letters" in result.stderr.str()
    assert not (pytester.path / "results").exists() and not (pytester.path / "outside").exists()
    assert not Path("/tmp/absolute-id").exists()
    resumed = _run(pytester, f"--resume={bad}")
    assert resumed.ret == pytest.ExitCode.USAGE_ERROR and "--resume" in resumed.stderr.str()


def test_a_plain_experiment_id_is_accepted(pytester):
    result = _run(pytester, "--suite", str(LOCAL_WEB), "--experiment-id", "run-2026.12_a", "--collect-only", "-k", "shop-price")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()


def _copy_suite(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    shutil.copytree(LOCAL_WEB, suite, ignore=shutil.ignore_patterns("__pycache__"))
    return suite


@pytest.mark.parametrize("section, line, field", [
    ("[agent]", "timeout_sec = -5", "agent.timeout_sec"),
    ("[agent]", "timeout_sec = 0", "agent.timeout_sec"),
    ("[environment]", "cpus = -1", "environment.cpus"),
])
def test_a_limit_out_of_range_in_a_task_file_is_refused_at_collection(pytester, tmp_path, section, line, field):
    suite = _copy_suite(tmp_path)
    task = suite / "tasks" / "shop-price" / "task.toml"
    text = task.read_text()
    key = line.split(" =")[0]
    lines = [entry for entry in text.splitlines() if not entry.startswith(key + " =")]  # the file's own value goes
    at = lines.index(section)
    task.write_text("\n".join(lines[:at + 1] + [line] + lines[at + 1:]) + "\n")
    result = _run(pytester, "--suite", str(suite), "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert str(task) in result.stderr.str() and field in result.stderr.str()


def test_a_missing_reference_solution_is_refused_when_the_reference_runner_needs_it(pytester, tmp_path):
    suite = _copy_suite(tmp_path)
    (suite / "tasks" / "wiki-population" / "solution" / "reference.py").unlink()
    result = _run(pytester, "--suite", str(suite), "--runner", "reference", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "wiki-population/solution/reference.py: missing" in result.stderr.str()
    assert _run(pytester, "--suite", str(suite), "--runner", "nop", "--collect-only").ret == pytest.ExitCode.OK
    # with -k, the selected trials are what is checked: the task without a solution selected is refused...
    selected = _run(pytester, "--suite", str(suite), "--runner", "reference", "-k", "wiki-population and control")
    assert selected.ret == pytest.ExitCode.USAGE_ERROR
    assert "wiki-population/solution/reference.py: missing" in selected.stdout.str() + selected.stderr.str()
    # ...and a selection without it runs
    assert _run(pytester, "--suite", str(suite), "--runner", "reference", "-k", "shop-price and control").ret == pytest.ExitCode.OK


def test_a_model_the_runner_does_not_use_is_refused(pytester):
    result = _run(pytester, "--suite", str(LOCAL_WEB), "--runner", "reference", "--model", "foo/bar", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "runs no model: drop --model foo/bar" in result.stderr.str()


@pytest.mark.parametrize("damage", [lambda text: text[: len(text) // 2], lambda text: text.replace('"attempts"', '"attempts_"')])
def test_a_corrupt_manifest_on_resume_or_report_names_the_file_and_what_to_do(pytester, damage):
    created = _run(pytester, "--suite", str(LOCAL_WEB), "--experiment-id", "broken", "--collect-only", "-k", "shop-price")
    assert created.ret == pytest.ExitCode.OK
    created.stdout.fnmatch_lines(["*planned experiment broken (*manifest.json); its ID is taken: run this plan with `pytest --results-dir=*/results --resume broken`*"])
    manifest = pytester.path / "results" / "broken" / "manifest.json"
    manifest.write_text(damage(manifest.read_text()))
    resumed = _run(pytester, "--resume", "broken")
    assert resumed.ret == pytest.ExitCode.USAGE_ERROR and "INTERNALERROR" not in resumed.stdout.str() + resumed.stderr.str()
    assert f"{manifest}: not a readable manifest" in resumed.stderr.str() and "restore it" in resumed.stderr.str()
    report = pytester.run(sys.executable, "-m", "pytest_webbench.report", str(manifest.parent))
    assert report.ret == 2 and "not a readable manifest" in report.stderr.str()


def test_a_task_group_s_failure_is_shown_by_its_innermost_cause_with_its_file_and_line():
    import asyncio

    from harbor.models.trial.result import ExceptionInfo

    from pytest_webbench.trial.harbor_run import failure_text

    async def solve():
        raise RuntimeError("boom")  # the line the text must name

    async def run():
        async with asyncio.TaskGroup() as group:
            group.create_task(solve())

    try:
        asyncio.run(run())
    except BaseException as exc:  # noqa: BLE001 - the group, as Harbor catches it
        info = ExceptionInfo.from_exception(exc)
    assert info.exception_type == "ExceptionGroup" and "boom" not in info.exception_message
    line = solve.__code__.co_firstlineno + 1
    assert failure_text(info) == f"RuntimeError: boom (at {__file__}:{line}), inside ExceptionGroup"
    plain = ExceptionInfo(exception_type="ValueError", exception_message="bad", exception_traceback="", occurred_at=info.occurred_at)
    assert failure_text(plain) == "ValueError: bad"


def test_a_busy_proxy_port_is_refused_before_any_trial(pytester):
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = _run(pytester, "--suite", str(LOCAL_WEB), "--runner", "nop", "--proxy-listen", f"127.0.0.1:{port}",
                      "-k", "shop-price")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"port {port} is in use" in result.stderr.str() and not (pytester.path / "results").exists()


def test_one_run_of_an_experiment_at_a_time_and_a_dead_holder_leaves_no_lock(pytester):
    """Two `--resume ID` at once both ran every missing trial (a real agent paid twice): the second is
    refused, naming the first; a holder that dies (SIGKILL) frees the experiment at once."""
    import os
    import signal
    import subprocess

    assert _run(pytester, "--suite", str(LOCAL_WEB), "--runner", "nop", "--experiment-id", "once", "--collect-only",
                "-k", "shop-price").ret == 0
    exp = pytester.path / "results" / "once"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from pytest_webbench.results.claims import hold_experiment; "
        f"hold_experiment(Path({str(exp)!r})); print('held', flush=True); time.sleep(600)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        busy = _run(pytester, "--resume", "once")
        assert busy.ret == pytest.ExitCode.USAGE_ERROR
        assert f"is being run by pid {holder.pid} on" in busy.stderr.str() and "one run of an experiment at a time" in busy.stderr.str()
        assert not (exp / "trials").exists()  # the refused resume ran and moved nothing
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    resumed = _run(pytester, "--resume", "once")
    assert resumed.ret == pytest.ExitCode.TESTS_FAILED, resumed.stderr.str()  # it ran: nop fails its trials


@pytest.mark.parametrize("make", ["under a file", "a file"])
def test_an_unwritable_results_dir_is_refused_with_its_path_and_cause(pytester, tmp_path, make):
    (tmp_path / "afile").write_text("x")
    results = tmp_path / "afile" / "results" if make == "under a file" else tmp_path / "afile"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={results}", "--suite", str(LOCAL_WEB),
                                           "--runner", "nop", "-k", "shop-price")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "INTERNALERROR" not in result.stdout.str()
    assert f"--results-dir {results}: cannot create the experiment's folder there" in result.stderr.str()
    assert (tmp_path / "afile").read_text() == "x"  # nothing lost


@pytest.mark.parametrize("docker", ["not installed", "no daemon"])
def test_a_sandbox_whose_needs_are_missing_is_refused_before_any_trial(pytester, tmp_path, monkeypatch, docker):
    """Harbor's own preflight says it once, up front (each trial failed inside before); planning
    alone does not need Docker. The machine's PATH is replaced: no Docker, or one whose daemon is down."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if docker == "no daemon":
        fake = bin_dir / "docker"
        fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
        fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    args = ("--suite", str(LOCAL_WEB), "--runner", "nop", "--environment", "docker", "--proxy-url",
            "http://172.17.0.1:{port}", "-k", "shop-price")
    result = _run(pytester, *args)
    said = {"not installed": "Docker is not installed", "no daemon": "Docker daemon is not running"}[docker]
    assert result.ret == pytest.ExitCode.USAGE_ERROR and f"--environment docker: {said}" in result.stderr.str()
    assert not (pytester.path / "results").exists()
    assert _run(pytester, *args, "--collect-only").ret == pytest.ExitCode.OK


# -- 11: plain Harbor task folders, and tasks graded by their own Harbor verifier ---------------------

VERIFIER_TEST = """#!/bin/bash
# shop-price graded by its own Harbor verifier: the answer the agent wrote and the page it left
price=$(python3 -c "import json; print(json.load(open('/app/answer.json'))['price'])" 2>/dev/null)
url=$(python3 -c "import json; print(json.load(open('/app/page.json'))['url'])" 2>/dev/null)
echo "$url" > /logs/verifier/seen-url.txt
if [ "$price" = "17.49" ] && [ -n "$url" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


def _verifier_suite(root: Path, test_sh: str) -> Path:
    suite = root / "suite"
    shutil.copytree(LOCAL_WEB, suite, ignore=shutil.ignore_patterns("__pycache__"))
    task = suite / "tasks" / "shop-price"
    toml = (task / "task.toml").read_text()
    toml = toml.replace('grading = "pinned"', 'grading = "verifier"').replace('agree_on = ["price"]\n', "")
    toml = toml[:toml.index("[metadata.webbench.answer.price]")]
    (task / "task.toml").write_text(toml)
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text(test_sh)
    return suite


def _verifier_control_trial(pytester, test_sh: str, experiment: str, runner="reference"):
    """shop-price's control trial graded by `test_sh`: the run's result and the trial's record."""
    suite = _verifier_suite(pytester.path, test_sh)
    result = _run(pytester, "--suite", str(suite), "--runner", str(runner), "-k", "shop-price and control",
                  "--experiment-id", experiment)
    [record] = [json.loads(p.read_text()) for p in (pytester.path / "results" / experiment / "trials").glob("*.json")]
    return result, record


def test_a_plain_harbor_task_is_refused_with_the_keys_it_needs(tmp_path):
    from pytest_webbench.design.suite import SuiteError, load_suite

    suite = tmp_path / "suite"
    shutil.copytree(LOCAL_WEB, suite, ignore=shutil.ignore_patterns("__pycache__"))
    template = Path(importlib.util.find_spec("harbor").origin).parent / "cli" / "template-task"
    shutil.copytree(template, suite / "tasks" / "harbor-template")
    with pytest.raises(SuiteError) as refused:
        load_suite(suite)
    message = str(refused.value)
    assert "harbor-template/task.toml: metadata.webbench: missing" in message
    for key in ("site", "grading", "verifier", "turn_cap", "spend_limit_usd", "tool_batch", "answer"):
        assert key in message, key


def test_a_verifier_graded_task_needs_its_test_script(tmp_path):
    from pytest_webbench.design.suite import SuiteError, load_suite

    suite = _verifier_suite(tmp_path, VERIFIER_TEST)
    (suite / "tasks" / "shop-price" / "tests" / "test.sh").unlink()
    with pytest.raises(SuiteError, match=r"shop-price/tests/test.sh: \(file\): missing: grading 'verifier'"):
        load_suite(suite)


@pytest.mark.chromium
@pytest.mark.seal
def test_a_task_graded_by_its_own_harbor_verifier_sees_the_answer_and_the_page(pytester):
    suite = _verifier_suite(pytester.path, VERIFIER_TEST)
    passed = _run(pytester, "--suite", str(suite), "--runner", "reference", "-k", "shop-price", "--experiment-id", "v1")
    passed.assert_outcomes(passed=3)
    exp = pytester.path / "results" / "v1"
    for record in (json.loads(p.read_text()) for p in (exp / "trials").glob("*.json")):
        assert record["verifier_rewards"] == {"reward": 1.0} and record["grading"] == "verifier"
        seen = (exp / record["harbor_trial_dir"] / "verifier" / "seen-url.txt").read_text()
        assert "shop.localhost" in seen  # the page the agent left, given to the verifier
    failed = _run(pytester, "--suite", str(suite), "--runner", "nop", "-k", "shop-price and control", "--experiment-id", "v2")
    failed.assert_outcomes(failed=1)
    [nop] = [json.loads(p.read_text()) for p in (pytester.path / "results" / "v2" / "trials").glob("*.json")]
    assert (nop["outcome"], nop["stop_reason"], nop["verifier_rewards"]) == ("failed", "wrong_answer", {"reward": 0.0})


@pytest.mark.chromium
@pytest.mark.seal
def test_what_the_agent_leaves_in_tests_is_gone_before_the_task_s_verifier_runs(pytester, monkeypatch):
    """/tests is a folder of the agent's while it runs: a file it plants there (a conftest.py would
    take over a pytest verifier) must not be there when the task's own verifier runs."""
    import os

    from test_faults import TESTS, fault_preset

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS / "support"), os.environ.get("PYTHONPATH")])))
    checks_planted = VERIFIER_TEST.replace('if [ "$price" = "17.49" ]', 'if [ ! -e /tests/planted.txt ] && [ "$price" = "17.49" ]')
    suite = _verifier_suite(pytester.path, checks_planted)
    preset, armed = fault_preset(pytester.path, "plant_tests", ["shop-price-a1-control"])
    result = _run(pytester, "--suite", str(suite), "--runner", str(preset), "-k", "shop-price and control", "--experiment-id", "v4")
    result.assert_outcomes(passed=1)
    assert not armed.exists()  # the agent did plant its file


@pytest.mark.chromium
@pytest.mark.seal
def test_nothing_the_agent_leaves_runs_in_the_task_s_verifier(pytester, monkeypatch):
    """A wrong answer, and code where the verifier's python3 loads it (a json.py in its working
    folder, a usercustomize.py in HOME's site-packages, a conftest.py in /tests) that writes reward 1
    and kills its group: the agent checks the plants take over python3 where it runs; the verifier,
    in a workspace of its own, still grades the answer it was given."""
    import os

    from test_faults import TESTS, fault_preset

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS / "support"), os.environ.get("PYTHONPATH")])))
    preset, armed = fault_preset(pytester.path, "shadow_verifier", ["shop-price-a1-control"])
    result, record = _verifier_control_trial(pytester, VERIFIER_TEST, "v5", runner=preset)
    result.assert_outcomes(failed=1)
    assert not armed.exists()  # the agent did plant its files
    assert (record["outcome"], record["stop_reason"], record["verifier_rewards"]) == ("failed", "wrong_answer", {"reward": 0.0})


def test_a_verifier_graded_task_is_refused_in_a_harbor_sandbox(pytester):
    """Only the host environment gives the verifier a workspace of its own: elsewhere it would run
    among the agent's files, so the run is refused before it plans anything."""
    suite = _verifier_suite(pytester.path, VERIFIER_TEST)
    result = _run(pytester, "--suite", str(suite), "--runner", "reference", "--environment", "docker",
                  "--proxy-listen", "0.0.0.0:0", "--proxy-url", "http://host.docker.internal:{port}", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "shop-price/task.toml: grading = \"verifier\"" in result.stderr.str() and "docker" in result.stderr.str()
    assert not (pytester.path / "results").exists()


@pytest.mark.chromium
@pytest.mark.seal
def test_a_verifier_a_signal_ends_gives_no_reward(pytester):
    """A reward written before the verifier was killed is not a verdict."""
    result, record = _verifier_control_trial(pytester, "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\nkill -KILL $$\n", "v6")
    result.assert_outcomes(failed=1)
    # the verifier ran on what the agent left, which could have made it fail: the agent's failure, flagged
    assert (record["outcome"], record["stop_reason"], record["verifier_rewards"]) == ("failed", "verifier_error", None)
    assert "fault charged to the agent: verifier_error" in record["flags"]
    assert "did not finish" in record["detail"] and "137" in record["detail"]


@pytest.mark.chromium
@pytest.mark.seal
def test_a_verifier_that_writes_no_reward_fails_the_trial_flagged(pytester):
    result, record = _verifier_control_trial(pytester, "#!/bin/bash\nexit 0\n", "v3")
    result.assert_outcomes(failed=1)
    assert (record["outcome"], record["stop_reason"]) == ("failed", "verifier_error") and "RewardFile" in record["detail"]
    assert "fault charged to the agent: verifier_error" in record["flags"]  # a broken verifier shows in every trial's flags


# -- 3: a results disk that fills up mid-run, or is mounted read-only ---------------------------------

def _mount_tmpfs(path: Path, size: str, *options: str) -> None:
    import subprocess

    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs", str(path)], check=True)


def _unmount(path: Path) -> None:
    import subprocess

    subprocess.run(["umount", str(path)], check=False)


@pytest.mark.seal  # root: mounts a small disk for the results
def test_a_read_only_results_disk_is_refused_before_anything_runs(pytester):
    results = pytester.path / "ro"
    _mount_tmpfs(results, "1m", "ro")
    try:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={results}", "--suite", str(LOCAL_WEB),
                                               "--runner", "reference", "-k", "shop-price and control")
    finally:
        _unmount(results)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--results-dir {results}: cannot create the experiment's folder there*Read-only file system*"])


@pytest.mark.chromium
@pytest.mark.seal
def test_a_results_disk_that_fills_mid_run_stops_it_whole_and_resume_finishes_it(pytester):
    results = pytester.path / "small"
    # room for the plan and a trial or two (a trial leaves its trace, screenshot, logs and pages: ~140 KB
    # of tmpfs pages here, the whole run 860 KB), not for six
    _mount_tmpfs(results, "400k")
    try:
        full = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={results}", "--suite", str(LOCAL_WEB),
                                             "--runner", "reference", "-k", "shop-price or wiki-population", "--experiment-id", "full")
        assert full.ret == pytest.ExitCode.INTERRUPTED, full.stdout.str()[-3000:]
        full.stdout.fnmatch_lines(["*the results disk cannot be written*No space left on device*"
                                   "every record written so far is whole*pytest --results-dir=*/small --resume full*"])
        experiment = results / "full"
        records = list((experiment / "trials").glob("*.json")) if (experiment / "trials").exists() else []
        for path in records:  # whole, or not there at all
            json.loads(path.read_text())
        assert len(records) < 6 and not list(experiment.rglob("*.tmp*"))
        subprocess_remount = ["mount", "-o", "remount,size=200m", str(results)]
        import subprocess

        subprocess.run(subprocess_remount, check=True)  # the user frees space
        resumed = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={results}", "--resume", "full")
        assert resumed.ret == 0, resumed.stdout.str()[-3000:]
        report = json.loads((experiment / "report.json").read_text())
        assert report["complete"] and report["recorded_trials"] == 6
    finally:
        _unmount(results)


@pytest.mark.parametrize("broken", ['grading = ', 'timeout_sec = 1\ntimeout_sec = 2', '[agent]\n[agent]', 'x = "\\q"'])
def test_a_task_file_that_is_not_toml_is_refused_naming_it(pytester, tmp_path, broken):
    suite = _copy_suite(tmp_path)
    task = suite / "tasks" / "shop-price" / "task.toml"
    task.write_text(task.read_text() + "\n" + broken + "\n")
    result = _run(pytester, "--suite", str(suite), "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert f"{task}: (file): not valid TOML" in result.stderr.str()


def test_task_files_parse_as_the_standard_librarys_toml_reader_parses_them():
    """The suite loader's TOML parser (rtoml, for speed) against the standard library's on every
    TOML file the project ships: the same values, or a suite would mean something else."""
    import tomllib

    from pytest_webbench.design.suite import _read_toml

    files = sorted((Path(__file__).resolve().parents[1] / "suites").rglob("*.toml"))
    assert len(files) > 20
    for path in files:
        assert _read_toml(path) == tomllib.loads(path.read_text(encoding="utf-8")), path


@pytest.mark.parametrize("old, new, field, why", [
    ("timeout_sec = 600", "timout_sec = 60", "agent.timout_sec", "not a field of Harbor's [agent]"),  # a typo: the default stayed
    ("[agent]", "[agent]\nbogus = 1", "agent.bogus", "not a field of Harbor's [agent]"),
    ('schema_version = "1.4"', 'schema_version = "1.4"\nextra_section = 1', "extra_section", "not a field of Harbor's task.toml"),
    ("timeout_sec = 600", "timeout_sec = nan", "agent.timeout_sec", "finite"),
    ("timeout_sec = 600", "timeout_sec = inf", "agent.timeout_sec", "finite"),
    ("spend_limit_usd = 1.0", "spend_limit_usd = inf", "metadata.webbench.spend_limit_usd", "finite"),
    ("turn_cap = 30", 'turn_cap = "30"', "metadata.webbench.turn_cap", "integer"),
    ("shortcut = false", 'shortcut = "no"', "metadata.webbench.shortcut", "boolean"),
    ('start_path = "/"', 'start_path = "@example.invalid/"', "metadata.webbench.start_path", "pattern"),
    ('start_path = "/"', 'start_path = "nope"', "metadata.webbench.start_path", "pattern"),
    ("equals = 17.49", 'equals = "seventeen"', "metadata.webbench.answer.price", "is not a number"),
    ("equals = 17.49", "equals = 17.49\nminimum = 100.0\nmaximum = 1.0", "metadata.webbench.answer.price", "above maximum"),
    ("equals = 17.49", "equals = 17.49\nminimum = 20.0", "metadata.webbench.answer.price", "below the minimum"),
    ("equals = 17.49", "one_of = []", "metadata.webbench.answer.price", "empty list"),
    ("equals = 17.49", 'equals = 17.49\npattern = "["', "metadata.webbench.answer.price", "only a string"),
    ('type = "number"\nequals = 17.49', 'type = "string"\npattern = "["', "metadata.webbench.answer.price", "not a regular expression"),
    ('type = "number"\nequals = 17.49', 'type = "string"\npattern = "1[0-9]"\nequals = "17.49"', "metadata.webbench.answer.price",
     "does not match the pattern"),
])
def test_a_task_rule_no_answer_could_meet_or_a_value_of_another_type_is_refused_naming_the_field(tmp_path, old, new, field, why):
    """Found by a review of bad inputs: each of these loaded, and then failed every trial (a right
    answer included, as the agent's fault), errored it after the agent ran, or left a manifest that
    could not be read back (JSON has no inf). A value of another type is refused, not converted."""
    from pytest_webbench.design.suite import SuiteError, load_suite

    suite = _copy_suite(tmp_path)
    task = suite / "tasks" / "shop-price" / "task.toml"
    assert old in task.read_text()
    task.write_text(task.read_text().replace(old, new))
    with pytest.raises(SuiteError) as refused:
        load_suite(suite)
    assert str(refused.value).startswith(f"{task}: {field}"), str(refused.value)
    assert why in str(refused.value)


@pytest.mark.parametrize("given", ["nan,0", "1,inf", "1,2,nan", "-1,2", "1", "a,b"])
def test_a_model_price_that_could_not_hold_a_spend_cap_is_refused(given):
    """nan slipped past the negative check, and a spend compared with a nan limit never reaches it."""
    from pytest_webbench.gateway.providers import GatewayConfigError, parse_price

    with pytest.raises(GatewayConfigError, match=r"--model-price .*INPUT,OUTPUT\[,CACHED_INPUT\]"):
        parse_price(given)
    assert parse_price("1.25,10").output == pytest.approx(10 / 1e6)


@pytest.mark.parametrize("args, message", [
    (["--suite="], "--suite is empty"),
    (["--resume="], "--resume is empty"),
    (["--suite", str(LOCAL_WEB), "--proxy-listen", "127.0.0.1:99999"], "a port from 0 to 65535"),
    (["--suite", str(LOCAL_WEB), "--proxy-url", "http://127.0.0.1:{bad}"], "its one placeholder is {port}"),
    (["--suite", str(LOCAL_WEB), "--proxy-url", "127.0.0.1:{port}"], "give an http:// or https:// URL"),
    (["--suite", str(LOCAL_WEB), "--arms", ","], "no arm named"),
    (["--suite", str(LOCAL_WEB), "--resume-errored"], "--resume-errored goes with --resume"),
    (["--suite", str(LOCAL_WEB), "--publish-project", "p"], "--publish-project goes with --publish"),
    (["--suite", str(LOCAL_WEB), "--runner", "nop", "--model-price", "1,2"], "--runner nop calls no model: drop --model-price"),
    (["--suite", str(LOCAL_WEB), "--sequential", "--attempts", "9", "--arms", "playwright"], "make none"),
])
def test_an_option_that_would_be_ignored_or_turned_into_something_else_is_refused(pytester, args, message):
    """Found by a review of bad inputs: each of these ran (an empty --suite as no run at all, so
    pytest ran the project's own tests), was dropped silently, or crashed a trial or the session."""
    result = _run(pytester, "--collect-only", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert message in result.stderr.str()
    assert not (pytester.path / "results").exists()


def test_an_empty_results_dir_is_refused_not_put_at_the_project_s_root(pytester):
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--results-dir=", "--suite", str(LOCAL_WEB), "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "--results-dir is empty" in result.stderr.str()
    assert not (pytester.path / "results").exists()


@pytest.mark.parametrize("damage, field, message", [
    ("dir", "task.toml: (file)", "cannot be read"),
    ("self-link", "task.toml: (file)", "cannot be read"),
    ("latin-1", "instruction.md: (file)", "not UTF-8 text"),
    ("empty", "instruction.md: (file)", "empty"),
    ("no arms", "suite.toml: arms", "empty"),
])
def test_an_unreadable_task_file_or_a_suite_without_arms_is_a_clear_refusal(tmp_path, damage, field, message):
    from pytest_webbench.design.suite import SuiteError, load_suite

    suite = _copy_suite(tmp_path)
    task = suite / "tasks" / "shop-price"
    if damage == "dir":
        (task / "task.toml").unlink()
        (task / "task.toml").mkdir()
    elif damage == "self-link":
        (task / "task.toml").unlink()
        (task / "task.toml").symlink_to(task / "task.toml")
    elif damage == "latin-1":
        (task / "instruction.md").write_bytes("Trouvez le prix affich\xe9.".encode("latin-1"))
    elif damage == "empty":
        (task / "instruction.md").write_text(" \n")
    else:
        text = (suite / "suite.toml").read_text()
        (suite / "suite.toml").write_text(text.replace('arms = ["control", "treatment", "playwright"]', "arms = []"))
    with pytest.raises(SuiteError) as refused:
        load_suite(suite)
    assert field in str(refused.value) and message in str(refused.value), str(refused.value)


def test_an_arm_the_suite_does_not_run_is_refused(pytester, tmp_path):
    suite = _copy_suite(tmp_path)
    text = (suite / "suite.toml").read_text()
    (suite / "suite.toml").write_text(text.replace('arms = ["control", "treatment", "playwright"]', 'arms = ["control", "treatment"]'))
    result = _run(pytester, "--suite", str(suite), "--arms", "playwright", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert "runs in control, treatment, not playwright" in result.stderr.str()


def test_a_bad_ini_attempts_and_a_suite_s_unknown_default_runner_name_where_they_were_set(pytester, tmp_path):
    pytester.makeini("[pytest]\nwebbench_attempts = abc\n")  # --suite=PATH: pytest takes a separate PATH as the root's guide
    result = _run(pytester, f"--suite={LOCAL_WEB}", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "webbench_attempts (ini) = 'abc'" in result.stderr.str()
    pytester.makeini("[pytest]\n")
    suite = _copy_suite(tmp_path)
    (suite / "suite.toml").write_text((suite / "suite.toml").read_text().replace('name = "local-web"', 'name = "local-web"\ndefault_runner = "bogus"'))
    result = _run(pytester, f"--suite={suite}", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert f"the suite's default_runner, {suite / 'suite.toml'}" in result.stderr.str()


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_selection_of_no_trial_claims_no_experiment(pytester, workers):
    """-k that matches nothing left an experiment of no trials behind, its ID taken (found by a
    review of bad inputs); now pytest's own "no tests ran", and nothing under the results."""
    result = _run(pytester, "--suite", str(LOCAL_WEB), "--runner", "nop", "-k", "no-such-task", *workers)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout.str()
    results = pytester.path / "results"
    assert not results.exists() or not any(results.iterdir())


def test_a_resumed_run_s_own_options_are_not_refused_again(tmp_path):
    """A run begun before a refusal existed keeps its recorded options: --resume takes them from its
    manifest, where the user cannot drop them (found by a review)."""
    from pytest_webbench.planning.configure import _check_gateway
    from pytest_webbench.planning.options import RunOptions

    options = RunOptions(suite="local-web", runner="reference", allow_unpriced=True, experiment_id="x", results_dir=tmp_path)
    with pytest.raises(pytest.UsageError, match="calls no model: drop --allow-unpriced"):
        _check_gateway(options)
    _check_gateway(options, resuming=True)


@pytest.mark.parametrize("rule, loads", [
    ({"type": "string", "equals": "LHR", "pattern": "[a-z]{3}", "casefold": True}, True),  # "lhr" passes
    ({"type": "string", "equals": "LHR", "pattern": "[a-z]{3}"}, False),
    ({"type": "number", "equals": float("nan")}, False),
    ({"type": "number", "one_of": [1.0, float("inf")]}, False),
    ({"type": "number", "one_of": [1, 500], "maximum": 100}, False),  # 500 can never match: refused, named
])
def test_a_rule_is_refused_only_where_a_value_can_never_match(rule, loads):
    from pydantic import ValidationError

    from pytest_webbench.design.checks import FieldRule

    if loads:
        FieldRule(**rule)
    else:
        with pytest.raises(ValidationError, match="can ever match it"):
            FieldRule(**rule)


def test_an_answer_of_nan_or_infinity_is_no_number():
    """Python's JSON reader takes NaN, which passed every bound of a number rule (found by a review)."""
    from pytest_webbench.design.checks import FieldRule
    from pytest_webbench.grading.answer import parse_answer
    from pytest_webbench.grading.grade import check_field

    rule = FieldRule(type="number", minimum=0, maximum=100)
    for raw in ('{"score": NaN}', '{"score": Infinity}'):
        assert check_field("score", rule, parse_answer(raw)["score"], None) == f"score: expected a number, got {parse_answer(raw)['score']!r}"
    assert check_field("score", rule, 42.5, None) is None


@pytest.mark.parametrize("pattern", ["x*+y", "a{2}+", "(a)?(?(1)b|c)", r"(?i)shop\.localhost", r"\Ashop", r"x+\+"])
def test_a_request_pattern_is_python_s_as_clawbench_s_runtime_reads_it(pattern):
    """The matcher is Python's re.search, as ClawBench's server.py: its syntax loads, and matches."""
    from pytest_webbench.design.checks import RequestCheck
    from pytest_webbench.grading.write_match import WriteMatcher

    check = RequestCheck(url_pattern=pattern, method="POST")
    assert WriteMatcher(check.model_dump()).folded.pattern == pattern


def test_a_request_pattern_that_is_no_regular_expression_is_refused_at_load():
    from pydantic import ValidationError

    from pytest_webbench.design.checks import RequestCheck

    with pytest.raises(ValidationError, match=r"url_pattern\n  Value error, not a regular expression"):
        RequestCheck(url_pattern="shop\\.(com", method="POST")


def test_harbor_s_legacy_keys_still_load(tmp_path):
    """Harbor renames `version` and maps `[environment] memory`; its validators do so in the dict
    they are given, so the unknown-key check reads the file as written (found by a review)."""
    from pytest_webbench.design.suite import load_suite

    suite = _copy_suite(tmp_path)
    task = suite / "tasks" / "shop-price" / "task.toml"
    text = task.read_text().replace('schema_version = "1.4"', 'version = "1.4"')
    task.write_text(text.replace('workdir = "/app"', 'workdir = "/app"\nmemory = "2G"'))
    loaded = next(t for t in load_suite(suite).tasks if t.name == "shop-price")
    assert loaded.name == "shop-price"
