"""The trial's fixtures: services per process, and per trial a browser session, a proxy route, a
model gateway route, the agent's runner (agent.py) and the recorder that writes the trial's record
whatever happens (recorder.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..design.suite import TrialSpec
from ..planning.state import WebbenchState, item_key, next_trial, state
from ..results.records import harbor_folder, supersede_trial_dir
from ..results.run_notes import record_undeleted_browser
from ..runners import runner_spec
from .agent import AgentRunner
from .recorder import RECORDER_KEY, TrialRecorder

if TYPE_CHECKING:  # the trial machinery (web servers, HTTP clients) loads when the first trial runs,
    # so planning a run (--collect-only) stays fast: benchmarks/collection_scale.py
    from .services import RunServices


@pytest.fixture(scope="session")
def webbench_services(request):
    from .services import RunServices

    st = state(request.config)
    services = RunServices.start(st.suite, st.options.browser, st.options)
    yield services
    services.close()


@pytest.fixture
def webbench_trial(request) -> TrialSpec:
    return state(request.config).specs[item_key(request.node).trial_id]


def _trial_dir(st: WebbenchState, spec: TrialSpec) -> Path:
    return harbor_folder(st.experiment_dir, spec.key.arm, spec.trial_id)


@pytest.fixture
def browser_session(request, webbench_services: RunServices, webbench_trial: TrialSpec):
    from .browser_session import BrowserSessionHandle, given_folder, open_browser_session, trial_site_urls

    st = state(request.config)
    supersede_trial_dir(st.experiment_dir, _trial_dir(st, webbench_trial))  # a rerun starts clean
    session_id = f"{st.options.experiment_id}-{webbench_trial.trial_id}"
    start_url = webbench_services.site_urls[webbench_trial.task.meta.site] + webbench_trial.task.meta.start_path
    handle = BrowserSessionHandle(session_id, start_url, webbench_services, given_dir=given_folder(webbench_trial))
    try:
        _give_an_inbox(handle, webbench_services, webbench_trial)
        handle.run(open_browser_session(webbench_services, webbench_trial, session_id, start_url, st.options.trace,
                                        handle.given_dir))
        if (following := next_trial(request.node)) is not None:  # its browser starts while this agent runs
            handle.run(webbench_services.backend.make_ready(trial_site_urls(webbench_services, following)))
        yield handle
    finally:
        handle.save_screenshot(_trial_dir(st, webbench_trial))  # if the agent never ran
        try:
            handle.run(webbench_services.backend.delete_session(session_id), timeout=60)
        except Exception as exc:  # noqa: BLE001 - whatever went wrong, a billed browser must not be forgotten
            if webbench_services.backend.billed:  # swept again at the run's end; the report lists what is left
                record_undeleted_browser(st.experiment_dir, session_id, f"{type(exc).__name__}: {exc}")
        _end_the_inbox(handle, st.experiment_dir)  # after the browser: its code's seal holds the given files


def _give_an_inbox(handle, services: RunServices, spec: TrialSpec) -> None:
    """The trial's own e-mail account (trial/inbox.py), and the given files that name it, in a
    folder of the trial's own (`handle.given_root`, removed with the account)."""
    import tempfile

    from .inbox import given_with_account, new_account, open_account

    if (service := services.inbox_service(spec.task.meta.inbox)) is None:
        return
    account = new_account(service)
    handle.inbox = account  # named before it is asked for: ended even if its reply never comes
    handle.run(open_account(account), timeout=60)
    handle.given_root = Path(tempfile.mkdtemp(prefix="webbench-given-"))
    handle.given_dir = given_with_account(handle.given_dir, account, handle.given_root / "my-info")


def _end_the_inbox(handle, experiment_dir: Path) -> None:
    """Deletes the trial's account; one that cannot be deleted is listed with the browsers left
    behind (the report names them), not lost in a warning."""
    import shutil

    from ..results.run_notes import record_undeleted_browser
    from .inbox import InboxError, close_account

    if handle.given_root is not None:
        shutil.rmtree(handle.given_root, ignore_errors=True)
    if handle.inbox is None:
        return
    try:
        handle.run(close_account(handle.inbox), timeout=60)
    except Exception as exc:  # noqa: BLE001 - the trial's verdict stands; the account is named for whoever ends it
        if not (isinstance(exc, InboxError) and "userNotFound" in str(exc)):  # never made: nothing to end
            record_undeleted_browser(experiment_dir, f"e-mail account {handle.inbox.email}",
                                     f"the trial's e-mail account ({handle.inbox.service.provider}) was not deleted: {exc}")


@pytest.fixture
def mcp_proxy(request, webbench_services: RunServices, webbench_trial: TrialSpec, browser_session):
    from .proxy_route import open_proxy_route

    handle = open_proxy_route(webbench_services, webbench_trial, browser_session.session_id, _trial_dir(state(request.config), webbench_trial))
    try:
        yield handle
    finally:
        session = webbench_services.routes.remove(webbench_trial.trial_id)
        if session is not None:
            webbench_services.loop.run(session.aclose(), timeout=30)


@pytest.fixture
def model_gateway(request, webbench_services: RunServices, webbench_trial: TrialSpec, browser_session):
    """The trial's route through the model gateway, for runners that call a model (None otherwise)."""
    st = state(request.config)
    runner = runner_spec(st.options.runner)
    if not runner.uses_gateway:
        yield None
        return
    from ..gateway.meter import DEFAULT_OUTPUT_CEILING, output_ceiling
    from ..gateway.providers import model_price
    from ..gateway.wiring import open_gateway_route

    model = runner.check_model(st.options.model)
    meta = webbench_trial.task.meta
    handle = open_gateway_route(
        webbench_services.gateway, webbench_services.proxy_base_url, webbench_trial.trial_id, model,
        st.options.model_base_url, model_price(model, st.options.model_price, st.options.allow_unpriced),
        meta.spend_limit_usd, meta.token_limit, _trial_dir(st, webbench_trial), api=runner.api_for(model),
        # the model's largest output from litellm's table where the price comes from it (read anyway)
        output_ceiling=DEFAULT_OUTPUT_CEILING if st.options.model_price else output_ceiling(model))
    try:
        yield handle
    finally:
        webbench_services.gateway.remove(webbench_trial.trial_id)


@pytest.fixture
def agent_runner(request, webbench_trial, browser_session, mcp_proxy, model_gateway) -> AgentRunner:
    return AgentRunner(state(request.config), webbench_trial, browser_session, mcp_proxy, model_gateway)


@pytest.fixture
def trial_recorder(request, webbench_trial) -> TrialRecorder:
    recorder = TrialRecorder(state(request.config), webbench_trial)
    request.node.stash[RECORDER_KEY] = recorder
    return recorder
