"""The trial viewer: one page per trial and per pair, built from what the run left on disk (the
record, the proxy and model logs, the agent's trajectory, the browser trace), linked from
report.html; each links its pictures on disk, and `__main__` exports one self-contained. `timeline.py` reads a trial into one ordered list of events, `frames.py` reads
Playwright's trace.zip, `pages.py` renders and writes the pages."""
