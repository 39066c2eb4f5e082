"""What a run's tasks need that the run itself may lack: a judge for the tasks an LLM grades, a
reference solution for each task the reference runner replays. Planning asks for the whole suite
(configure.py); with -k, the controller asks again for the tasks selected (controller.py)."""

from __future__ import annotations

import os


def missing_judge(options, tasks) -> str | None:
    """Tasks graded by the judge, in a run that has none: the message, or None."""
    from ..grading.grade import needs_judge

    judged = [t.name for t in tasks if needs_judge(t.meta)]
    if not judged:
        return None
    return (f"{len(judged)} task(s) ({', '.join(judged[:3])}{' ...' if len(judged) > 3 else ''}) are graded by an LLM "
            f"judge, and --runner {options.runner} runs no model: give --judge-model PROVIDER/MODEL (and "
            "--judge-base-url for an endpoint of your own), or deselect them with -k")


def missing_solution(options, tasks) -> str | None:
    """The reference runner replays each task's solution: a task without one is refused at planning,
    not errored in every trial. The message, or None."""
    if options.runner != "reference":
        return None
    for task in tasks:  # os.path on strings: pathlib cost ~10 ms for 1,000 tasks (benchmarks/collection_scale.py)
        if not os.path.isfile(f"{task.path}/solution/reference.py"):
            return (f"--runner reference: {task.path / 'solution' / 'reference.py'}: missing; the reference runner replays "
                    "each task's solution (write one, deselect the task, or choose another runner)")
    return None
