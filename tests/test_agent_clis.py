"""The real agent CLIs (pinned, from npm) on local-web, offline: each talks to a scripted model
endpoint in its provider's real streaming protocol, and to the browser only through the proxy.

Slow (a CLI start per trial): marked `agent_cli`; CI runs them (`bash .ci/setup` installs the CLIs).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from pytest_webbench.proxy.log import read_call_log
from pytest_webbench.results.records import read_trial_records
from pytest_webbench.service_loop import ServiceLoop

sys.path.insert(0, str(Path(__file__).parent / "support"))
from model_endpoint import ModelEndpoint  # noqa: E402

pytestmark = [pytest.mark.chromium, pytest.mark.agent_cli]
LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"
CLIS = {
    # runner: (provider, base URL path the CLI expects)
    "codex": ("openai", "/v1"),
    "claude": ("anthropic", ""),
    "pi": ("openai", "/v1"),  # Pi's OpenAI-compatible provider speaks chat completions
}


NATIVE_WEB_TOOL = re.compile(r"web_?search|web_?fetch", re.I)


def _tool_names(body: dict) -> list[str]:
    """What a request offers the model: function tools by name, built-in ones (Responses) by type."""
    names = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool.get("function"), dict) else {}
        names.append(tool.get("name") or function.get("name") or tool.get("type") or "")
    return names


@pytest.fixture
def endpoint():
    model = ModelEndpoint(LOCAL_WEB)
    loop = ServiceLoop()
    url = loop.serve(model.app, "scripted model endpoint")
    yield model, url
    loop.close()


def run_cli(pytester, monkeypatch, endpoint, runner: str, behaviour: str, selection: str, exp: str, *extra: str):
    model, url = endpoint
    provider, path = CLIS[runner]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-scripted")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(LOCAL_WEB),
        "--runner", runner, "--model", f"{provider}/{behaviour}", f"--model-base-url={url}{path}",
        "--experiment-id", exp, "-k", selection, *(extra or ("--allow-unpriced",)),
    )
    return result, pytester.path / "results" / exp


# Written by every pytest process of a run as it ends: whether it imported litellm (runners/model_names.py)
LITELLM_PROBE = """
import os, sys
def pytest_sessionfinish(session):
    who = getattr(session.config, "workerinput", {}).get("workerid", "controller")
    with open("litellm-imported.txt", "a") as out:
        out.write(f"{who} {'litellm' in sys.modules}\\n")
"""


def litellm_imported(pytester) -> dict[str, bool]:
    lines = (pytester.path / "litellm-imported.txt").read_text().split()
    return {who: flag == "True" for who, flag in zip(lines[::2], lines[1::2])}


@pytest.mark.parametrize("runner", CLIS)
def test_a_pair_passes_with_the_real_cli_and_its_own_token_figures(runner, pytester, monkeypatch, endpoint):
    pytester.makeconftest(LITELLM_PROBE)
    result, exp = run_cli(pytester, monkeypatch, endpoint, runner, "webbench-script", "shop-price and not playwright", "pair")
    result.assert_outcomes(passed=2)
    # Harbor's reading of the model came from the controller's record, and the gateway priced the calls
    assert litellm_imported(pytester) == {"controller": False}
    records = {r.arm: r for r in read_trial_records(exp)[0]}
    model, _ = endpoint
    for arm, record in records.items():
        sent = model.model.sent[f"pair-{record.trial_id}"]
        # the gateway metered exactly what the endpoint sent, and so did the CLI's own report beside it
        assert record.tokens.source == "gateway" and record.tokens_cli.source == "cli"
        for tokens in (record.tokens, record.tokens_cli):
            assert (tokens.input, tokens.cached, tokens.output) == (sent["input"], sent["cached"], sent["output"]), arm
        assert record.model_requests >= sent["turns"] and record.timings.model_sec > 0 and record.timings.tool_sec > 0
        assert record.tokens.cost_usd is None  # the scripted model is unpriced (--allow-unpriced)
        assert sent["turns"] == 3  # list the page's tools, then use the search tool (treatment) or page through (control)
        assert record.answer == {"price": 17.49} and record.flags == []
        log = read_call_log(exp / record.harbor_trial_dir / "proxy-log.jsonl").records
        tools = [r.tool for r in log if r.method == "tools/call"]
        assert tools == (["webmcp", "webmcp"] if arm == "treatment" else ["webmcp", "execute_playwright_code"]), arm
    assert records["treatment"].calls.webmcp_invokes == {"injected:completed": 1}
    # the task's no-network agent phase also turns off the CLI's native web tools (Harbor does, for
    # every arm alike): they run at the provider, past any network wall, around the browser
    offered = {name for request in model.model.requests for name in _tool_names(request["body"])}
    assert offered and not {name for name in offered if NATIVE_WEB_TOOL.search(name)}, offered
    manifest = json.loads((exp / "manifest.json").read_text())
    assert manifest["runner_preset"]["cli"]["version"] == manifest["cli_version"]
    assert manifest["model"] == f"{CLIS[runner][0]}/webbench-script"
    # Harbor's own viewer (`harbor view <run>/jobs --jobs`) still reads each trial's ATIF trajectory,
    # and the trial's page shows the model turns the gateway logged beside the browser calls
    from fastapi.testclient import TestClient
    from harbor.viewer.server import create_app

    with TestClient(create_app(exp / "jobs", mode="jobs")) as client:
        for arm, record in records.items():
            trajectory = client.get(f"/api/jobs/{arm}/trials/{record.trial_id}/trajectory").json()
            assert trajectory["schema_version"].startswith("ATIF") and len(trajectory["steps"]) > 2, arm
    page = (exp / "pages" / f"{records['control'].trial_id}.html").read_text()
    assert page.count('data-kind="model"') == records["control"].model_requests
    assert page.count('data-kind="browser"') == 2


def test_workers_run_the_real_cli_without_importing_litellm(pytester, monkeypatch, endpoint):
    """Each worker takes Harbor's reading of the model from the controller: about 4.7 CPU s saved a worker."""
    pytester.makeconftest(LITELLM_PROBE)
    result, exp = run_cli(pytester, monkeypatch, endpoint, "codex", "webbench-script", "shop-price and not playwright",
                          "workers", "--allow-unpriced", "-n", "2")
    result.assert_outcomes(passed=2)
    assert litellm_imported(pytester) == {"gw0": False, "gw1": False, "controller": False}
    assert all(r.tokens_cli.input > 0 for r in read_trial_records(exp)[0])  # the CLI's own figures are still read


@pytest.mark.parametrize("runner", CLIS)
def test_a_rejected_key_makes_the_trial_errored_and_the_run_incomplete(runner, pytester, monkeypatch, endpoint):
    result, exp = run_cli(pytester, monkeypatch, endpoint, runner, "webbench-script-401", "shop-price and control", "auth")
    result.assert_outcomes(failed=1)
    [record] = read_trial_records(exp)[0]
    assert record.outcome == "errored" and record.stop_reason == "agent_error"
    assert "Authentication" in record.detail or "401" in record.detail
    report = json.loads((exp / "report.json").read_text())
    assert not report["complete"] and "errored" in report["incomplete_because"][-1]
@pytest.mark.cli("codex")
def test_a_shell_call_to_the_site_fails_and_is_flagged(pytester, monkeypatch, endpoint):
    result, exp = run_cli(pytester, monkeypatch, endpoint, "codex", "webbench-script-curl", "shop-price and control", "curl")
    result.assert_outcomes(passed=1)  # a flag never changes the score
    [record] = read_trial_records(exp)[0]
    assert len(record.flags) == 1 and record.flags[0].startswith("exec_command tried to reach the site") and "curl" in record.flags[0]
    steps = json.loads((exp / record.harbor_trial_dir / "agent" / "trajectory.json").read_text())["steps"]
    [shell] = [s for s in steps if any(c["function_name"] == "exec_command" for c in s.get("tool_calls") or [])]
    output = shell["observation"]["results"][0]["content"]
    assert "Failed to connect to shop.localhost" in output and "<html" not in output.lower(), output  # the seal held
    report = json.loads((exp / "report.json").read_text())
    assert [n["trial_id"] for n in report["flagged"]] == [record.trial_id]
@pytest.mark.cli("claude")
def test_reading_the_grader_fails_and_is_flagged(pytester, monkeypatch, endpoint):
    result, exp = run_cli(pytester, monkeypatch, endpoint, "claude", "webbench-script-grader", "shop-price and control", "grader")
    result.assert_outcomes(passed=1)
    [record] = read_trial_records(exp)[0]
    assert record.flags and record.flags[0].startswith("Bash tried to reach the task's files")
    trajectory = (exp / record.harbor_trial_dir / "agent" / "trajectory.json").read_text()
    assert "No such file or directory" in trajectory  # the task's folder is hidden from the agent's shell
@pytest.mark.cli("claude")
def test_a_run_that_times_out_stays_scored_with_the_work_it_did(pytester, monkeypatch, endpoint):
    import shutil

    suite = pytester.path / "suite"
    shutil.copytree(LOCAL_WEB, suite)
    task = suite / "tasks" / "shop-price" / "task.toml"
    task.write_text(task.read_text().replace("timeout_sec = 600", "timeout_sec = 8"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-scripted")
    model, url = endpoint
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(suite), "--runner", "claude",
        "--model", "anthropic/webbench-script-stall", f"--model-base-url={url}", "--experiment-id", "stall", "--allow-unpriced",
        "-k", "shop-price and control")
    result.assert_outcomes(failed=1)
    [record] = read_trial_records(pytester.path / "results" / "stall")[0]
    # the agent hit its time limit after one browser call: graded (no answer), not errored
    assert record.outcome == "failed" and record.stop_reason == "agent_timeout", record.detail
    assert record.calls.forwarded == 1 and "AgentTimeoutError" in record.detail
    assert json.loads((pytester.path / "results" / "stall" / "report.json").read_text())["complete"]
@pytest.mark.cli("claude")
def test_no_key_is_written_anywhere(pytester, monkeypatch, endpoint):
    """Sentinel keys for every service in the environment; a real CLI run with --html; then
    every file the run wrote is scanned for them."""
    sentinels = {name: f"sentinel-{name.lower()}-5c1f9e" for name in
                 ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "KERNEL_API_KEY", "BRAINTRUST_API_KEY")}
    model, url = endpoint
    for name, value in sentinels.items():
        monkeypatch.setenv(name, value)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(LOCAL_WEB),
        "--runner", "claude", "--model", "anthropic/webbench-script", f"--model-base-url={url}", "--allow-unpriced",
        "--experiment-id", "keys", "-k", "shop-price and not playwright", f"--html={pytester.path / 'out.html'}",
        "--self-contained-html")
    result.assert_outcomes(passed=2)
    written = [p for p in (pytester.path / "results").rglob("*") if p.is_file()] + [pytester.path / "out.html"]
    assert len(written) > 20
    for path in written:
        data = path.read_bytes()
        for name, value in sentinels.items():
            assert value.encode() not in data, f"{name} leaked into {path}"
    # the agent had only its trial's token; the gateway sent the real key on, on the wire only
    assert {r["key"] for r in model.model.requests if r["api"] == "messages"} == {sentinels["ANTHROPIC_API_KEY"]}
@pytest.mark.cli("codex")
def test_an_agent_s_environment_holds_none_of_the_harness_s_keys(pytester, monkeypatch, endpoint):
    """A scripted hostile agent prints its environment with the real Codex CLI: the harness's Kernel
    and Braintrust keys and another provider's key are not there; what the CLI needs is."""
    sentinels = {"KERNEL_API_KEY": "sentinel-kernel-71c2", "BRAINTRUST_API_KEY": "sentinel-braintrust-71c2",
                 "PURELY_MAIL_API_KEY": "sentinel-purelymail-71c2", "WEBBENCH_PRIVATE_SETTING": "sentinel-private-71c2"}
    for name, value in sentinels.items():
        monkeypatch.setenv(name, value)
    result, exp = run_cli(pytester, monkeypatch, endpoint, "codex", "webbench-script-env", "shop-price and control", "env")
    result.assert_outcomes(passed=1)
    [record] = read_trial_records(exp)[0]
    trajectory = (exp / record.harbor_trial_dir / "agent" / "trajectory.json").read_text()
    assert "PATH=" in trajectory and "HOME=/home/agent" in trajectory  # the agent did print its environment
    for name, value in {**sentinels, "ANTHROPIC_API_KEY": "sk-ant-scripted"}.items():  # run_cli sets the last
        assert value not in trajectory, f"{name} reached the agent"



@pytest.mark.parametrize("runner", CLIS)
def test_the_spend_cap_stops_the_real_cli_live(runner, pytester, monkeypatch, endpoint):
    """Priced so that a third model turn cannot fit shop-price's $1 limit: the gateway refuses it in
    the API's own shape before it goes (its worst case, every byte of its body an input token and
    16 output tokens, is more than is left), the CLI stops at once, and the trial fails over_spend."""
    model, _ = endpoint
    before = len(model.model.requests)
    # a turn is 1,200 input tokens (300 cached) and 40 output tokens: at $1 / $11,000 per million that is
    # $0.4412; after two, $0.1176 is left, less the third request's bytes at $1e-6: under 16 output tokens
    result, exp = run_cli(pytester, monkeypatch, endpoint, runner, "webbench-script", "shop-price and control", "cap",
                          "--model-price", "1,11000")
    result.assert_outcomes(failed=1)
    [record] = read_trial_records(exp)[0]
    assert (record.outcome, record.stop_reason) == ("failed", "over_spend"), record.detail
    assert "model gateway stopped the agent" in record.detail
    assert record.model_refused == 1  # stopped within one request of the cap: no retry after the refusal
    assert record.tokens.cost_usd == pytest.approx(2 * 0.4412) and record.tokens.input == 2 * 1200
    session = [r for r in model.model.requests[before:] if "shop-price-a1-control" in json.dumps(r["body"])]
    assert len(session) == 2  # two turns reached the model; the third was refused at the gateway
    from pytest_webbench.gateway.meter import read_model_log

    decisions = [c.decision for c in read_model_log(exp / record.harbor_trial_dir / "model-log.jsonl")]
    assert decisions.count("refused") == 1 and decisions[-1] == "refused"
@pytest.mark.cli("codex")
def test_a_hostile_agent_finds_no_other_process_and_no_file_of_the_harness(pytester, monkeypatch, endpoint):
    """The agent's shell lists processes and reads every environment in /proc, reads the task's
    answer rule through the checkout's git history, lists the harness's home, and tries to reach
    the site, Kernel's API, an outside address and a live proxy route without its key: its PID
    namespace holds only its own processes, the checkout and the home are absent, and nothing
    answers but a 404 from the proxy (its one exit)."""
    monkeypatch.setenv("WEBBENCH_HOSTILE_SENTINEL", "sentinel-in-the-harness-env-58e0")
    result, exp = run_cli(pytester, monkeypatch, endpoint, "codex", "webbench-script-hostile", "shop-price and control", "hostile")
    result.assert_outcomes(passed=1)
    [record] = read_trial_records(exp)[0]
    trajectory = (exp / record.harbor_trial_dir / "agent" / "trajectory.json").read_text()
    assert "PROCESSES" in trajectory and "END" in trajectory  # the command ran to its end
    assert "sentinel-in-the-harness-env-58e0" not in trajectory  # no harness process's environment is readable
    assert "equals = 17.49" not in trajectory and "metadata.webbench" not in trajectory  # no answer rule via git
    listing = trajectory.split("HOME\\n", 1)[1].split("NET", 1)[0]  # `ls -a` of the harness user's home
    assert ".pyenv" not in listing and ".cache" not in listing, listing  # absent from the agent's filesystem
    net = trajectory.split("NET\\n", 1)[1].split("END", 1)[0]
    assert "Failed to connect" in net and "Could not resolve host: api.onkernel.com" in net, net  # site, Kernel
    assert "<html" not in net.lower() and "Shoply" not in net  # nothing of the site came back
    assert "ROUTE http://127.0.0.1:" in net and "no such trial route" in net, net  # a live route, wrong key: 404


@pytest.mark.cli("codex")
@pytest.mark.parametrize("arm", ["control", "treatment", "playwright"])
def test_a_hostile_agent_breaks_no_wall_in_any_arm(arm, pytester, monkeypatch, tmp_path):
    """The scripted hostile model drives the real Codex CLI (ScriptedModel.breakout): it plants
    links where the harness copies from and writes to, forges a rollout that sorts last, spends its
    token on other gateway paths and models, and leaves Node's vm from its browser code for the
    host's process to read the task's answer rule (and file: URLs for the same), then answers with
    what it found. It must find nothing: the trial is not a pass, nothing of the harness or the
    answer rule is anywhere in the results, the harness's file outside is untouched, and the record
    and logs say what it tried."""
    sentinel = "sentinel-in-the-harness-env-0b4"
    monkeypatch.setenv("WEBBENCH_HOSTILE_SENTINEL", sentinel)
    canary = tmp_path / "harness" / "canary.txt"
    canary.parent.mkdir()
    canary.write_text("untouched")
    model = ModelEndpoint(LOCAL_WEB, canary=canary)
    loop = ServiceLoop()
    try:
        url = loop.serve(model.app, "scripted model endpoint")
        result, exp = run_cli(pytester, monkeypatch, (model, url), "codex", "webbench-script-breakout",
                              f"shop-price and {arm}", f"breakout-{arm}")
    finally:
        loop.close()
    result.assert_outcomes(failed=1)
    [record] = read_trial_records(exp)[0]
    assert record.outcome != "passed" and record.reward == 0, record
    for path in exp.rglob("*"):  # nothing of the harness's environment or the answer rule, anywhere
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert sentinel.encode() not in data and b"[metadata.webbench" not in data, path
    assert canary.read_text() == "untouched" and sorted(p.name for p in canary.parent.iterdir()) == ["canary.txt"]
    flags = "\n".join(record.flags)
    assert "/logs/agent/environ.txt: a symbolic link" in flags and "/logs/agent/task: a symbolic link" in flags
    # the forged rollout became the CLI's account: it is checked against the gateway's, which is the record
    assert "omits" in flags or "never asked for" in flags
    assert record.tokens.turns == 4 and record.answer == {"price": None}  # the record's turns: the gateway's
    from pytest_webbench.gateway.meter import read_model_log

    refused = [c for c in read_model_log(exp / record.harbor_trial_dir / "model-log.jsonl") if c.decision == "refused_request"]
    assert len(refused) == 7, [(c.path, c.detail) for c in refused]  # 5 paths, another model, background
    [call] = [c for c in read_call_log(exp / record.harbor_trial_dir / "proxy-log.jsonl").records if c.tool == "execute_playwright_code"]
    assert call.decision == "forwarded" and "ERR_BLOCKED_BY_ADMINISTRATOR" in call.result and "ENOENT" in call.result
@pytest.mark.cli("codex")
def test_codex_does_clawbench_local_write_tasks_graded_by_interception_and_the_judge(pytester, monkeypatch, endpoint):
    """The real Codex CLI against the scripted model on two of clawbench-local's writes: Shoply's
    checkout (graded by its body) and Wikipedium's sign-up (graded by the judge: by default the run's
    own model, at the run's own endpoint, on a gateway route of its own). Nothing reaches a site."""
    model, url = endpoint
    writes = pytester.path / "writes.jsonl"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted")
    monkeypatch.setenv("SITE_WRITES_LOG", str(writes))
    monkeypatch.setenv("SHOP_ORDERS_LOG", str(writes))
    judged_before = len(model.model.judged)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}",
        "--suite", str(LOCAL_WEB.parent / "clawbench-local"), "--runner", "codex", "--model", "openai/webbench-script",
        f"--model-base-url={url}/v1", "--allow-unpriced", "--experiment-id", "cw", "-k", "shop-checkout or wiki-signup")
    result.assert_outcomes(passed=6)
    records = {r.trial_id: r for r in read_trial_records(pytester.path / "results" / "cw")[0]}
    for trial_id, record in records.items():
        assert record.submissions == 1, trial_id
        # every intercepted request is judged (verify.py); strict: the fields read from the given file
        assert record.judge.model == "webbench-script" and record.judge.requests == 2
        assert record.judge.lenient.match and record.judge.strict.match, record.judge
        # the run ended at its submission, as ClawBench's does: the CLI's closing turn never came
        assert "ended at its first intercepted submission" in record.detail, record.detail
    assert len(model.model.judged) - judged_before == 12  # 6 trials x 2 rubrics
    assert not writes.exists() or writes.read_text() == ""
