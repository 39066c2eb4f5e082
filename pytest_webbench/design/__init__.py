"""The experiment's vocabulary, used by every other part: the suite and its tasks (suite.py), the
arms each trial runs in (arms.py), and trial ids, pairs and their balanced order (pairing.py)."""
