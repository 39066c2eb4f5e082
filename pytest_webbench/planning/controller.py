"""The run's controller: the hooks only the process that plans and reports a run needs (the
manifest, xdist's scheduler and crashed workers, the report, the cloud browsers' sweep, the
terminal summary). `plugin.py` registers it for a `--suite` run in the controlling process only,
as pytest-xdist registers its DSession, so none of these hooks has to ask where it runs.
"""

from __future__ import annotations

import os

import pytest

from ..design.pairing import TrialKey, order_trials
from .state import WebbenchState


class RunController:
    def __init__(self, st: WebbenchState, resuming: bool, distributed: bool):
        self.st, self.resuming, self.distributed = st, resuming, distributed
        self.job_problems: list[str] = []
        self.browsers_left: dict[str, str] = {}
        self.report_error: str | None = None  # the report could not be written (a full disk): why, and how to make it
        self.plan_dir: str | None = None  # --shard under xdist: where workers leave the whole plan (plugin.py)

    # -- planning ------------------------------------------------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from .task_needs import missing_judge, missing_solution
        from .state import item_key

        # -k: what the selected trials need, where planning could not check it for the whole suite (a
        # reference run's solutions, a judge the suite needs and the run has none of); walking the
        # items costs, so only then
        judge_unchecked = self.st.judge is None and missing_judge(self.st.options, self.st.suite.tasks) is not None
        if session.config.option.keyword and (self.st.options.runner == "reference" or judge_unchecked):
            selected = {spec.task.name: spec.task for item in session.items
                        if (k := item_key(item)) and (spec := self.st.specs.get(k.trial_id))}
            problem = missing_solution(self.st.options, selected.values())
            if problem or (judge_unchecked and (problem := missing_judge(self.st.options, selected.values()))):
                if not self.resuming:
                    from ..results.claims import release_claim

                    release_claim(self.st.experiment_dir)
                pytest.exit(problem, returncode=pytest.ExitCode.USAGE_ERROR)

        if not self.resuming and not self.distributed:  # resuming: the manifest holds the original plan
            keys = [k for item in session.items if (k := item_key(item))]
            if not keys:  # -k chose nothing: no experiment of no trials is claimed
                from ..results.claims import release_claim

                release_claim(self.st.experiment_dir)
                pytest.exit(f"-k {session.config.option.keyword!r} selects no trial of suite {self.st.suite.name}: "
                            "nothing was planned", returncode=pytest.ExitCode.NO_TESTS_COLLECTED)
            self._write_manifest(keys)

    @pytest.hookimpl(optionalhook=True)  # xdist hooks: the plugin also loads without xdist
    def pytest_configure_node(self, node) -> None:
        """Every worker uses the controller's experiment id (so all compute one pair order), skips
        what it skips on --resume, and takes Harbor's reading of the model name from the controller."""
        node.workerinput["webbench_experiment_id"] = self.st.options.experiment_id
        node.workerinput["webbench_skip"] = sorted(self.st.skip)
        node.workerinput["webbench_planned"] = sorted(self.st.planned) if self.st.planned is not None else None
        names = self.st.model_names
        node.workerinput["webbench_model_names"] = names.model_dump() if names is not None else None
        if self.st.options.shard and not self.resuming:
            if self.plan_dir is None:
                import tempfile

                self.plan_dir = tempfile.mkdtemp(prefix="webbench-plan-")
            node.workerinput["webbench_plan_file"] = os.path.join(self.plan_dir, "plan.json")

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:
        if self.resuming or (self.st.experiment_dir / "manifest.json").exists():
            return  # written already (or kept as planned, when resuming)
        keys = [TrialKey.parse(i.rsplit("[", 1)[1].rstrip("]")) for i in ids if "[" in i]
        if not keys:  # -k chose nothing: pytest says no tests ran, and no experiment is claimed
            from ..results.claims import release_claim

            return release_claim(self.st.experiment_dir)
        opts = self.st.options
        if self.plan_dir is not None:  # the node wrote the whole plan before it reported its collection
            import json

            with open(os.path.join(self.plan_dir, "plan.json")) as plan:
                self.st.whole_plan = json.load(plan)
        self._write_manifest(order_trials(keys, opts.experiment_id, opts.paired, opts.attempts))

    def _write_manifest(self, keys: list[TrialKey]) -> None:
        from .manifest import write_run_manifest

        write_run_manifest(self.st, keys)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log):
        if not self.st.options.paired:
            return None
        from .scheduling import PairScheduling

        return PairScheduling(config, log)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report, sched) -> None:
        """A worker died mid-trial: the trial it was running gets an errored record, so it is
        counted, reported and rerun by --resume-errored."""
        if "[" not in crashitem:
            return
        from ..results.record_index import write_trial_record
        from ..results.records import read_manifest, trial_record_path
        from ..grading.verdict import worker_crash_record

        trial_id = crashitem.rsplit("[", 1)[1].rstrip("]")
        if trial_record_path(self.st.experiment_dir, trial_id).exists():
            return  # it finished writing before the worker died
        record = worker_crash_record(read_manifest(self.st.experiment_dir), trial_id, report.longreprtext)
        if record is not None:
            write_trial_record(self.st.experiment_dir, record)

    # -- reporting -----------------------------------------------------------------------
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        st, config = self.st, session.config
        if not (st.experiment_dir / "manifest.json").exists() or config.option.collectonly:
            return  # nothing was planned, or only planned: the manifest is the result
        from ..results.harbor_jobs import write_job_results
        from ..report import write_report

        from ..results.claims import disk_full_message

        if st.options.browser == "kernel":  # first: a billed browser is deleted whatever the disk says
            self.browsers_left = _sweep_browsers(st)
        try:
            _check_suite(st)
            self.job_problems = write_job_results(st.experiment_dir, st.options.experiment_id)
            st.report = write_report(st.experiment_dir)  # first: a review that fails, or is stopped, loses no report
            if st.review is not None:  # every agent has stopped: the reviewer reads the records on disk
                from ..review.reviewer import review_run

                try:
                    st.reviewed = review_run(st.experiment_dir, st.review, every_trial=bool(config.getoption("review_all")))
                except Exception as exc:  # noqa: BLE001 - the run's results stand; the review can be made again from disk
                    self.report_error = (f"the review did not finish ({type(exc).__name__}: {str(exc)[:300]}); the report "
                                         f"stands without it; review again with `python -m pytest_webbench.report review "
                                         f"{st.experiment_dir}`")
                st.report = write_report(st.experiment_dir)
        except OSError as exc:  # never a report that stops silently: say why, and how to make it later
            if (message := disk_full_message(exc, st.experiment_dir)) is None:
                raise
            self.report_error = (f"{message}; or write the report alone with "
                                 f"`python -m pytest_webbench.report {st.experiment_dir}`")
            return
        if config.getoption("publish", None) == "braintrust":
            from ..report.publish import PublishError, publish_braintrust

            try:
                st.published = publish_braintrust(st.experiment_dir, config.getoption("publish_project", None))
            except PublishError as exc:  # the results are on disk; `python -m pytest_webbench.report --publish` retries
                st.published = str(exc)

    def pytest_unconfigure(self, config) -> None:
        if self.plan_dir is not None:
            import shutil

            shutil.rmtree(self.plan_dir, ignore_errors=True)
        if self.st.lock_fd is not None:  # the run is over: the next run (or resume) of the experiment may start
            os.close(self.st.lock_fd)
            self.st.lock_fd = None

    def pytest_terminal_summary(self, terminalreporter) -> None:
        report = self.st.report
        if self.report_error:
            terminalreporter.write_line(self.report_error, red=True)
        manifest = self.st.experiment_dir / "manifest.json"
        if terminalreporter.config.option.collectonly and manifest.exists():
            # planning claims the ID (the plan is written once, atomically): say so, and how to run it
            from ..results.claims import resume_command

            terminalreporter.write_line(
                f"webbench: planned experiment {self.st.options.experiment_id} ({manifest}); its ID is taken: run "
                f"this plan with `{resume_command(self.st.experiment_dir)}`, "
                "or plan a new one with another --experiment-id")
        if report is None:
            return
        from ..report.render import headline_lines, paired_lines

        terminalreporter.write_sep("=", "webbench")
        for line in headline_lines(report) + paired_lines(report):
            terminalreporter.write_line(line)
        for problem in self.job_problems:
            terminalreporter.write_line(f"harbor jobs: {problem}", yellow=True)
        for name, why in self.browsers_left.items():
            terminalreporter.write_line(f"NOT DELETED (may still be billed): Kernel browser {name}: {why}", red=True)
        terminalreporter.write_line(f"report: {self.st.experiment_dir / 'report.md'} (and report.html, report.json)")
        published = self.st.published
        if isinstance(published, str):
            terminalreporter.write_line(f"publish failed: {published}", red=True)
        elif published:
            for experiment in published:
                terminalreporter.write_line(f"published {experiment.name} ({experiment.rows} rows): {experiment.url}")


def _check_suite(st: WebbenchState) -> None:
    """The suite's hashes again, read afresh at the run's end, beside those the run planned with."""
    from ..results.records import read_manifest
    from ..results.run_notes import SuiteCheck, write_suite_check
    from ..design.suite import Suite

    before = read_manifest(st.experiment_dir).content_hashes
    write_suite_check(st.experiment_dir, SuiteCheck(before=before, after=Suite.content_hashes.func(st.suite)))


def _sweep_browsers(st: WebbenchState) -> dict[str, str]:
    """Every Kernel browser of this run still alive is deleted; what cannot be is kept on disk."""
    import asyncio

    from ..browsers.base import BackendError
    from ..browsers.kernel import sweep_run_browsers
    from ..results.run_notes import record_undeleted_browser

    try:
        return asyncio.run(sweep_run_browsers(st.experiment_dir, st.options.experiment_id))
    except BackendError as exc:
        name, why = f"{st.options.experiment_id}-*", f"the end-of-run sweep could not run: {exc}"
        record_undeleted_browser(st.experiment_dir, name, why)
        return {name: why}
