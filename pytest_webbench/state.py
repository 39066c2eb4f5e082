"""What the plugin knows of a run in one process, kept in the config's stash.

Its own small module so the plugin can look for it without importing the trial machinery: a
pytest run without --suite loads nothing heavy (benchmarks/import_cost.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .options import RunOptions
    from .suite import TrialSpec

STATE_KEY = pytest.StashKey["WebbenchState"]()


class WebbenchState:
    def __init__(self, options: RunOptions, suite, experiment_dir: Path):
        self.options, self.suite, self.experiment_dir = options, suite, experiment_dir
        self.specs: dict[str, TrialSpec] = {}
        self.report = None  # the controller's Report, once written
        self.published = None  # the Braintrust experiments, or why publishing failed
        self.skip: set[str] = set()  # --resume: trials that already have a result


def state(config: pytest.Config) -> WebbenchState:
    return config.stash[STATE_KEY]
