"""The benchmark's one test: a trial. `--suite` makes pytest collect this module alone, and the
plugin makes one item of it per task x attempt x arm of the suite (plugin.pytest_pycollect_makeitem)."""

from __future__ import annotations

GATEWAY_DRAIN_SEC = 120  # past this a reply still unread counts at its worst case (TrialMeter.charged_usd)


def test_trial(request, webbench_trial, browser_session, mcp_proxy, model_gateway, agent_runner, trial_recorder):
    # imported here: collecting 10,000 trials need not load the trial machinery
    from pytest_webbench.grading import grade_trial
    from pytest_webbench.grading.evidence import unseen_flag
    from pytest_webbench.planning.state import state
    from pytest_webbench.trial.browser_session import read_page_state, read_page_value, write_flags
    from pytest_webbench.trial.judging import judge_trial

    outcome = agent_runner.run()  # the agent, as a one-trial Harbor run, through the proxy
    if model_gateway is not None:  # a reply the agent left is read to its end and metered before the record
        services = browser_session.services
        services.loop.run(services.gateway.idle(webbench_trial.trial_id, GATEWAY_DRAIN_SEC), timeout=GATEWAY_DRAIN_SEC + 10)
    # Faults, read before grading moves the page: a crashed or ended browser, a block or error page.
    # Each errors the trial whatever its grade (verdict.py).
    lost = browser_session.lost()
    page = None if lost else read_page_state(browser_session)
    # Grading never trusts the agent's claim: its JSON answer, and the live page read afterwards.
    page_value, page_error = read_page_value(browser_session, webbench_trial, mcp_proxy.log_path.parent)
    calls = mcp_proxy.calls()
    # A write task's submission that its check cannot decide goes to the judge, through the gateway.
    judge = judge_trial(state(request.config), webbench_trial, browser_session.services, page_value,
                        mcp_proxy.log_path.parent) if page_error is None else None
    grade = grade_trial(
        webbench_trial.task.meta, outcome.answer_raw, calls.forwarded, cap_hit=calls.cap_hit,
        page_value=page_value, page_error=page_error, judge=judge,
        verifier=(outcome.verifier_rewards, outcome.verifier_error),
    )
    walls = None
    if agent_runner.grades == "walls":  # the hostile runner: its trial is the walls it tried
        from pytest_webbench.grading.walls import grade_walls

        grade, walls = grade_walls(outcome.harbor_trial_dir)
    # A call that went around the browser tools is flagged for the report; it never changes the score.
    # Nor does a pass whose answer no permitted call showed: it is flagged, never a clean pass.
    flags = agent_runner.flags() + write_flags(page_value)
    if grade.passed and (unseen := unseen_flag(webbench_trial.task.meta, mcp_proxy.session.stats.answer_seen,
                                               mcp_proxy.session.stats.screenshots)):
        flags.append(unseen)
    record = trial_recorder.record(outcome, grade, calls, page_value, flags=flags, lost=lost,
                                   page=page, gateway=model_gateway, trace=agent_runner.trace,
                                   gateway_turns=agent_runner.turns(), walls=walls, judge=judge)
    assert record.outcome == "passed", (
        f"{webbench_trial.trial_id}: {record.stop_reason}: {record.detail} (expected {grade.expected}, "
        f"answer {grade.answer!r})"
    )
