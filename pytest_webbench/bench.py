"""The benchmark's one test: a trial. `--suite` makes pytest collect this module alone, and the
plugin parametrizes it with every task x attempt x arm of the suite."""

from __future__ import annotations


def test_trial(webbench_trial, browser_session, mcp_proxy, agent_runner, trial_recorder):
    # imported here: collecting 10,000 trials need not load the trial machinery
    from pytest_webbench.grading import grade_trial
    from pytest_webbench.grading.page_state import refine_stop_reason
    from pytest_webbench.trial import read_page_state, read_page_value

    outcome = agent_runner.run()  # the agent, as a one-trial Harbor run, through the proxy
    lost = browser_session.lost()  # a crashed or ended browser errors the trial instead of failing it
    # Grading never trusts the agent's claim: its JSON answer, and the live page read afterwards.
    page_value, page_error = read_page_value(browser_session, webbench_trial, mcp_proxy.log_path.parent)
    calls = mcp_proxy.calls()
    grade = grade_trial(
        webbench_trial.task.meta, outcome.answer_raw, calls.forwarded, cap_hit=calls.cap_hit,
        page_value=page_value, page_error=page_error,
    )
    if not grade.passed:  # was it the agent, or a bot block or a failing site it was left on?
        state = read_page_state(browser_session)
        refined = refine_stop_reason(grade.stop_reason, state)
        if refined != grade.stop_reason:
            grade.detail += f"; the page it was left on is a {refined.replace('_', ' ')}: {state.title!r} ({state.url}, HTTP {state.status})"
            grade.stop_reason = refined
    # A call that went around the browser tools is flagged for the report; it never changes the score.
    record = trial_recorder.record(outcome, grade, calls, page_value, flags=agent_runner.trajectory_flags(), lost=lost)
    assert record.outcome == "passed", (
        f"{webbench_trial.trial_id}: {record.stop_reason}: {record.detail} (expected {grade.expected}, "
        f"answer {grade.answer!r})"
    )
