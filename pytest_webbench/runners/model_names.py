"""Harbor's reading of the run's model name, made once per run instead of in every process.

Harbor's agents ask litellm which provider a `provider/model` name belongs to
(`agent_auth_resolution.parse_model_name`, `_is_litellm_provider`), a dozen times a trial. The
answer depends on the name alone, but importing litellm to give it costs each process that asks
about 4.7 CPU seconds: at `-n 16`, a quarter of a 162-trial run (docs/performance.md). So the
controller asks once, in a child process, with Harbor's own functions (`python -m
pytest_webbench.runners.model_names MODEL`), and every process that runs trials answers for the
run's model from that record: any other name, or a parse Harbor is told to skip, still goes to
Harbor's own functions.
"""

from __future__ import annotations

import json
import subprocess
import sys

from pydantic import BaseModel, ConfigDict, ValidationError

AUTH_MODULE = "harbor.agents.agent_auth_resolution"
RESOLVED = ("parse_model_name", "_is_litellm_provider")  # Harbor's functions that import litellm


class ModelNamesError(RuntimeError):
    pass


class ModelNames(BaseModel):
    """What Harbor's functions answered for one model name (the child's one line of output)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    provider: str | None  # parse_model_name's provider (None: litellm does not know the name)
    model_id: str  # parse_model_name's model ID
    litellm_provider: bool  # _is_litellm_provider(provider)
    harbor: str  # the Harbor version that answered: a process with another refuses the record


def harbor_version() -> str:
    from importlib.metadata import version

    return version("harbor")


def resolve(model: str, timeout: float = 120.0) -> ModelNames:
    """Harbor's answers for `model`, from a child process (litellm stays out of this one)."""
    try:
        done = subprocess.run([sys.executable, "-m", __name__, model], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ModelNamesError(f"--model {model}: Harbor's provider lookup took over {timeout:.0f} s") from None
    if done.returncode != 0:
        raise ModelNamesError(f"--model {model}: Harbor's provider lookup failed (exit {done.returncode}): "
                              f"{done.stderr.strip()[-500:]}")
    try:
        return ModelNames.model_validate_json((done.stdout.strip().splitlines() or [""])[-1])
    except ValidationError as exc:
        raise ModelNamesError(f"--model {model}: Harbor's provider lookup answered {done.stdout.strip()[-300:]!r}, "
                              f"not its record ({exc.errors()[0]['msg']})") from None


def answer_from(names: ModelNames) -> None:
    """From now on in this process, Harbor's provider lookups for `names.model` are answered from
    the record. Harbor's modules bind the functions by name (`from ... import parse_model_name`), so
    each loaded module's binding is replaced; modules loaded later import the replacement."""
    import importlib

    if names.harbor != harbor_version():
        raise ModelNamesError(f"the model names were resolved by Harbor {names.harbor}, this process has "
                              f"{harbor_version()}")
    auth = importlib.import_module(AUTH_MODULE)
    originals = {name: getattr(auth, name) for name in RESOLVED}
    originals = {name: getattr(fn, "__wrapped_harbor__", fn) for name, fn in originals.items()}  # installed before
    parse, is_litellm = originals["parse_model_name"], originals["_is_litellm_provider"]

    def parse_model_name(model_name: str, *, skip_model_parsing: bool = False) -> tuple[str | None, str]:
        if model_name == names.model and not skip_model_parsing:
            return names.provider, names.model_id
        return parse(model_name, skip_model_parsing=skip_model_parsing)

    def _is_litellm_provider(provider: str | None) -> bool:
        if provider == names.provider:
            return names.litellm_provider
        return is_litellm(provider)

    replacements = {"parse_model_name": parse_model_name, "_is_litellm_provider": _is_litellm_provider}
    for name, fn in replacements.items():
        fn.__wrapped_harbor__ = originals[name]
    for module_name, module in list(sys.modules.items()):
        if module_name != "harbor" and not module_name.startswith("harbor."):
            continue
        for name, fn in replacements.items():
            bound = getattr(module, name, None)
            if bound is not None and getattr(bound, "__wrapped_harbor__", bound) is originals[name]:
                setattr(module, name, fn)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m pytest_webbench.runners.model_names PROVIDER/MODEL", file=sys.stderr)
        return 2
    from harbor.agents.agent_auth_resolution import _is_litellm_provider, parse_model_name

    provider, model_id = parse_model_name(argv[0])
    names = ModelNames(model=argv[0], provider=provider, model_id=model_id,
                       litellm_provider=_is_litellm_provider(provider), harbor=harbor_version())
    print(json.dumps(names.model_dump()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
