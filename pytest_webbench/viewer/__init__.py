"""The trial viewer: one self-contained page per trial and per pair, built from what the run left on
disk (the record, the proxy and model logs, the agent's trajectory, the browser trace), linked from
report.html. `timeline.py` reads a trial into one ordered list of events, `frames.py` reads
Playwright's trace.zip, `pages.py` renders and writes the pages."""
