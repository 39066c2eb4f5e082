"""The run's statistics: pure functions over counts and paired samples (no scipy: distributions.py), each
checked against a published or hand-computed value (tests/test_stats*.py) and each interval's
coverage and test's error rate measured by simulation (benchmarks/stats_calibration.py).

- distributions.py: the normal, binomial, hypergeometric, chi-square and t functions they use
- binomial.py: Wilson, exact McNemar and its power, sign test, pass@k, Newcombe and Fisher (unpaired)
- pooled.py: the pooled paired effect over tasks (design-effect Tango score interval) and its MDE
- stratified.py: Cochran-Mantel-Haenszel over tasks, Holm's adjustment
- sequential.py: the per-task stopping rule of sequential runs

`ASSUMPTIONS` holds what each assumes, in the words the report prints beside its numbers.
"""

from .binomial import (
    Interval, fisher_exact_p, mcnemar_exact, mcnemar_mde, mcnemar_power, newcombe_difference, pass_at_k, pass_hat_k,
    sign_test, wilson,
)
from .pooled import PooledPaired, mde_clustered, mde_clustered_from_data, newcombe_paired, pooled_paired_interval, tango_interval
from .stratified import CMHResult, cmh_test, holm

ASSUMPTIONS = {
    "wilson": "Wilson 95% interval: attempts are independent Bernoulli trials with one pass rate per arm and task.",
    "mcnemar": "Exact McNemar: pairs are independent; under no effect a discordant pair is equally likely to favour either arm.",
    "sign": "Sign test on speedups: pairs where both arms passed, ties dropped; under no effect either arm is faster with probability 1/2.",
    "pooled_paired": "Pooled paired effect: tasks independent, pairs within a task may be correlated and task "
                     "effects may differ; Tango's score interval on the pooled pairs, widened by the design "
                     "effect estimated from the task totals (never below 1) and read on a t with tasks - 1 "
                     "degrees of freedom. Never zero-width; conservative with few tasks (98-100% coverage at 5 tasks).",
    "mde": "Minimum detectable effect of the pooled test: 80% power at alpha 0.05 under the same clustered model "
           "(the design effect as the test uses it, t with tasks - 1 degrees of freedom), discordance as observed.",
    "sensitivity": "Sensitivity: the same pooled interval with every errored pair's errored trial counted as a "
                   "failure, beside the one that leaves errored pairs out; if they disagree, the faults matter.",
    "playwright": "Playwright arm vs control: unpaired (different trials, not pairs); per task Fisher's exact test "
                  "and Newcombe's interval, pooled over tasks the Cochran-Mantel-Haenszel test and the "
                  "Mantel-Haenszel risk difference (Sato variance).",
    "cmh": "Cochran-Mantel-Haenszel: within each task the two arms (or runs) are independent binomial samples; "
           "the test assumes no effect in every task; the risk difference estimates an effect common to the tasks.",
    "holm": "Per-task p-values are shown raw and Holm-adjusted over the tasks of the table (family-wise error "
            "under any dependence); read a raw p-value below 0.05 among many tasks as a lead, not a finding.",
    "compare": "Two runs compared: unpaired (different runs share no pairs); per arm and task Fisher's exact test "
               "and Newcombe's interval, and over the tasks both ran the Cochran-Mantel-Haenszel test.",
    "pass_k": "pass@k / pass^k: unbiased estimates from the attempts made (Chen et al. 2021), attempts exchangeable within a task.",
}

__all__ = [
    "ASSUMPTIONS", "CMHResult", "Interval", "PooledPaired", "cmh_test", "fisher_exact_p", "holm", "mcnemar_exact",
    "mcnemar_mde", "mcnemar_power", "mde_clustered", "mde_clustered_from_data", "newcombe_difference",
    "newcombe_paired", "pass_at_k", "pass_hat_k", "pooled_paired_interval", "sign_test", "tango_interval", "wilson",
]
