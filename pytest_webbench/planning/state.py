"""What the plugin knows of a run in one process, kept in the config's stash.

Its own small module so the plugin can look for it without importing the trial machinery: a
pytest run without --suite loads nothing heavy (benchmarks/import_cost.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..design.pairing import TrialKey

if TYPE_CHECKING:
    from .options import RunOptions
    from ..design.suite import TrialSpec

STATE_KEY = pytest.StashKey["WebbenchState"]()
# The item this process runs after this one (None: the last), for a browser made ready ahead.
NEXT_ITEM_KEY = pytest.StashKey["pytest.Item | None"]()
# The trial an item runs, set where the plugin makes the item (plugin.pytest_pycollect_makeitem).
TRIAL_KEY = pytest.StashKey[TrialKey]()


class WebbenchState:
    def __init__(self, options: RunOptions, suite, experiment_dir: Path):
        self.options, self.suite, self.experiment_dir = options, suite, experiment_dir
        self.specs: dict[str, TrialSpec] = {}
        self.report = None  # the controller's Report, once written
        self.published = None  # the Braintrust experiments, or why publishing failed
        self.reviewed = None  # review/records.py ReviewRun: what --review read and cost, once done
        self.skip: set[str] = set()  # --resume: trials that already have a result
        self.planned: set[str] | None = None  # --resume: the trials of the run's plan (None: a new plan)
        self.whole_plan: list[str] | None = None  # --shard: every shard's trial IDs in run order (manifest.plan)
        self.skipped_pairs: set[str] = set()  # --sequential: pairs this process did not start (their task was decided)
        self.lock_fd: int | None = None  # the experiment's run.lock, held by the controller while it runs
        self.judge = None  # grading/judge.py's JudgeSetup: the judge of write tasks whose check does not decide (None: none)
        self.review = None  # review/reviewer.py's ReviewSetup, with --review (None: no review)
        self.model_names = None  # runners/model_names.py's ModelNames: Harbor's provider lookup for the run's model


def state(config: pytest.Config) -> WebbenchState:
    return config.stash[STATE_KEY]


def next_trial(item: pytest.Item) -> TrialSpec | None:
    """The trial this process runs next, where pytest knows it (xdist's workers do too)."""
    after = item.stash.get(NEXT_ITEM_KEY, None)
    key = item_key(after) if after is not None else None
    return state(item.config).specs.get(key.trial_id) if key is not None else None


def item_key(item: pytest.Item) -> TrialKey | None:
    """The trial an item runs (None for an item that is not a trial)."""
    return item.stash.get(TRIAL_KEY, None)
