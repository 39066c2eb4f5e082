"""The run's statistics: pure functions over counts and paired samples (the report's load no scipy:
distributions.py; sequential.py's tables use numpy and scipy, loaded only by --sequential), each
checked against a published or hand-computed value (tests/test_stats*.py) and each interval's
coverage and test's error rate measured by simulation (benchmarks/stats_calibration.py).

- distributions.py: the normal, binomial, hypergeometric, chi-square and t functions they use
- binomial.py: Clopper-Pearson and Wilson, exact McNemar and its power, sign test, pass@k, Newcombe and Fisher (unpaired)
- suite.py: this suite's tasks as run (the report's primary estimand): the mean rate and paired difference over tasks, and its MDE
- pooled.py: tasks like these (a t interval over the tasks' differences, paired or between runs)
- stratified.py: Cochran-Mantel-Haenszel over tasks, Holm's adjustment
- sequential.py: the per-task stopping rule of sequential runs

`ASSUMPTIONS` holds what each assumes, in the words the report prints beside its numbers.
"""

from .binomial import (
    Interval, fisher_exact_p, mcnemar_exact, mcnemar_mde, mcnemar_power, newcombe_difference, pass_at_k, pass_hat_k,
    sign_test, timed, wilson, clopper_pearson,
)
from .pooled import TaskMeanEffect, mde_task_mean, task_mean_difference, task_mean_interval, task_mean_rate
from .stratified import CMHResult, cmh_test, holm

# measured exactly by benchmarks/stats_conditions.py --only newcombe (docs/statistics.md)
NEWCOMBE_COVERAGE = ("Newcombe's interval (Wilson's limits) is approximate: its exact coverage falls to 83-88% where one "
                     "rate is near 0 and the other near 1 (3-20 trials per arm), and to 93.8% with one rate in both.")

ASSUMPTIONS = {
    "rate": "Pass-rate intervals per arm and task are exact Clopper-Pearson 95% intervals: attempts are independent "
            "Bernoulli trials with one pass rate; never under nominal coverage (Wilson's fell to 90% at 3 attempts near "
            "the ceiling). The headline is an arm's mean rate over the headline tasks, every task weighted equally (not "
            "the share of trials passed), with two intervals: for these tasks (the suite's own tasks, fixed; only the "
            "attempts are random: a Wald interval on the tasks' variances, each from (passes + 1.5) / (trials + 3)), "
            "and for tasks like these (the tasks a sample of a population: a t interval over the tasks, which covers "
            "less than 95% at 3-10 tasks with skewed rates). Coverage of each against its own estimand is measured in "
            "benchmarks/stats_estimands.py.",
    "mcnemar": "Exact McNemar: pairs are independent; under no effect a discordant pair is equally likely to favour either arm.",
    "sign": "Sign test on speedups: pairs where both arms passed, ties dropped; under no effect either arm is faster with probability 1/2.",
    "pooled_paired": "Pooled paired effect: the estimand is the mean over this suite's tasks of each task's true "
                     "pass-rate difference, every task weighted equally however many pairs it got; the tasks are fixed "
                     "and only the attempts are random (pairs independent across attempts). Its interval and test take "
                     "the variance within each task (Bonett and Price's adjusted discordant shares, +1/2 each), never "
                     "the tasks' spread. Beside it, labelled, the interval for tasks like these (a t over the tasks' "
                     "differences, floored within each task; tasks an independent sample of the ones one cares about). "
                     "On a sequentially stopped run both are conditional on the stopping (their coverage there is "
                     "measured, not promised).",
    "mde": "Minimum detectable effect of the test for these tasks: the mean difference d with d = (z(0.975) + z(0.8)) x "
           "SE(d), where SE(d) is the standard error an effect moving every task by d would have, each task's share of "
           "discordant pairs taken as at least d (a task cannot move by more than its discordant share); approximate, "
           "and a fixed-sample figure: its simulated power at the printed figure is in docs/statistics.md.",
    "sensitivity": "Sensitivity: the same pooled interval with every errored pair's errored trial counted as a "
                   "failure, beside the one that leaves errored pairs out; if they disagree, the faults matter. Leaving "
                   "errored pairs out is unbiased only when faults are unrelated to what the trial would have done: "
                   "where they struck 30% of one arm's failures or passes, the pooled interval for these tasks covered 80.4-83.0% "
                   "at 20 pairs per task in simulation; the sensitivity line mends faults on failures, not on passes "
                   "(docs/statistics.md).",
    "playwright": "Playwright arm vs control: unpaired (different trials, not pairs); per task Fisher's exact test "
                  "(never over its level) and Newcombe's interval, pooled over tasks the Cochran-Mantel-Haenszel test "
                  "and the Mantel-Haenszel risk difference (Sato variance). " + NEWCOMBE_COVERAGE + " The Mantel-Haenszel "
                  "interval assumes one difference common to the tasks: where it differs between tasks it covered as "
                  "little as 92.5% in simulation (docs/statistics.md); the CMH p-value beside it holds its level.",
    "cmh": "Cochran-Mantel-Haenszel: within each task the two arms (or runs) are independent binomial samples; "
           "the test assumes no effect in every task; the risk difference estimates an effect common to the tasks.",
    "holm": "Multiplicity, in one place. Controlled (Holm, family-wise, under any dependence): within each table, "
            "its per-task tests over the tasks: the McNemar tests, the sign tests, the Fisher tests (playwright vs "
            "control), and in a sequential run the pass/fail and the speed decisions' anytime p-values; a sequential "
            "task's effect is printed only where it survives that adjustment. Not controlled across families: a fixed "
            "run tests McNemar and the sign test at 0.05 each (a sequential run splits alpha between its two "
            "endpoints), and the pooled effect, the format-only pool and the playwright-vs-control comparison are "
            "each their own test at 0.05. Read a raw p-value below 0.05 among many tasks as a lead, not a finding.",
    "sequential": "Sequential run: each task's pass/fail and speed walks are each tested at alpha / 2 (Bonferroni), so "
                  "the chance of any false claim about a task is at most alpha; the boundary is exact for a look after "
                  "every pair up to the cap, on attempts 1..k in order whatever order pairs ended in. Its anytime "
                  "p-value is valid at any stop and is what Holm over tasks adjusts.",
    "compare": "Two runs compared: unpaired (different runs share no pairs). The headline difference is the mean over "
               "the tasks both ran of each task's rate difference, every task weighted equally, with two intervals: for "
               "these tasks (the tasks fixed, only the attempts random: a Wald interval and z test on each run's "
               "within-task variances, each from (passes + 1.5) / (trials + 3)), and for tasks like these (a t interval "
               "over the tasks' differences, floored within each task; tasks independent draws); per arm and task "
               "Fisher's exact test and Newcombe's interval, and over the tasks both ran the Cochran-Mantel-Haenszel "
               "test. Coverage of each headline interval against its own estimand is measured in "
               "benchmarks/stats_estimands.py: the interval for these tasks covers 93.5% or more from 5 tasks on, and as "
               "little as 90.7% at 2 tasks (its test's false-positive rate up to 9.3% there). " + NEWCOMBE_COVERAGE,
    "pass_k": "pass@k / pass^k: unbiased estimates from the attempts made (Chen et al. 2021), attempts exchangeable within a task.",
}

__all__ = [
    "ASSUMPTIONS", "CMHResult", "Interval", "cmh_test", "fisher_exact_p", "holm", "mcnemar_exact",
    "mcnemar_mde", "mcnemar_power", "newcombe_difference", "pass_at_k", "pass_hat_k", "sign_test", "timed", "wilson", "clopper_pearson",
    "TaskMeanEffect", "mde_task_mean", "task_mean_difference", "task_mean_interval", "task_mean_rate",
]
