"""Running one trial: the services a pytest process shares (services.py, on ../service_loop.py), the
trial's fixtures (fixtures.py), its browser session, proxy route and Harbor run, and the one test
(bench.py) that runs the agent, grades it and records the trial."""
