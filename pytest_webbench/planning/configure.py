"""Setting up a `--suite` (or `--resume`) run in one pytest process: its options, suite and
runner checked, its experiment directory claimed (or, resuming, the trials already done found),
and on the controlling process the controller that plans and reports it."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from .controller import RunController
from .options import check_arms, check_sequential, is_worker, options_from_config
from .state import WebbenchState
from .task_needs import missing_judge, missing_solution


def configure_run(config: pytest.Config) -> tuple[WebbenchState, RunController | None]:
    from ..results.claims import ExperimentExists, claim_experiment_dir
    from ..runners import UnknownRunner, check_runner
    from ..design.suite import SuiteError, load_suite, resolve_suite_path

    # Harbor imports litellm, which otherwise waits ~7 s on a price-map download it cannot make.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    options = options_from_config(config)
    worker, resuming = is_worker(config), bool(config.getoption("resume", None))
    if options.environment == "host" and not worker:  # its answer is the manifest's isolation
        from ..environments.seal import probe_seal_ahead

        probe_seal_ahead()
    if config.getoption("publish", None) == "braintrust" and not os.environ.get("BRAINTRUST_API_KEY"):
        raise pytest.UsageError("--publish braintrust: BRAINTRUST_API_KEY is not set (set it, or drop --publish)")
    if options.browser == "kernel" and not worker and not config.option.collectonly:
        _check_kernel_access()
    try:
        suite = load_suite(resolve_suite_path(options.suite, [config.rootpath, Path.cwd()]),
                           options.clawbench_set, options.clawbench_ungradable)
        options = options.model_copy(update={"runner": options.runner or suite.spec.default_runner})
        # Collecting only checks the plan: the CLI and Kernel access are checked when trials run.
        runner = check_runner(options.runner, options.model, require_cli=not config.option.collectonly)
    except (UnknownRunner, SuiteError) as exc:
        where = f" (the suite's default_runner, {suite.path / 'suite.toml'})" if isinstance(exc, UnknownRunner) and \
            not (config.getoption("runner") or config.getini("webbench_runner") or resuming) else ""
        raise pytest.UsageError(f"{exc}{where}") from None
    # a resumed run's options are its manifest's, accepted when it began: refusing them now would strand it
    if options.arms and not resuming and (foreign := [a for a in options.arms if a not in suite.spec.arms]):
        raise pytest.UsageError(f"--arms {','.join(options.arms)}: suite {suite.name} runs in {', '.join(suite.spec.arms)}, "
                                f"not {', '.join(foreign)}")
    run_arms = options.arms or tuple(suite.spec.arms)
    check_arms(run_arms, options.paired)
    check_sequential(options, run_arms, resuming)
    _check_seal(options, config)
    _check_agent_network(options, suite)
    _check_verifier_environment(options, suite)
    judge = _judge(options, suite, check_key=not config.option.collectonly, selecting=bool(config.option.keyword))
    review = None if worker else _reviewer(options, judge, config)
    _check_solutions(options, suite, config)
    if options.environment != "host" and not worker and not config.option.collectonly:
        _preflight_environment(options.environment)
    if not worker:
        _check_proxy_ports(options, config)
    _check_gateway(options, resuming, reviewer_named=bool(config.getoption("review_model")))
    dist = config.getoption("dist", "no")
    if options.paired and dist not in ("no", "load"):
        raise pytest.UsageError(
            f"--dist {dist}: webbench schedules each control/treatment pair onto one worker itself; "
            "use -n N with the default --dist load (or --unpaired)"
        )
    # after every other check: the lookup takes a child process about 5 s, which a refused run need not wait for
    model_names = _harbor_model_names(config, runner.check_model(options.model), worker)
    experiment_dir = options.results_dir / options.experiment_id
    skip: set[str] = set()
    planned: set[str] | None = None
    lock = None
    if worker:
        skip = set(config.workerinput.get("webbench_skip", []))
        planned = set(config.workerinput["webbench_planned"]) if config.workerinput.get("webbench_planned") is not None else None
    elif resuming:
        from .resume import ResumeError, resumed_trials

        lock = _hold(experiment_dir)  # before anything of the run is read or moved
        try:
            planned, skip = resumed_trials(experiment_dir, suite, config.getoption("resume_errored"),
                                           move_aside=not config.option.collectonly)  # listing what would run moves nothing
        except ResumeError as exc:
            raise pytest.UsageError(str(exc)) from None
    else:
        try:
            experiment_dir = claim_experiment_dir(options.results_dir, options.experiment_id)
        except ExperimentExists as exc:
            raise pytest.UsageError(str(exc)) from None
        except OSError as exc:  # a results dir under a file, read-only, immutable, or out of space
            raise pytest.UsageError(
                f"--results-dir {options.results_dir}: cannot create the experiment's folder there "
                f"({exc.filename or options.results_dir}: {exc.strerror or exc}); choose a writable --results-dir=DIR") from None
        lock = _hold(experiment_dir)
    st = WebbenchState(options, suite, experiment_dir)
    st.judge = judge
    st.review = review
    st.model_names = model_names
    st.skip, st.planned = skip, planned
    st.lock_fd = None if worker else lock  # held until this process exits
    if worker:
        return st, None

    distributed = bool(getattr(config.option, "numprocesses", None)) and dist != "no"
    return st, RunController(st, resuming, distributed)


def _harbor_model_names(config: pytest.Config, model: str | None, worker: bool):
    """Harbor's provider lookup for the run's model, made once by the controller (in a child
    process: runners/model_names.py) and handed to the workers, so that no process that runs
    trials imports litellm to make it again. None: the run has no model, or only plans."""
    from ..runners.model_names import ModelNames, ModelNamesError, answer_from, resolve

    try:
        if worker:
            given = config.workerinput.get("webbench_model_names")
            names = ModelNames.model_validate(given) if given is not None else None
        else:
            names = resolve(model) if model is not None and not config.option.collectonly else None
        if names is not None:
            answer_from(names)
    except ModelNamesError as exc:
        raise pytest.UsageError(str(exc)) from None
    return names


def _judge(options, suite, check_key: bool = True, selecting: bool = False):
    """The judge of the run's write tasks whose check does not decide the grade (a JudgeSetup, or
    None): --judge-model, else the run's own model, at the run's own endpoint and price; one the
    gateway cannot speak or price is refused before any trial. With -k and no judge, the selected
    trials are checked once collected (controller.py)."""
    from ..grading.grade import needs_judge

    if not any(needs_judge(t.meta) for t in suite.tasks):
        if options.judge_model or options.judge_base_url:
            raise pytest.UsageError(f"--judge-model/--judge-base-url: no task of {suite.name} is graded by a judge")
        return None
    from ..gateway.providers import GatewayConfigError, model_price, provider_of
    from ..grading.judge import JudgeSetup
    from ..runners import runner_spec

    runner = runner_spec(options.runner)
    model = options.judge_model or (runner.check_model(options.model) if runner.uses_gateway else None)
    if model is None:
        if selecting:
            return None
        raise pytest.UsageError(missing_judge(options, suite.tasks))
    try:
        provider = provider_of(model)
        price = model_price(model, None if options.judge_model else options.model_price, options.allow_unpriced)
    except GatewayConfigError as exc:
        raise pytest.UsageError(f"the judge: {exc}") from None
    if check_key and not os.environ.get(provider.key_variable):  # checked when trials run, as the CLI is
        raise pytest.UsageError(f"the judge {model}: {provider.key_variable} is not set (the gateway adds the real key "
                                "to the judge's requests; it never leaves the harness)")
    return JudgeSetup(model=model, api="messages" if provider.key_header == "x-api-key" else "chat", price=price,
                      upstream=options.judge_base_url or (None if options.judge_model else options.model_base_url))


def _reviewer(options, judge, config):
    """--review's reviewer (review/reviewer.py ReviewSetup, or None without --review): --review-model,
    else the run's judge, else the run's model at the run's endpoint and price; refused before any
    trial where the gateway cannot speak or price it, or its key is not set."""
    if not (config.getoption("review") or config.getoption("review_all")):
        if config.getoption("review_model") or config.getoption("review_base_url"):
            raise pytest.UsageError("--review-model/--review-base-url go with --review (or --review-all)")
        return None
    from ..review.reviewer import ReviewConfigError, reviewer_setup
    from ..runners import runner_spec

    runner = runner_spec(options.runner)
    run_model = runner.check_model(options.model) if runner.uses_gateway else None
    model = config.getoption("review_model") or (judge.model if judge else None) or run_model
    if model is None:
        raise pytest.UsageError(f"--review: --runner {options.runner} asks no model, and the run has no judge: name the "
                                "reviewer with --review-model PROVIDER/MODEL")
    own = model == run_model and not config.getoption("review_model")
    base_url = config.getoption("review_base_url") or (judge.upstream if judge and model == judge.model else None) \
        or (options.model_base_url if own else None)
    try:
        return reviewer_setup(model, base_url, options.model_price if own else None, options.allow_unpriced,
                              check_key=not config.option.collectonly)
    except ReviewConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _check_gateway(options, resuming: bool = False, reviewer_named: bool = False) -> None:
    """A real agent's model requests go through the gateway: its provider must be one the gateway
    speaks, and its model priced (or unpriced runs allowed), before any trial starts."""
    from ..runners import runner_spec

    runner = runner_spec(options.runner)
    if not runner.uses_gateway:
        # recorded in the manifest, and never used: the run's model's price and endpoint (a judge of
        # its own has its own), and --allow-unpriced unless a judge model of its own is named
        unused = [name for name, value in (("--model-price", options.model_price), ("--model-base-url", options.model_base_url),
                                           ("--allow-unpriced", options.allow_unpriced and not options.judge_model
                                            and not reviewer_named)) if value]
        if unused and not resuming:
            raise pytest.UsageError(f"--runner {options.runner} calls no model: drop {', '.join(unused)}")
        return
    from ..gateway.providers import GatewayConfigError, model_price, provider_of  # the price table: only for a runner that uses it

    model = runner.check_model(options.model)
    try:
        provider_of(model)
        model_price(model, options.model_price, options.allow_unpriced)
    except GatewayConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _check_seal(options, config: pytest.Config) -> None:
    """A real agent on this host runs sealed (its own network, mount and PID namespaces), or not at
    all unless allowed."""
    from ..runners import runner_spec

    if options.environment != "host" or not runner_spec(options.runner).agent_commands or config.option.collectonly:
        return
    from ..environments.seal import can_seal, unshare_command

    if not can_seal() and not options.allow_unsealed:
        raise pytest.UsageError(
            f"--runner {options.runner}: this machine cannot seal agents ({unshare_command()} --net --mount --pid "
            "failed: root or unprivileged user namespaces are needed), so the agent could read the suite's answers "
            "and the results and reach the site around its browser tools; run as root, or pass --allow-unsealed to "
            "run unsealed (the report will say so)")


def _preflight_environment(environment: str) -> None:
    """What a Harbor environment needs (Docker installed and its daemon up; a cloud's credentials),
    by Harbor's own preflight, before the first trial rather than inside each. Planning alone
    (--collect-only) does not need it."""
    from harbor.environments.factory import EnvironmentFactory
    from harbor.models.environment_type import EnvironmentType

    environment_class = EnvironmentFactory.get_environment_class(EnvironmentType(environment))
    try:
        environment_class.preflight({})
    except (SystemExit, ValueError) as exc:
        raise pytest.UsageError(f"--environment {environment}: {exc}") from None


def _hold(experiment_dir: Path) -> int:
    """One run of an experiment at a time (results/claims.py hold_experiment)."""
    from ..results.claims import ExperimentBusy, hold_experiment

    try:
        return hold_experiment(experiment_dir)
    except ExperimentBusy as exc:
        raise pytest.UsageError(str(exc)) from None


def _check_proxy_ports(options, config) -> None:
    """A --proxy-listen port already taken would error every trial with errno 98 in its detail: the
    port (and, under -n, each worker's consecutive one) is tried before any trial."""
    import errno
    import socket

    host, port = options.proxy_listen
    if not port:
        return
    workers = int(getattr(config.option, "numprocesses", 0) or 0) if config.getoption("dist", "no") != "no" else 0
    for offset in range(max(1, workers)):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port + offset))
            except OSError as exc:
                why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound: {exc.strerror}"
                raise pytest.UsageError(
                    f"--proxy-listen {host}:{port}: port {port + offset}"
                    f"{f' (worker {offset})' if workers else ''} {why}; choose another, or port 0 for a free one") from None


def _check_solutions(options, suite, config) -> None:
    """Checked here for the whole suite when nothing is deselected (-n included); with -k, on the
    selected trials once they are collected (controller.py)."""
    if not config.option.keyword and (problem := missing_solution(options, suite.tasks)):
        raise pytest.UsageError(problem)


def _check_agent_network(options, suite) -> None:
    """A sandbox enforces each task's agent-phase network policy, widened by the run's one host (the
    proxy's listener). A task of the suite that gives its agent network of its own (public, or an
    allowlist) would let a sandboxed agent reach a site around its tools, so it is refused unless
    unsealed runs were allowed. On this machine a sealed agent reaches only its loopback, so a
    --proxy-url naming another host would leave it without its tools and model."""
    from ..environments.seal import HARNESS_HOSTS, hosts_beyond_the_seal
    from ..runners import runner_spec

    if options.allow_unsealed or not runner_spec(options.runner).agent_commands:
        return
    if options.environment == "host":
        host = urlsplit(options.proxy_url or "").hostname
        if options.proxy_url and host not in HARNESS_HOSTS:
            raise pytest.UsageError(
                f"--proxy-url {options.proxy_url}: on this machine a sealed agent reaches only the proxy's listener on its "
                f"own loopback, so the URL must name 127.0.0.1 or localhost, not {host!r} (other names are for sandboxes)")
        for task in suite.tasks:  # the seal keeps no allowlist of other hosts: refused here, not per trial
            if task.agent_network_mode == "allowlist" and (others := hosts_beyond_the_seal(task.agent_allowed_hosts)):
                raise pytest.UsageError(
                    f"{task.path / 'task.toml'}: [agent] network_mode is allowlist {others}: on this machine a sealed "
                    "agent reaches only the harness's listener, so that allowlist cannot be kept; use no-network, or "
                    "pass --allow-unsealed to run it unsealed (the report will say so)")
        return
    for task in suite.tasks:
        if task.agent_has_own_network:
            allowed = f" {list(task.agent_allowed_hosts)}" if task.agent_allowed_hosts else ""
            raise pytest.UsageError(
                f"{task.path / 'task.toml'}: [agent] network_mode is {task.agent_network_mode}{allowed} (set there or "
                f"by default), so in a {options.environment} sandbox the agent could reach sites around its browser "
                "tools; set network_mode = \"no-network\" (each run adds the host of --proxy-url, the agent's one exit), "
                "or pass --allow-unsealed to run it as it is (the report will say so)")


def _check_verifier_environment(options, suite) -> None:
    """A task graded by its own verifier gets a workspace of its own, where nothing the agent wrote
    can run or shadow anything (host.py `verify_apart`); only the host environment builds one. In a
    Harbor sandbox the verifier would run in the agent's own container, among the files it left."""
    if options.environment == "host":
        return
    for task in suite.tasks:
        if task.meta.grading == "verifier":
            raise pytest.UsageError(
                f"{task.path / 'task.toml'}: grading = \"verifier\" runs the task's verifier in a clean workspace of its "
                f"own, which only --environment host builds; in a {options.environment} sandbox it would run among the "
                "files the agent left (which could take over its interpreter), so it is refused there")


def _check_kernel_access() -> None:
    """A missing or bad key, or no network, is one clear error before any trial, not one per trial."""
    import asyncio

    from ..browsers.base import BackendError
    from ..browsers.kernel import KernelBackend

    async def check() -> None:
        backend = KernelBackend()
        try:
            await backend.check_access()
        finally:
            await backend.close()

    try:
        asyncio.run(check())
    except BackendError as exc:
        raise pytest.UsageError(f"--browser kernel: {exc}") from None
