"""What Harbor's agent makes of a model name, as a trial builds it (Harbor's agent factory), printed
as one JSON line with whether litellm was imported: `python harbor_model_probe.py AGENT MODEL
LOGS_DIR [RECORD_JSON]`, the record (runners/model_names.py) answered from when given."""

import json
import sys
from pathlib import Path

import_path, model, logs_dir, *record = sys.argv[1:]
if record:
    from pytest_webbench.runners.model_names import ModelNames, answer_from

    answer_from(ModelNames.model_validate_json(record[0]))
from harbor.agents.factory import AgentFactory
from harbor.models.trial.config import AgentConfig

url = "http://127.0.0.1:9/v1"
config = AgentConfig(import_path=import_path, model_name=model, base_url=url,
                     env={"OPENAI_API_KEY": "sk-probe", "ANTHROPIC_API_KEY": "sk-ant-probe", "GEMINI_API_KEY": "probe"})
agent = AgentFactory.create_agent_from_config(config, logs_dir=Path(logs_dir))


def answer(read):
    """What one of Harbor's readings gives, or the error it raises (a refusal is an answer too)."""
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return f"{type(exc).__name__}: {exc}"


out = {
    "parsed": [agent._parsed_model_provider, agent._parsed_model_name],
    "info": answer(lambda: agent.to_agent_info().model_dump(mode="json")),
    "connection": answer(lambda: repr(agent.model_connection)),
    "extra_env": answer(lambda: agent.extra_env),
    "resolved": answer(agent._resolved_model_name) if hasattr(agent, "_resolved_model_name") else None,
    "config": answer(lambda: agent._build_effective_config(url)) if hasattr(agent, "_build_effective_config") else None,
}
out["litellm_imported"] = "litellm" in sys.modules
print(json.dumps(out, default=str))
