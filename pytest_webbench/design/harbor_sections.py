"""What the Harbor sections of a task file may hold, beyond what Harbor's own model checks.

Harbor's `TaskConfig` ignores keys it does not know and takes any number for a limit, so a typo
(`timout_sec`) would silently leave the default, and a timeout of 0, an infinite one or a negative
resource would load and then fail every trial as if the agent had (or leave a manifest JSON cannot
hold). Each is a problem here, named by its field.
"""

from __future__ import annotations

import functools
import math
import typing
from typing import Any

from pydantic import BaseModel

# deprecated keys Harbor's own validators still take and map onto current fields ("" is the top level)
HARBOR_LEGACY_KEYS = {"": {"version"}, "environment": {"allow_internet", "memory", "storage"}}
LIMIT_SECTIONS = ("agent", "verifier", "environment")


@functools.cache  # per model, not per task file: a suite of 1,000 tasks reads these 1,000 times
def _names(model: type[BaseModel]) -> frozenset[str]:
    return frozenset(model.model_fields) | {info.alias for info in model.model_fields.values() if info.alias}


@functools.cache
def _sections(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The fields of `model` that are models of their own (Harbor's [agent], [environment], ...)."""
    out = {}
    for key, info in model.model_fields.items():
        for candidate in (info.annotation, *typing.get_args(info.annotation)):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                out[key] = candidate
                break
    return out


def unknown_key(raw: dict, model: type[BaseModel]) -> tuple[str, str] | None:
    """The first key of the file as written (top level, or in a section that is a model of its own)
    that Harbor's model does not have: (field, message)."""
    for key, value in raw.items():
        if key not in _names(model) and key not in HARBOR_LEGACY_KEYS[""]:
            return key, f"not a field of Harbor's task.toml ({', '.join(sorted(_names(model)))}): a typo would leave the default"
        if (section := _sections(model).get(key)) is None or not isinstance(value, dict):
            continue
        if stray := sorted(set(value) - _names(section) - HARBOR_LEGACY_KEYS.get(key, set())):
            return f"{key}.{stray[0]}", f"not a field of Harbor's [{key}] ({', '.join(sorted(_names(section)))}): a typo would leave the default"
    return None


def bad_limit(harbor_config) -> tuple[str, str] | None:
    """The first limit no trial could run under: (field, message)."""
    for section in LIMIT_SECTIONS:
        for key, value in getattr(harbor_config, section).model_dump().items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            if not math.isfinite(value):  # the manifest could not hold it (JSON has no inf or nan)
                return f"{section}.{key}", f"{value}: must be a finite number"
            if key.endswith("timeout_sec") and value <= 0:
                return f"{section}.{key}", f"{value}: a timeout must be above 0 seconds"
            if key in ("cpus", "memory_mb", "storage_mb", "gpus") and value < 0:
                return f"{section}.{key}", f"{value}: must not be negative"
    return None
