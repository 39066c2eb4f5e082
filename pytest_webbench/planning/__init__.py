"""Planning and steering a run: reading the options (options.py), setting a run up (configure.py)
and its state (state.py), the manifest it records (manifest.py), resuming (resume.py), the xdist
pair scheduler (scheduling.py), sequential stopping (stopping.py), and the controller's hooks that
plan and report (controller.py)."""
