"""xdist scheduling that keeps each control/treatment pair on one worker, back to back.

A work unit is a pair (or a lone trial); within a unit xdist keeps collection order, which the
collection hook has already balanced. Node ids are left untouched (unlike --dist loadgroup).
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

from ..design.pairing import TrialKey

# The private methods of xdist's LoadScopeScheduling this class overrides or calls, with the sha256
# (first 16 hex digits) of their source in the release it was written against (pyproject pins
# pytest-xdist <3.9). A test compares them with the installed xdist, so a change fails loudly.
XDIST_TESTED_WITH = "3.8.0"
XDIST_PRIVATE_METHODS = {
    "_split_scope": "11e3b83bf03cdafe",
    "_reschedule": "b6444833c9a924e2",
    "_assign_work_unit": "76fd5d71c8726288",
    "_pending_of": "23754578288f3fb6",
}


class PairScheduling(LoadScopeScheduling):
    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self._index: dict = {}  # node -> {test id: its index in the node's collection}

    def _drop_decided(self) -> None:
        from .state import STATE_KEY

        st = self.config.stash.get(STATE_KEY, None)
        if st is None or not st.options.sequential:
            return
        from ..results.decisions import not_run, read_decision

        while self.workqueue:
            scope = next(iter(self.workqueue))
            # a unit's scope is its pair id (task-aN) or, for a lone trial, the trial id
            key = next((TrialKey.parse(nodeid.rsplit("[", 1)[1][:-1]) for nodeid in self.workqueue[scope]
                        if nodeid.endswith("]")), None)
            if key is None or not not_run(key, read_decision(st.experiment_dir, key.task)):
                return
            self.workqueue.popitem(last=False)

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.endswith("]") and "[" in nodeid:
            try:
                key = TrialKey.parse(nodeid.rsplit("[", 1)[1][:-1])
            except ValueError:
                return nodeid
            return key.pair_id or key.trial_id
        return nodeid

    def _reschedule(self, node) -> None:
        """xdist's, holding back one unit less: a worker gets its next unit when it is down to its
        last trial (it needs one queued to run the current), so when the queue runs dry a worker
        holds at most one unit it has not started while another may be idle. Trials take minutes,
        the round trip milliseconds."""
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) >= 2:
            return
        self._assign_work_unit(node)

    def _assign_work_unit(self, node) -> None:
        """xdist's, with the worker's collection indexed once (xdist looks up every test id with
        list.index: quadratic at 10,000 trials); in a sequential run, pairs of a task already
        decided are not handed out at all."""
        self._drop_decided()
        if not self.workqueue:  # what is left was all decided: no more work for this worker
            node.shutdown()
            return
        scope, work_unit = self.workqueue.popitem(last=False)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        if node not in self._index:
            self._index[node] = {nodeid: i for i, nodeid in enumerate(self.registered_collections[node])}
        index = self._index[node]
        node.send_runtest_some([index[nodeid] for nodeid, completed in work_unit.items() if not completed])
