"""Runner presets: data files, checked before any trial starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_webbench.runners import RunnerSpec, UnknownRunner, check_preset, load_presets, runner_spec
from pytest_webbench.runners.install import cli_problem

LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"


def test_every_preset_is_valid_data_with_a_pinned_cli_where_it_runs_one():
    presets = load_presets()
    assert set(presets) >= {"reference", "nop", "codex", "claude", "pi"}
    for name in ("codex", "claude", "pi"):
        pin = presets[name].cli
        assert pin is not None and pin.version.count(".") == 2 and not pin.version.startswith(("^", "~"))


@pytest.mark.parametrize("name", sorted(load_presets()))
def test_every_bundled_preset_s_agent_loads_and_takes_its_options(name):
    """Planning does not load a bundled preset's Harbor class (check_runner): this is its check."""
    preset = runner_spec(name)
    assert check_preset(preset, None, require_cli=False) is preset
    agent_module, _, agent_class = preset.agent.partition(":")
    import sys

    assert isinstance(getattr(sys.modules[agent_module], agent_class), type)


def test_planning_a_bundled_preset_leaves_its_harbor_class_for_the_first_trial_and_a_preset_file_s_is_loaded(tmp_path):
    import subprocess
    import sys

    preset = tmp_path / "mine.toml"
    preset.write_text('name = "mine"\nagent = "pytest_webbench.runners.nop:NopAgent"\n')
    probe = ("import sys; from pytest_webbench.runners import check_runner; check_runner(sys.argv[1], None, require_cli=False); "
             "print('pytest_webbench.runners.nop' in sys.modules, 'harbor.agents.base' in sys.modules)")
    loaded = [subprocess.run([sys.executable, "-c", probe, name], capture_output=True, text=True, check=True).stdout.split()
              for name in ("nop", str(preset))]
    assert loaded == [["False", "False"], ["True", "True"]]


def test_unknown_runner_and_unsuitable_models_are_refused():
    with pytest.raises(UnknownRunner, match="choose from .*claude.*codex"):
        runner_spec("gpt-agent")
    codex = runner_spec("codex")
    assert codex.check_model(None) == codex.default_model
    assert codex.check_model("openai/some-model") == "openai/some-model"
    with pytest.raises(UnknownRunner, match="cannot take --model 'anthropic/claude-x'"):
        codex.check_model("anthropic/claude-x")
    with pytest.raises(UnknownRunner, match="provider anthropic"):
        runner_spec("claude").check_model("claude-without-provider")


def test_every_provider_a_preset_takes_is_one_the_gateway_speaks_in_the_preset_s_api():
    """Else a model the preset accepts is refused later, when the gateway is checked."""
    from pytest_webbench.gateway.providers import PROVIDERS

    for preset in load_presets().values():
        if preset.uses_gateway:
            assert set(preset.model_providers) <= set(PROVIDERS), preset.name
            assert set(preset.model_providers) <= set(preset.model_api), preset.name
    with pytest.raises(UnknownRunner, match="--runner pi cannot take --model 'google/gemini-2.5-pro'"):
        runner_spec("pi").check_model("google/gemini-2.5-pro")


def test_options_the_pinned_harbor_agent_does_not_take_are_refused():
    codex = runner_spec("codex")
    bad = RunnerSpec.model_validate({**codex.model_dump(), "options": {"reasoning_effort": "medium", "temperature": 0.3}})
    with pytest.raises(UnknownRunner, match="does not accept these options.*temperature"):
        check_preset(bad, None)
    claude = runner_spec("claude")
    wrong_type = RunnerSpec.model_validate({**claude.model_dump(), "options": {"max_turns": "many"}})
    with pytest.raises(UnknownRunner, match="max_turns"):
        check_preset(wrong_type, None)


@pytest.mark.parametrize("agent", ["no.such.module:Agent", "pytest_webbench.runners:NoSuchClass", "pytest_webbench.runners",
                                   "pytest_webbench.runners:check_preset"])
def test_a_preset_whose_agent_cannot_be_loaded_is_a_clear_refusal(agent):
    """A preset of the user's own naming an agent that is not there crashed the session (found by a
    review of bad inputs)."""
    nop = runner_spec("nop")
    bad = RunnerSpec.model_validate({**nop.model_dump(), "agent": agent})
    with pytest.raises(UnknownRunner, match=rf"--runner nop: agent '{agent}': (cannot be loaded|give MODULE:CLASS)"):
        check_preset(bad, None)


def test_a_missing_cli_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("WEBBENCH_NPM_PREFIX", str(tmp_path))
    problem = cli_problem(runner_spec("codex").cli)
    assert "@openai/codex@0.171.0 is not installed" in problem and "python -m pytest_webbench.runners.install" in problem
    with pytest.raises(UnknownRunner, match="is not installed"):
        check_preset(runner_spec("codex"), None)


def test_a_bad_model_stops_the_run_before_any_trial(pytester):
    result = pytester.runpytest_subprocess("--suite", str(LOCAL_WEB), "--runner", "codex", "--model", "anthropic/x",
                                           f"--results-dir={pytester.path / 'r'}")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--runner codex cannot take --model 'anthropic/x'*"])
    assert not (pytester.path / "r").exists() or not any((pytester.path / "r").iterdir())


@pytest.mark.parametrize("think_sec", [-1, True, "3", 601, float("nan"), float("inf")])
def test_the_reference_runner_s_wait_is_a_number_of_seconds_from_0_to_600(tmp_path, think_sec):
    from pytest_webbench.runners.reference import ReferenceAgent

    args = dict(logs_dir=tmp_path, task_dir=str(tmp_path), arm="control", browser_session_id="s", start_url="http://127.0.0.1:1/")
    assert ReferenceAgent(**args, think_sec=2.5).think_sec == 2.5
    with pytest.raises(ValueError, match="think_sec"):
        ReferenceAgent(**args, think_sec=think_sec)


def test_a_preset_s_bad_wait_is_refused_at_planning(tmp_path):
    preset = tmp_path / "thinking.toml"
    preset.write_text('name = "thinking"\nagent = "pytest_webbench.runners.reference:ReferenceAgent"\n'
                      'takes_trial_context = true\n[options]\nthink_sec = 601\n')
    with pytest.raises(UnknownRunner, match=r"--runner thinking: think_sec: 601 is not a number of seconds from 0 to 600"):
        check_preset(runner_spec(str(preset)), None)
    good = tmp_path / "thinking-3.toml"
    good.write_text(preset.read_text().replace("601", "3"))
    assert check_preset(runner_spec(str(good)), None).options == {"think_sec": 3}
