"""Where agents run: this machine (HostEnvironment), or a Harbor sandbox type passed through
(--environment docker|daytona|modal) that reaches the proxy at --proxy-url. Offline, the
configuration Harbor receives is checked with Harbor's own models and factory."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_webbench.design.pairing import TrialKey
from pytest_webbench.trial.services import RunOptions
from pytest_webbench.runners import runner_spec
from pytest_webbench.design.suite import load_suite
from pytest_webbench.design.suite import TrialSpec
from pytest_webbench.trial.browser_session import BrowserSessionHandle
from pytest_webbench.trial.harbor_run import harbor_trial_config
from pytest_webbench.trial.proxy_route import ProxyHandle

ROOT = Path(__file__).resolve().parents[1]
LOCAL_WEB = ROOT / "suites" / "local-web"
PUBLIC_URL = "https://proxy.example.test:8765"


def config_for(environment: str, runner: str, tmp_path: Path):
    suite = load_suite(LOCAL_WEB)
    task = next(t for t in suite.tasks if t.name == "shop-price")
    spec = TrialSpec(TrialKey("shop-price", 1, "treatment"), task, 1)
    options = RunOptions(suite="local-web", runner=runner, experiment_id="env", results_dir=tmp_path / "results",
                         environment=environment, proxy_url=PUBLIC_URL if environment != "host" else None)
    browser = BrowserSessionHandle("env-shop-price-a1-treatment", "http://shop.localhost:1234/", services=None)
    proxy = ProxyHandle(f"{PUBLIC_URL}/trials/shop-price-a1-treatment/mcp", session=None, log_path=tmp_path / "log.jsonl")
    return harbor_trial_config(options, runner_spec(runner), spec, browser, proxy, tmp_path / "results" / "env")


@pytest.mark.parametrize("environment", ["docker", "daytona", "modal"])
@pytest.mark.parametrize("runner", ["codex", "reference"])
def test_a_sandbox_gets_harbor_s_environment_type_and_the_proxy_s_public_url(environment, runner, tmp_path):
    from harbor.environments.factory import EnvironmentFactory
    import tomllib

    from harbor.models.task.config import TaskConfig as HarborTaskConfig
    from harbor.models.trial.config import TrialConfig

    config = config_for(environment, runner, tmp_path)
    assert config.environment.type.value == environment and config.environment.import_path is None
    assert config.environment.kwargs == {}  # nothing of this machine's paths goes into a sandbox
    EnvironmentFactory.validate_options(config.environment)  # Harbor's own check of what it will build
    [server] = config.agent.mcp_servers
    assert (server.transport, server.url) == ("streamable-http", f"{PUBLIC_URL}/trials/shop-price-a1-treatment/mcp")
    assert "PATH" not in config.agent.env  # the host's npm folder means nothing in a sandbox
    assert [(a.source, a.destination) for a in config.artifacts] == [("/app/answer.json", "answer.json")]
    assert TrialConfig.model_validate_json(config.model_dump_json()) == config  # as a Harbor job file holds it
    task_toml = tomllib.loads((config.task.path / "task.toml").read_text())
    task_env = HarborTaskConfig.model_validate(task_toml).environment  # the image Harbor starts for the agent
    assert task_env.docker_image == "node:22-bookworm" and task_env.workdir == "/app"
    if runner == "reference":
        assert config.agent.kwargs["browser_session_id"] == "env-shop-price-a1-treatment"


@pytest.mark.parametrize("environment", ["docker", "daytona", "modal", "host"])
def test_by_harbor_s_own_network_plan_the_agent_reaches_only_the_proxy_s_host_while_it_works(environment, tmp_path):
    """The suites' tasks give the agent phase no network; the run adds the proxy's host. Harbor's
    own resolver turns that into the policy the sandbox enforces while the agent runs, and keeps
    the install before it on the sandbox's default (the npm registry)."""
    import tomllib

    from harbor.models.task.config import NetworkMode, NetworkPolicy, TaskConfig as HarborTaskConfig, VerifierEnvironmentMode
    from harbor.trial.network_policy import resolve_trial_network_plan

    config = config_for(environment, "codex", tmp_path)
    task = HarborTaskConfig.model_validate(tomllib.loads((config.task.path / "task.toml").read_text()))
    plan = resolve_trial_network_plan(task, config.agent, config.environment, config.verifier, None,
                                      verifier_mode=VerifierEnvironmentMode.SHARED)
    assert plan.agent_phase == NetworkPolicy(network_mode=NetworkMode.ALLOWLIST, allowed_hosts=["proxy.example.test"])
    assert plan.agent_env_baseline.network_mode == NetworkMode.PUBLIC and not plan.notices


def test_every_task_of_the_suites_gives_its_agent_no_network_of_its_own():
    for suite in ("local-web", "public-web"):
        for task in load_suite(ROOT / "suites" / suite).tasks:
            assert task.agent_network_mode == "no-network", task.path


def _suite_with_shop_price_network(pytester, network: str) -> tuple[Path, Path]:
    """A copy of local-web whose shop-price task has `network` in place of its no-network line."""
    import shutil

    suite = pytester.path / "suite"
    shutil.copytree(LOCAL_WEB, suite, ignore=shutil.ignore_patterns("__pycache__"))
    toml = suite / "tasks" / "shop-price" / "task.toml"
    toml.write_text(toml.read_text().replace('network_mode = "no-network"\n', network))
    return suite, toml


def test_a_task_that_gives_its_agent_network_of_its_own_is_refused_in_a_sandbox_unless_unsealed(pytester):
    from pytest_webbench.planning.manifest import _isolation

    suite, toml = _suite_with_shop_price_network(pytester, "")
    common = ("--suite", str(suite), "--runner", "codex", "--collect-only", f"--results-dir={pytester.path / 'r'}",
              "--environment", "docker", "--proxy-url", PUBLIC_URL)
    refused = pytester.runpytest_subprocess(*common)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{toml}: [agent] network_mode is public" in refused.stderr.str() and "--allow-unsealed" in refused.stderr.str()
    assert pytester.runpytest_subprocess(*common, "--allow-unsealed").ret == pytest.ExitCode.OK
    options = SimpleNamespace(environment="docker", runner="codex")
    assert _isolation(options, load_suite(suite).tasks) == "sandbox:docker+open"
    assert _isolation(options, load_suite(LOCAL_WEB).tasks) == "sandbox:docker"
    assert _isolation(SimpleNamespace(environment="docker", runner="reference"), load_suite(suite).tasks) == "sandbox:docker"
    # an allowlist of its own is network of its own too
    toml.write_text(toml.read_text().replace("[agent]\n", '[agent]\nnetwork_mode = "allowlist"\nallowed_hosts = ["shop.example.test"]\n'))
    refused = pytester.runpytest_subprocess(*common)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{toml}: [agent] network_mode is allowlist ['shop.example.test']" in refused.stderr.str()


def test_on_this_machine_a_proxy_url_must_name_the_loopback_a_sealed_agent_reaches(pytester):
    common = ("--suite", str(LOCAL_WEB), "--runner", "codex", "--collect-only", f"--results-dir={pytester.path / 'r'}")
    for refused_url in ("http://harness.example.test:{port}/", "http://[::1]:{port}/"):  # the seal forwards IPv4 only
        refused = pytester.runpytest_subprocess(*common, "--proxy-url", refused_url)
        assert refused.ret == pytest.ExitCode.USAGE_ERROR and "must name 127.0.0.1 or localhost" in refused.stderr.str()
    assert pytester.runpytest_subprocess(*common, "--proxy-url", "http://localhost:{port}/").ret == pytest.ExitCode.OK


def test_on_this_machine_a_task_s_allowlist_of_other_hosts_is_refused_before_any_trial(pytester):
    suite, toml = _suite_with_shop_price_network(pytester, 'network_mode = "allowlist"\nallowed_hosts = ["shop.example.test"]\n')
    refused = pytester.runpytest_subprocess("--suite", str(suite), "--runner", "codex", "--collect-only",
                                            f"--results-dir={pytester.path / 'r'}")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{toml}: [agent] network_mode is allowlist ['shop.example.test']: on this machine" in refused.stderr.str()


def test_on_this_machine_the_agent_s_one_exit_is_the_proxy_s_listener_and_it_sees_the_pinned_clis(tmp_path):
    config = config_for("host", "codex", tmp_path)
    assert config.environment.import_path == "pytest_webbench.environments.host:HostEnvironment"
    assert config.environment.kwargs["exit_ports"] == [int(PUBLIC_URL.rsplit(":", 1)[1])]
    from pytest_webbench.runners.install import npm_prefix

    assert config.environment.kwargs["visible_paths"] == [str(npm_prefix())]
    assert config.agent.env["PATH"].startswith(str(npm_prefix()))


def test_a_pinned_cli_installs_its_pin_inside_a_sandbox():
    """In a sandbox the pinned CLI comes from the npm registry at the same version; a failed install
    is one clear error naming the pin."""
    import asyncio

    from pytest_webbench.runners.cli import WebbenchCodex

    class Sandbox:  # Harbor's environment interface, as far as install uses it
        def __init__(self, code: int):
            self.code, self.commands = code, []

        async def exec(self, command, **kwargs):
            self.commands.append(command)
            return SimpleNamespace(return_code=self.code, stdout="", stderr="npm ERR! 404 Not Found")

    agent = WebbenchCodex.__new__(WebbenchCodex)
    ok = Sandbox(0)
    asyncio.run(agent.install(ok))
    pin = runner_spec("codex").cli
    assert ok.commands == [f"npm install --global --no-fund --no-audit {pin.package}@{pin.version}"]
    with pytest.raises(RuntimeError, match=rf"installing @openai/codex@{pin.version} in the sandbox failed \(exit 1\): npm ERR! 404"):
        asyncio.run(agent.install(Sandbox(1)))


@pytest.mark.parametrize("args, message", [
    (["--environment", "cloudy"], "--environment cloudy: not a Harbor environment type; choose host or one of"),
    (["--environment", "daytona"], "--environment daytona: agents in a sandbox cannot reach 127.0.0.1; give --proxy-url"),
    (["--proxy-listen", "0.0.0.0:http"], "--proxy-listen '0.0.0.0:http': give HOST:PORT"),
])
def test_bad_environment_options_are_one_clear_error(pytester, args, message):
    result = pytester.runpytest_subprocess("--suite", str(LOCAL_WEB), "--collect-only", f"--results-dir={pytester.path / 'r'}", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and message in result.stderr.str()


@pytest.mark.chromium
def test_agents_reach_the_proxy_at_the_url_they_are_given(pytester):
    """--proxy-url is what agents get (here the same listener by another name): the run passes, and
    Harbor's recorded trial config holds that URL."""
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(LOCAL_WEB),
        "--runner", "reference", "--experiment-id", "named", "-k", "shop-price and control",
        "--proxy-listen", "127.0.0.1:0", "--proxy-url", "http://localhost:{port}/")
    result.assert_outcomes(passed=1)
    trial = pytester.path / "results" / "named" / "jobs" / "control" / "shop-price-a1-control"
    recorded = json.loads((trial / "config.json").read_text())
    [server] = recorded["agent"]["mcp_servers"]
    assert server["url"].startswith("http://localhost:") and re.search(r"/trials/shop-price-a1-control/[\w-]{16,}/mcp$", server["url"])
    manifest = json.loads((pytester.path / "results" / "named" / "manifest.json").read_text())
    assert manifest["environment"] == "host"


@pytest.mark.chromium
def test_without_namespace_rights_a_real_agent_is_refused_unless_unsealed_runs_are_allowed(pytester, monkeypatch):
    """Isolation never switches off silently: on a machine where `unshare --mount` fails, a run with a
    real CLI stops before any trial; with --allow-unsealed it runs, and the manifest and report say so."""
    monkeypatch.setenv("WEBBENCH_UNSHARE", "/bin/false")  # stands for a machine without namespace rights
    common = ("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(LOCAL_WEB),
              "-k", "shop-price and control")
    refused = pytester.runpytest_subprocess(*common, "--runner", "codex", "--experiment-id", "refused")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "cannot seal agents" in refused.stderr.str() and "--allow-unsealed" in refused.stderr.str()
    assert not list((pytester.path / "results").glob("*/trials/*.json"))
    allowed = pytester.runpytest_subprocess(*common, "--runner", "reference", "--allow-unsealed", "--experiment-id", "open")
    allowed.assert_outcomes(passed=1)
    exp = pytester.path / "results" / "open"
    assert json.loads((exp / "manifest.json").read_text())["isolation"] == "none"
    assert "UNSEALED" in (exp / "report.md").read_text()


@pytest.mark.parametrize("environment", ["docker", "daytona", "modal"])
def test_a_sandboxed_agent_reaches_its_model_through_the_gateway_at_the_public_url_with_only_its_token(environment, tmp_path):
    """In a sandbox, as on the host, the agent's provider is its trial's gateway route (reached by the
    proxy's public URL: one listener serves both) and its key the trial's token; no real key goes in."""
    suite = load_suite(LOCAL_WEB)
    task = next(t for t in suite.tasks if t.name == "shop-price")
    spec = TrialSpec(TrialKey("shop-price", 1, "control"), task, 1)
    options = RunOptions(suite="local-web", runner="codex", experiment_id="env", results_dir=tmp_path / "results",
                         environment=environment, proxy_url=PUBLIC_URL)
    browser = BrowserSessionHandle("env-shop-price-a1-control", "http://shop.localhost:1234/", services=None)
    proxy = ProxyHandle(f"{PUBLIC_URL}/trials/shop-price-a1-control/mcp", session=None, log_path=tmp_path / "log.jsonl")
    gateway = SimpleNamespace(url=f"{PUBLIC_URL}/gateway/shop-price-a1-control", token="wbt-only-this-trial",
                              key_variable="OPENAI_API_KEY")
    config = harbor_trial_config(options, runner_spec("codex"), spec, browser, proxy, tmp_path / "results" / "env", gateway)
    assert config.agent.base_url == f"{PUBLIC_URL}/gateway/shop-price-a1-control"
    assert config.agent.env == {"OPENAI_API_KEY": "wbt-only-this-trial"}  # the token, and nothing of this machine's
