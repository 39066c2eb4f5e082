from pytest_webbench.design.pairing import TrialKey, broken_pairs, control_first_attempts, order_trials, pair_position


def keys(tasks=("a", "b"), attempts=4, arms=("control", "treatment", "playwright")):
    return [TrialKey(t, i, arm) for t in tasks for i in range(1, attempts + 1) for arm in arms]


def test_pairs_are_adjacent_and_balanced_for_many_run_ids():
    for run_id in [f"run-{i}" for i in range(30)]:
        ordered = order_trials(keys(attempts=5), run_id)
        for i, k in enumerate(ordered):
            if k.pair_id and k.arm == "control":
                neighbours = {ordered[j].trial_id for j in (i - 1, i + 1) if 0 <= j < len(ordered)}
                assert f"{k.pair_id}-treatment" in neighbours
        for task in ("a", "b"):
            firsts = control_first_attempts(run_id, task, 5)
            assert len(firsts) in (2, 3)
            pos = {k.trial_id: n for n, k in enumerate(ordered)}
            for attempt in range(1, 6):
                control_before = pos[f"{task}-a{attempt}-control"] < pos[f"{task}-a{attempt}-treatment"]
                assert control_before == (attempt in firsts)


def test_even_attempts_split_exactly_in_half():
    assert all(len(control_first_attempts(f"r{i}", "t", 4)) == 2 for i in range(20))


def test_order_is_fixed_by_run_id_and_varies_across_ids():
    k = keys(attempts=6)
    assert order_trials(k, "x") == order_trials(k, "x")
    assert len({tuple(t.trial_id for t in order_trials(k, f"id{i}")) for i in range(10)}) > 1


def test_unpaired_keeps_order_and_broken_pairs_are_found():
    k = keys(attempts=2)
    assert order_trials(k, "x", paired=False) == k
    partial = [t for t in k if not (t.task == "a" and t.attempt == 1 and t.arm == "treatment")]
    assert broken_pairs(partial) == ["a-a1"]


def test_trial_id_round_trip():
    key = TrialKey("github-merged-pr", 12, "playwright")
    assert TrialKey.parse(key.trial_id) == key


def test_order_agrees_with_recorded_positions_when_attempts_are_left_out():
    """-k, a shard or --resume may drop the highest attempts: the pairs still run in the order the
    manifest records (pair_position, from --attempts)."""
    for run_id in [f"run-{i}" for i in range(30)]:
        some = [k for k in keys(attempts=5) if k.attempt <= 2]
        ordered = order_trials(some, run_id, attempts=5)
        for n, k in enumerate(ordered):
            if k.pair_id:
                first = n == 0 or ordered[n - 1].pair_id != k.pair_id
                assert (pair_position(k, run_id, 5) == 1) == first, (run_id, k)


def test_the_xdist_methods_the_pair_scheduler_overrides_are_the_ones_it_was_written_against():
    """scheduling.py overrides private methods of pytest-xdist's LoadScopeScheduling: if an xdist
    release changes any of them, this fails and names it, instead of pairs silently splitting."""
    import hashlib
    import inspect
    import textwrap

    import xdist
    from xdist.scheduler import LoadScopeScheduling

    from pytest_webbench.planning.scheduling import XDIST_PRIVATE_METHODS, XDIST_TESTED_WITH, PairScheduling

    changed = {}
    for name, digest in XDIST_PRIVATE_METHODS.items():
        source = textwrap.dedent(inspect.getsource(getattr(LoadScopeScheduling, name)))
        if hashlib.sha256(source.encode()).hexdigest()[:16] != digest:
            changed[name] = inspect.signature(getattr(LoadScopeScheduling, name))
    assert not changed, f"pytest-xdist {xdist.__version__} changed {sorted(changed)} (written against {XDIST_TESTED_WITH})"
    for name in ("_split_scope", "_reschedule", "_assign_work_unit"):  # still overrides, not new methods
        assert getattr(PairScheduling, name) is not getattr(LoadScopeScheduling, name)


def test_a_run_s_attempts_missing_or_zero_orders_by_the_highest_present():
    """A hand-made manifest's 0 reaches order_trials from a merge: ordered as if not given (found by review)."""
    keys = [TrialKey(task, attempt, arm) for task in ("t", "u") for attempt in (1, 2, 3) for arm in ("treatment", "control")]
    assert order_trials(keys, "run", True, 0) == order_trials(keys, "run", True, None) == order_trials(keys, "run", True, 3)
