"""Sequential stopping per task: after each round of control/treatment pairs, continue, stop for an
effect, or stop for futility, with the type-I error held under this continuous monitoring.

The rule, per task, on the pairs run so far (n pairs, of which m are discordant and s of those
favour treatment):

* Effect: a two-sided exact test on the discordant pairs, monitored after every pair. Its boundary
  is the mixture e-value of the shared README, E_m = 2^m B(a + s, a + m - s) / B(a, a) with a
  Beta(a, a) prior (a = 0.5), but the threshold is not 1/alpha: because a task never runs more than
  `max_pairs` pairs (so never has more than `max_pairs` discordant ones), the chance that a fair-coin
  walk of up to `max_pairs` steps ever reaches E_m >= threshold is computed exactly, and the
  threshold is the smallest one keeping that chance <= alpha. Under "no difference" each
  discordant pair favours either arm with probability 1/2 whatever happened before, so the
  discordant walk is that fair-coin walk: the error rate holds whatever the round size, whenever
  the scheduler looks, and whatever else stops the task (checking less often, or stopping early
  for any reason, can only remove chances to cross). It is a group-sequential test with a look
  after every discordant pair; E_m >= 1/alpha (Ville) would be valid with no cap at all but needs
  about one more discordant pair.
* Futility (non-binding, so it cannot raise the error rate): stop when the predictive chance of
  reaching the effect boundary by `max_pairs` pairs is below `futility_below`. The prediction is the
  Dirichlet-multinomial (Polya urn) one from a Dirichlet(prior_concordant, prior_discordant,
  prior_discordant) prior on the (concordant, treatment-only, control-only) shares of pairs, so it
  stops tasks at the ceiling (pairs keep agreeing: few discordant pairs expected) and null tasks
  with many discordant pairs (the split stays near 50/50), and keeps tasks with a lopsided split.
  It also stops as soon as the boundary has become unreachable (curtailment). Not before
  `min_pairs_for_futility` pairs.
* At `max_pairs` without an effect the task stops ("futility").

Speed uses the same machinery on the pairs where both arms passed: treatment faster vs slower
(ties dropped), with the other pairs in the "concordant" cell.

Everything is a precomputed table over (pairs, discordant, treatment-only): `decide` is a lookup.
The operating characteristics of a rule (power, expected pairs) for given cell probabilities are
computed exactly by `operating_characteristics`; benchmarks/stats_calibration.py checks them by
simulation at the record level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from scipy.special import betaln

Decision = Literal["continue", "effect", "futility"]
_CODES: tuple[Decision, ...] = ("continue", "effect", "futility")


# -- the effect boundary ----------------------------------------------------------------------------------

def _log_e_value(s: np.ndarray | int, m: np.ndarray | int, a: float) -> np.ndarray:
    """log of the Beta(a, a)-mixture e-value of s treatment-favouring among m discordant pairs."""
    s, m = np.asarray(s, float), np.asarray(m, float)
    return m * math.log(2.0) + betaln(a + s, a + m - s) - betaln(a, a)


def _crossing_probability(majority_needed: np.ndarray, horizon: int) -> float:
    """Chance that a fair-coin walk of up to `horizon` steps ever has max(s, m - s) >= majority_needed[m]."""
    dist = np.zeros(horizon + 1)
    dist[0] = 1.0
    crossed = 0.0
    s = np.arange(horizon + 1)
    for m in range(1, horizon + 1):
        new = np.zeros(horizon + 1)
        new[1:m + 1] += 0.5 * dist[:m]
        new[:m] += 0.5 * dist[:m]
        reject = (s <= m) & (np.maximum(s, m - s) >= majority_needed[m])
        crossed += float(new[reject].sum())
        new[reject] = 0.0
        dist = new
    return crossed


def _majority_needed(log_threshold: float, horizon: int, a: float) -> np.ndarray:
    """For each m, the smallest majority k with E_m(k) >= threshold (E rises with the majority)."""
    needed = np.full(horizon + 1, horizon + 1, dtype=int)
    for m in range(1, horizon + 1):
        k = np.arange((m + 1) // 2, m + 1)
        ok = np.nonzero(_log_e_value(k, m, a) >= log_threshold - 1e-12)[0]
        if ok.size:
            needed[m] = int(k[ok[0]])
    return needed


@lru_cache(maxsize=64)
def _boundary(horizon: int, alpha: float, a: float) -> tuple[float, tuple[int, ...], float]:
    """(threshold, majority needed at each m, exact crossing probability): the smallest e-value
    threshold (among the values E can take) whose crossing probability is <= alpha."""
    candidates = sorted({round(float(_log_e_value(k, m, a)), 12)
                         for m in range(1, horizon + 1) for k in range((m + 1) // 2, m + 1)}, reverse=True)
    lo, hi = 0, len(candidates) - 1   # crossing rises as the threshold falls (index rises)
    best = None
    while lo <= hi:
        mid = (lo + hi) // 2
        needed = _majority_needed(candidates[mid], horizon, a)
        crossing = _crossing_probability(needed, horizon)
        if crossing <= alpha + 1e-12:
            best = (candidates[mid], needed, crossing)
            lo = mid + 1
        else:
            hi = mid - 1
    if best is None:  # nothing can be rejected within the horizon
        return math.inf, tuple([horizon + 1] * (horizon + 1)), 0.0
    log_threshold, needed, crossing = best
    return math.exp(log_threshold), tuple(int(x) for x in needed), crossing


# -- the futility side: Polya-urn predictive chance of reaching the boundary --------------------------------

@lru_cache(maxsize=64)
def _tables(horizon: int, alpha: float, a: float, prior: tuple[float, float, float], futility_below: float,
            min_pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """(decision codes D[n, m, s], predictive probability PP[n, m, s]) for n <= horizon."""
    _, needed_t, _ = _boundary(horizon, alpha, a)
    needed = np.asarray(needed_t)
    size = horizon + 1
    m = np.arange(size)[:, None]
    s = np.arange(size)[None, :]
    valid = s <= m
    reject = valid & (np.maximum(s, m - s) >= needed[m])
    a_conc, a_treat, a_ctrl = prior
    pp = np.zeros((size, size, size))
    pp[horizon] = np.where(reject, 1.0, 0.0)
    for n in range(horizon - 1, -1, -1):
        total = a_conc + a_treat + a_ctrl + n
        p_conc = (a_conc + n - m) / total
        p_treat = (a_treat + s) / total
        p_ctrl = (a_ctrl + m - s) / total
        nxt = pp[n + 1]
        to_treat = np.zeros_like(nxt)
        to_treat[:-1, :-1] = nxt[1:, 1:]
        to_ctrl = np.zeros_like(nxt)
        to_ctrl[:-1, :] = nxt[1:, :]
        value = np.where(reject, 1.0, p_conc * nxt + p_treat * to_treat + p_ctrl * to_ctrl)
        pp[n] = np.where(valid & (m <= n), value, 0.0)
    codes = np.zeros((size, size, size), dtype=np.int8)
    for n in range(size):
        d = np.zeros((size, size), dtype=np.int8)
        reachable = valid & (m <= n)
        futile = reachable & ((pp[n] <= 0.0) | ((pp[n] < futility_below) & (n >= min_pairs)))
        d[futile] = 2
        if n == horizon:
            d[reachable] = 2
        d[reject & reachable] = 1
        codes[n] = d
    return codes, pp


# -- the rule -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SequentialRule:
    """Per-task stopping rule; see the module docstring. Frozen and hashable; tables are cached
    per parameter set, so `decide` is an array lookup."""
    alpha: float = 0.05
    max_pairs: int = 20
    round_size: int = 1                 # pairs per task per round: used for describe() and the default OC only;
                                        # the error rate holds for any round size or look schedule
    futility_below: float = 0.3         # predictive chance of an effect by max_pairs below which to stop
    min_pairs_for_futility: int = 2
    prior_concordant: float = 1.0
    prior_discordant: float = 0.5       # each direction
    mixture_a: float = 0.5              # Beta(a, a) mixture behind the effect boundary

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1 or self.max_pairs < 1 or self.round_size < 1:
            raise ValueError("alpha in (0, 1), max_pairs >= 1 and round_size >= 1 are required")

    # presets (n_fixed -> max_pairs, futility_below), from benchmarks/stats_calibration.py --tune: exact
    # operating characteristics over max_pairs in {1.2, 1.5, 2} x n_fixed and futility_below 0.05..0.3 on
    # the reference mix (A ceiling 0.97/0.97, B 0.3 -> 0.8, C the fixed design's 80%-power effect from 0.3,
    # D null 0.5/0.5): power in B and C at least the fixed design's + 1 point at round sizes 1 and 2, then
    # the highest power among rules saving >= 45% of pairs at both round sizes (else the most saving).
    _PRESETS = {5: (10, 0.25), 8: (12, 0.1), 10: (20, 0.3), 12: (15, 0.075), 15: (23, 0.125),
                20: (40, 0.2), 25: (50, 0.15), 30: (60, 0.125)}

    @classmethod
    def for_fixed_design(cls, n_fixed: int, alpha: float = 0.05, round_size: int = 1) -> "SequentialRule":
        """The rule tuned to replace a fixed design of n_fixed pairs per task judged by exact McNemar
        (presets for 5, 8, 10, 12, 15, 20, 25, 30 pairs; other sizes scale the nearest preset's
        max_pairs / n_fixed and keep its futility threshold: check them with the calibration script)."""
        if n_fixed < 1:
            raise ValueError("n_fixed >= 1")
        nearest = min(cls._PRESETS, key=lambda k: (abs(k - n_fixed), k))
        max_pairs, futility = cls._PRESETS[nearest]
        if nearest != n_fixed:
            max_pairs = max(1, math.ceil(n_fixed * max_pairs / nearest))
        return cls(alpha=alpha, max_pairs=max_pairs, round_size=round_size, futility_below=futility)

    # -- tables --
    @property
    def _prior(self) -> tuple[float, float, float]:
        return (self.prior_concordant, self.prior_discordant, self.prior_discordant)

    def _codes(self) -> np.ndarray:
        return _tables(self.max_pairs, self.alpha, self.mixture_a, self._prior, self.futility_below,
                       self.min_pairs_for_futility)[0]

    @property
    def threshold(self) -> float:
        """The e-value threshold of the effect boundary."""
        return _boundary(self.max_pairs, self.alpha, self.mixture_a)[0]

    @property
    def type_i_bound(self) -> float:
        """Exact chance, with no difference, of ever declaring an effect within max_pairs pairs."""
        return _boundary(self.max_pairs, self.alpha, self.mixture_a)[2]

    @staticmethod
    def smallest_cap(alpha: float) -> int:
        """The fewest pairs within which an effect can be declared at `alpha`: n pairs all one way
        have a two-sided exact chance of 2 / 2^n, so n = ceil(log2(2 / alpha))."""
        return max(1, math.ceil(math.log2(2.0 / alpha) - 1e-12))

    def anytime_p(self, steps: list[int]) -> float:
        """A p-value for the walk `steps` (per pair in attempt order: +1 favours treatment, -1
        control, 0 concordant), valid however and whenever the task stopped: the exact chance, with no
        difference, that a walk looked at after every pair up to max_pairs ever reaches an e-value as
        large as the largest this one reached. At most alpha exactly when the rule declared an effect
        on this walk; Holm over tasks uses it."""
        m = s = 0
        best = -math.inf
        for step in steps:
            if step:
                m += 1
                s += step > 0
                best = max(best, float(_log_e_value(s, m, self.mixture_a)))
        if best == -math.inf:
            return 1.0
        needed = _majority_needed(best, self.max_pairs, self.mixture_a)
        return min(1.0, _crossing_probability(needed, self.max_pairs))

    def majority_needed(self, discordant: int) -> int | None:
        """Pairs favouring one arm needed among `discordant` discordant pairs to declare an effect."""
        needed = _boundary(self.max_pairs, self.alpha, self.mixture_a)[1][discordant]
        return needed if needed <= discordant else None

    def e_value(self, control_only: int, treatment_only: int) -> float:
        return float(np.exp(_log_e_value(treatment_only, control_only + treatment_only, self.mixture_a)))

    def predictive_chance(self, control_only: int, treatment_only: int, pairs: int) -> float:
        """Predictive chance of reaching the effect boundary by max_pairs (futility ignored)."""
        self._check(control_only, treatment_only, pairs)
        pp = _tables(self.max_pairs, self.alpha, self.mixture_a, self._prior, self.futility_below,
                     self.min_pairs_for_futility)[1]
        return float(pp[pairs, control_only + treatment_only, treatment_only])

    # -- decisions --
    def _check(self, control_only: int, treatment_only: int, pairs: int) -> None:
        if min(control_only, treatment_only) < 0 or control_only + treatment_only > pairs:
            raise ValueError("need 0 <= control_only + treatment_only <= pairs")
        if pairs > self.max_pairs:
            raise ValueError(f"{pairs} pairs exceed max_pairs={self.max_pairs}")

    def decide(self, control_only: int, treatment_only: int, pairs: int) -> Decision:
        """After `pairs` pairs of a task (both trials ended), `control_only` passed in control only and
        `treatment_only` in treatment only: continue, stop for an effect (either direction: read the
        sign from the counts), or stop for futility."""
        self._check(control_only, treatment_only, pairs)
        return _CODES[int(self._codes()[pairs, control_only + treatment_only, treatment_only])]

    def decide_speed(self, faster: int, slower: int, pairs: int) -> Decision:
        """Same rule for speed: `faster` = pairs (both passed) where treatment was faster, `slower`
        where control was faster, ties dropped; `pairs` = all pairs of the task so far. Valid at
        any stop, including one the pass/fail rule decided."""
        return self.decide(slower, faster, pairs)

    # -- exact operating characteristics --
    def operating_characteristics(self, p_treatment_only: float, p_control_only: float,
                                  round_size: int | None = None) -> dict[str, float]:
        """Exact chances of 'effect' and 'futility' and the expected pairs used, when pairs are
        independent with these cell probabilities and the rule is applied every `round_size` pairs."""
        rnd = round_size or self.round_size
        codes = self._codes()
        size = self.max_pairs + 1
        p_conc = 1.0 - p_treatment_only - p_control_only
        dist = np.zeros((size, size))
        dist[0, 0] = 1.0
        effect = futility = expected = 0.0
        for n in range(1, size):
            new = p_conc * dist
            new[1:, 1:] += p_treatment_only * dist[:-1, :-1]
            new[1:, :] += p_control_only * dist[:-1, :]
            dist = new
            if n % rnd == 0 or n == self.max_pairs:
                d = codes[n]
                e, f = float(dist[d == 1].sum()), float(dist[d == 2].sum())
                effect += e
                futility += f
                expected += n * (e + f)
                dist = np.where(d == 0, dist, 0.0)
        return {"effect": effect, "futility": futility, "expected_pairs": expected}

    def describe(self) -> str:
        threshold, needed, crossing = _boundary(self.max_pairs, self.alpha, self.mixture_a)
        first = next((m for m in range(1, self.max_pairs + 1) if needed[m] <= m), None)
        return (
            f"Sequential per task, up to {self.max_pairs} pairs, decided after every {self.round_size} pair(s). "
            f"Effect: two-sided test on the discordant pairs, Beta({self.mixture_a:g},{self.mixture_a:g})-mixture "
            f"e-value >= {threshold:.2f} (exact chance of a false effect, checked after every pair up to "
            f"{self.max_pairs}: {crossing:.4f} <= {self.alpha:g}; earliest possible: {first} discordant pairs all "
            f"one way; the bound is exact for looks up to the cap of {self.max_pairs} pairs, and looking past it voids "
            f"it). Futility (non-binding, cannot raise that chance): the predictive chance of reaching the "
            f"effect boundary by {self.max_pairs} pairs (Dirichlet({self.prior_concordant:g}, "
            f"{self.prior_discordant:g}, {self.prior_discordant:g}) prior on concordant / treatment-only / "
            f"control-only pairs) below {self.futility_below:g} after at least {self.min_pairs_for_futility} pairs, "
            f"or the boundary out of reach. Speed: the same rule on treatment-faster vs control-faster among pairs "
            f"where both passed."
        )
