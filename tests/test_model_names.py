"""Harbor's reading of the run's model name, made once by the controller (runners/model_names.py):
a process answering from the record builds each agent exactly as Harbor's own lookups would, and
never imports litellm for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_webbench.runners import RunnerSpec, UnknownRunner, check_preset, runner_spec
from pytest_webbench.runners.model_names import ModelNames, ModelNamesError, answer_from, harbor_version, resolve

PROBE = Path(__file__).parent / "support" / "harbor_model_probe.py"
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def probe(agent: str, model: str, logs: Path, record: ModelNames | None = None) -> dict:
    """What Harbor's agent makes of `model` in a fresh process (so litellm is not loaded already)."""
    args = [sys.executable, str(PROBE), agent, model, str(logs)] + ([record.model_dump_json()] if record else [])
    done = subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize(("agent", "model", "recorded", "answers"), [
    ("pytest_webbench.runners.cli:WebbenchCodex", "openai/gpt-5-codex", None, ("openai", "gpt-5-codex", True)),
    ("pytest_webbench.runners.cli:WebbenchClaude", "anthropic/claude-sonnet-4-5", None,
     ("anthropic", "claude-sonnet-4-5", True)),
    # litellm keeps the model's own slash after the provider, and does not know `google`
    ("pytest_webbench.runners.cli:WebbenchPi", "openrouter/openai/gpt-5", None, ("openrouter", "openai/gpt-5", True)),
    ("pytest_webbench.runners.cli:WebbenchPi", "google/gemini-2.5-pro", None, (None, "google/gemini-2.5-pro", False)),
    # a name the record does not hold goes to Harbor's own lookup (and so to litellm)
    ("pytest_webbench.runners.cli:WebbenchCodex", "openai/gpt-5-mini", "openai/gpt-5-codex", ("openai", "gpt-5-codex", True)),
])
def test_an_agent_built_from_the_record_is_the_agent_harbor_builds(agent, model, recorded, answers, tmp_path):
    record = resolve(recorded or model)
    assert record == ModelNames(model=recorded or model, provider=answers[0], model_id=answers[1],
                                litellm_provider=answers[2], harbor=harbor_version())
    from_record = probe(agent, model, tmp_path / "a", record)
    own = probe(agent, model, tmp_path / "b")
    assert own.pop("litellm_imported") is True  # Harbor's own lookup loads litellm: what the record saves
    assert from_record.pop("litellm_imported") is (recorded is not None)
    assert from_record == own


def test_a_record_from_another_harbor_or_a_lookup_that_hangs_is_refused():
    stale = ModelNames(model="openai/gpt-5", provider="openai", model_id="gpt-5", litellm_provider=True, harbor="0.0.1")
    with pytest.raises(ModelNamesError, match="resolved by Harbor 0.0.1"):
        answer_from(stale)  # refused before anything of Harbor is changed
    with pytest.raises(ModelNamesError, match="openai/gpt-5: Harbor's provider lookup took over"):
        resolve("openai/gpt-5", timeout=0.05)


def test_a_lookup_that_fails_or_answers_something_else_stops_the_run_with_what_it_said(monkeypatch):
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(ModelNamesError, match=r"openai/gpt-5: Harbor's provider lookup failed \(exit 1\)"):
        resolve("openai/gpt-5")
    monkeypatch.setattr(sys, "executable", "/bin/echo")  # exits 0 having printed its arguments
    with pytest.raises(ModelNamesError, match="answered '-m pytest_webbench.runners.model_names openai/gpt-5', not its record"):
        resolve("openai/gpt-5")


def test_a_pinned_cli_without_the_gateway_is_refused():
    """Its calls would be neither metered nor priced: the CLI agents leave pricing to the gateway."""
    codex = runner_spec("codex")
    without = RunnerSpec.model_validate({**codex.model_dump(), "name": "mine", "model_api": {}})
    with pytest.raises(UnknownRunner, match=r"--runner mine: WebbenchCodex runs only through the model gateway.*\[model_api\]"):
        check_preset(without, None, require_cli=False)
    assert check_preset(codex, None, require_cli=False) is codex
