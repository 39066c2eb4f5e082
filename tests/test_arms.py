"""Control and treatment differ only in the injected tools: the same instructions, model, agent
options, environment, limits and browser settings reach Harbor for both."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_webbench.design.arms import ARM_POLICIES, arm_instructions
from pytest_webbench.planning.options import RunOptions
from pytest_webbench.design.pairing import TrialKey
from pytest_webbench.runners import runner_spec
from pytest_webbench.design.suite import TrialSpec, load_suite
from pytest_webbench.trial.harbor_run import harbor_trial_config

LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"


def test_control_and_treatment_are_told_the_same_byte_for_byte():
    control = arm_instructions("control", "S-1", "http://shop.localhost:1/")
    assert control == arm_instructions("treatment", "S-1", "http://shop.localhost:1/")
    assert "S-1" in control and "http://shop.localhost:1/" in control
    assert arm_instructions("playwright", "S-1", "http://shop.localhost:1/") != control  # its bans are its own


@pytest.mark.parametrize("runner", ["reference", "codex", "claude", "pi"])
def test_what_harbor_receives_differs_between_the_pair_only_in_names(runner, tmp_path):
    suite = load_suite(LOCAL_WEB)
    task = suite.task("shop-price")
    options = RunOptions(suite=str(LOCAL_WEB), runner=runner, experiment_id="exp", results_dir=tmp_path)
    dumps = {}
    for arm in ("control", "treatment"):
        spec = TrialSpec(TrialKey("shop-price", 1, arm), task, 1)
        session = f"exp-{spec.trial_id}"
        browser = SimpleNamespace(session_id=session, start_url="http://shop.localhost:1/")
        proxy = SimpleNamespace(url=f"http://127.0.0.1:2/trials/{spec.trial_id}/mcp")
        # a real agent's model requests go through its trial's gateway route, with its own token
        gateway = SimpleNamespace(url=f"http://127.0.0.1:2/gateway/{spec.trial_id}", token=f"wbt-token-of-{arm}",
                                  key_variable="OPENAI_API_KEY") if runner_spec(runner).cli else None
        config = harbor_trial_config(options, runner_spec(runner), spec, browser, proxy, tmp_path / "exp", gateway)
        if gateway is not None:  # each trial has its own token (Harbor masks it when it writes the config)
            assert config.agent.env["OPENAI_API_KEY"] == gateway.token
            config.agent.env["OPENAI_API_KEY"] = "TOKEN"
        text = config.model_dump_json()
        # the only differences allowed: the trial's own name, session id and folder (all carry the arm)
        dumps[arm] = json.loads(text.replace(spec.trial_id, "TRIAL").replace(f"/jobs/{arm}", "/jobs/ARM"))
        if runner_spec(runner).takes_trial_context:  # the reference runner replays its arm's solution: it is
            assert dumps[arm]["agent"]["kwargs"].pop("arm") == arm  # told the arm; no agent under test ever is
    assert dumps["control"] == dumps["treatment"]
    policies = {arm: ARM_POLICIES[arm].model_dump(exclude={"name", "inject_tool_batch"}) for arm in ("control", "treatment")}
    assert policies["control"] == policies["treatment"]  # the same tools and WebMCP actions; only the batch differs
