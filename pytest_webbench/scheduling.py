"""xdist scheduling that keeps each control/treatment pair on one worker, back to back.

A work unit is a pair (or a lone trial); within a unit xdist keeps collection order, which the
collection hook has already balanced. Node ids are left untouched (unlike --dist loadgroup).
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

from .pairing import TrialKey


class PairScheduling(LoadScopeScheduling):
    def _split_scope(self, nodeid: str) -> str:
        if nodeid.endswith("]") and "[" in nodeid:
            try:
                key = TrialKey.parse(nodeid.rsplit("[", 1)[1][:-1])
            except ValueError:
                return nodeid
            return key.pair_id or key.trial_id
        return nodeid
