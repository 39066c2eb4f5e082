"""The review of a run's trials (`--review`): a reader of the records on disk that asks a reviewer
model, through the model gateway, what happened in each trial worth reading and whether the agent
kept to its arm's rules. A reading aid beside the verdicts, never an input to one.

- account.py: the harness's own account of one trial, bounded, as the reviewer reads it
- records.py: what a review leaves on disk (`reviews/`), and reading it back
- reviewer.py: choosing the trials, calling the model on a route of its own, writing the findings
- prompts/: the reviewer's prompts, as data
"""
