"""Browser backends: where a trial's browser runs and how the harness and the agent's code reach it.

`base.py` is the protocol every backend keeps; `local.py` (with `driver.js`, `pod.py` and `sealed/`)
runs Debian's Chromium on this machine, each trial's in walls of its own; `kernel.py` runs Kernel's
cloud browsers; `mcp_server.py` offers Kernel's tool surface over the local backend."""
