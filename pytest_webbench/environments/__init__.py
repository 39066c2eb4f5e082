"""Where agents run: Harbor environments of our own (host.py, loaded by Harbor through its import
path), each agent command sealed in namespaces (seal.py, seal_init.py; one seal a trial,
sealed_shell.py), and copying a trial's files out without trusting them (files.py)."""
