"""Trial ids, pairs, and the balanced order of each control/treatment pair.

The order is a pure function of the run ID, so every xdist worker computes the same one and a
resumed run keeps it.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

# The arms run as matched pairs (the playwright arm runs alone). Here, not in arms.py, so that the
# plugin can order trials without importing pydantic (see benchmarks/import_cost.py).
PAIRED_ARMS = ("control", "treatment")
_CONTROL_SECOND = tuple(reversed(PAIRED_ARMS))

TRIAL_ID = re.compile(r"^(?P<task>[a-z0-9-]+?)-a(?P<attempt>\d+)-(?P<arm>control|treatment|playwright)$")


@dataclass(frozen=True)
class TrialKey:
    task: str
    attempt: int
    arm: str

    # made once: collection, ordering and the manifest ask each key's IDs ~10 times
    @cached_property
    def trial_id(self) -> str:
        return f"{self.task}-a{self.attempt}-{self.arm}"

    @cached_property
    def pair_id(self) -> str | None:
        return f"{self.task}-a{self.attempt}" if self.arm in PAIRED_ARMS else None

    @classmethod
    def parse(cls, trial_id: str) -> TrialKey:
        m = TRIAL_ID.match(trial_id)
        if not m:
            raise ValueError(f"not a trial id: {trial_id!r}")
        return cls(m["task"], int(m["attempt"]), m["arm"])


@lru_cache(maxsize=4096)  # asked once per trial by collection, ordering and the manifest
def control_first_attempts(run_id: str, task: str, attempts: int) -> frozenset[int]:
    """Which attempts run control first: half of them (rounded by a coin), chosen by the run ID."""
    rng = random.Random(int.from_bytes(hashlib.sha256(f"{run_id}/{task}".encode()).digest()[:8], "big"))
    count = attempts // 2 + (rng.random() < 0.5 if attempts % 2 else 0)
    return frozenset(rng.sample(range(1, attempts + 1), count))


def order_trials(keys: list[TrialKey], run_id: str, paired: bool = True, attempts: int | None = None) -> list[TrialKey]:
    """Puts each pair back to back in its balanced order, at the place of its first member.

    `attempts` is the run's --attempts, which fixes each pair's order (as `pair_position` records
    it) even when -k, a shard or --resume leaves some attempts out; without it, the highest present.
    Unpaired runs and the playwright arm keep the order they came in.
    """
    if not paired:
        return list(keys)
    # slots, not TrialKeys made for each member: ~25 ms of collecting 10,000 trials
    present = {(k.task, k.attempt, k.arm): k for k in keys}
    attempts_by_task: dict[str, int] = {}
    if not attempts:  # None (or a hand-made 0): the highest present, per task
        for k in keys:
            attempts_by_task[k.task] = max(attempts_by_task.get(k.task, 0), k.attempt)
    ordered: list[TrialKey] = []
    done: set[tuple[str, int, str]] = set()
    for k in keys:
        if (k.task, k.attempt, k.arm) in done:
            continue
        if k.arm not in PAIRED_ARMS:
            ordered.append(k)
            done.add((k.task, k.attempt, k.arm))
            continue
        first = control_first_attempts(run_id, k.task, attempts or attempts_by_task[k.task])
        for arm in PAIRED_ARMS if k.attempt in first else _CONTROL_SECOND:
            slot = (k.task, k.attempt, arm)
            if slot in present and slot not in done:
                ordered.append(present[slot])
                done.add(slot)
    return ordered


def broken_pairs(keys: list[TrialKey], lone_tasks=frozenset()) -> list[str]:
    """Pairs with only one member selected (e.g. by -k): reported, never run as half a pair silently.
    A task in `lone_tasks` has no pairs (its own arms lack one of the two)."""
    members: dict[str, set[str]] = {}
    for k in keys:
        if k.pair_id and k.task not in lone_tasks:
            members.setdefault(k.pair_id, set()).add(k.arm)
    return sorted(pid for pid, arms in members.items() if len(arms) == 1)


def pair_position(key: TrialKey, run_id: str, attempts: int) -> int | None:
    """1 if this arm ran first in its pair, 2 if second; None outside pairs."""
    if key.pair_id is None:
        return None
    control_first = key.attempt in control_first_attempts(run_id, key.task, attempts)
    return 1 if (key.arm == "control") == control_first else 2


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` (1 <= I <= N) as given to --shard."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: give I/N, e.g. 1/4") from None
    if not 1 <= index <= count:
        raise ValueError(f"--shard {text!r}: I must be between 1 and N")
    return index, count


def shard_trials(ordered: list[TrialKey], index: int, count: int) -> list[TrialKey]:
    """Shard `index` of `count`: whole pairs and lone trials dealt round-robin in run order, so a
    pair is never split across machines and each shard gets a share of every task."""
    units: list[list[TrialKey]] = []
    for key in ordered:
        if units and key.pair_id is not None and units[-1][0].pair_id == key.pair_id:
            units[-1].append(key)
        else:
            units.append([key])
    return [key for n, unit in enumerate(units) if n % count == index - 1 for key in unit]
