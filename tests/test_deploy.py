"""The recipes that run shards beyond one machine (deploy/): the Kubernetes manifests valid against
the Kubernetes API's own schema (kubernetes-validate), the image built by the same set-up script
as a fresh machine, and the CI matrix and the pods handing deploy/run-shard every setting it reads.
The commands themselves run here in tests/test_shard.py."""

from __future__ import annotations

import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
IMAGE_HOME = "/opt/pytest-webbench/"


def documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def by_name(kind: str, name: str) -> dict:
    return next(doc for path in MANIFESTS for doc in documents(path) if doc["kind"] == kind and doc["metadata"]["name"] == name)


def settings_read_by(script: Path) -> set[str]:
    """The environment variables a deploy script reads (its capitalised ${NAME...} and $NAME)."""
    return set(re.findall(r"\$\{?([A-Z][A-Z_]+)", script.read_text())) - {"PATH"}


# 1.29 is the first release with backoffLimitPerIndex on by default; then the newest the validator knows
@pytest.mark.parametrize("version", ["1.29", kubernetes_validate.latest_version()])
@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_each_kubernetes_manifest_validates_against_the_api_schema(manifest, version):
    for doc in documents(manifest):
        kubernetes_validate.validate(doc, version, strict=True)  # raises, naming the field, if not


def test_the_validator_refuses_a_field_the_api_does_not_have():
    job = by_name("Job", "webbench-shards")
    job["spec"]["completionMod"] = job["spec"].pop("completionMode")
    with pytest.raises(kubernetes_validate.ValidationError, match="completionMod"):
        kubernetes_validate.validate(job, "1.29", strict=True)


def test_the_indexed_job_runs_one_shard_per_completion_index():
    spec = by_name("Job", "webbench-shards")["spec"]
    assert spec["completionMode"] == "Indexed"
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert int(env["SHARD_COUNT"]) == spec["completions"] == spec["parallelism"]
    script = container["command"][-1]
    assert "SHARD=\"$shard/$SHARD_COUNT\"" in script and "shard=$((JOB_COMPLETION_INDEX + 1))" in script
    assert "exec /opt/pytest-webbench/deploy/run-shard" in script
    # every shard its own results folder on the shared volume: two claims of one ID in one folder would clash
    assert 'RESULTS_DIR="/results/$EXPERIMENT_ID/shard-$shard"' in script
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/results", "/dev/shm"}


def test_each_pod_gives_the_scripts_every_setting_they_read_and_no_key_in_plain_text():
    config = by_name("ConfigMap", "webbench-run")["data"]
    assert not any(name.endswith("_API_KEY") for name in config)
    shard_pod = by_name("Job", "webbench-shards")["spec"]["template"]["spec"]["containers"][0]
    given = set(config) | {e["name"] for e in shard_pod["env"]} | {"SHARD", "RESULTS_DIR"}  # the last two set by its command
    assert settings_read_by(DEPLOY / "run-shard") <= given
    assert {"configMapRef", "secretRef"} <= {key for ref in shard_pod["envFrom"] for key in ref}
    merge = by_name("Job", "webbench-merge")["spec"]["template"]["spec"]["containers"][0]
    assert "deploy/merge-shards \"/results/$EXPERIMENT_ID\" /results/merged \"$EXPERIMENT_ID\"" in merge["command"][-1]
    assert "secretRef" not in {key for ref in merge["envFrom"] for key in ref}  # the merge reads records only


def test_every_path_a_pod_runs_is_in_the_image():
    for path in MANIFESTS:
        for doc in documents(path):
            if doc["kind"] != "Job":
                continue
            for container in doc["spec"]["template"]["spec"]["containers"]:
                for used in re.findall(re.escape(IMAGE_HOME) + r"([\w./-]+)", " ".join(container["command"])):
                    if not used.startswith(".venv/"):  # made by the image's set-up
                        assert (ROOT / used).is_file(), f"{path.name}: {used}"


def test_the_image_is_set_up_by_the_fresh_machine_s_own_script():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    steps = [line.split(None, 1) for line in dockerfile.splitlines() if line and not line.startswith(("#", " "))]
    instructions = [step[0] for step in steps]
    assert steps[0][1].startswith("python:3.12-") and "bookworm" in steps[0][1]  # Debian (its chromium), Python 3.12
    assert instructions.count("RUN") == 1
    run = dockerfile.split("\nRUN ", 1)[1]
    assert run.startswith("WEBBENCH_PYTHON=python3.12 bash .ci/setup")  # the same steps as a CI machine's, no others
    assert f"WORKDIR {IMAGE_HOME.rstrip('/')}" in dockerfile and "COPY . ." in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".webbench", "results", "**/node_modules", ".env"} <= set(ignored)


def test_the_ci_matrix_runs_the_shard_and_merge_commands_tested_here():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "benchmark.yml").read_text())
    jobs = workflow["jobs"]
    shard = jobs["shard"]
    assert shard["strategy"]["fail-fast"] is False
    assert shard["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    (run,) = [s for s in shard["steps"] if "deploy/run-shard" in s.get("run", "")]
    assert run["env"]["SHARD"] == "${{ matrix.shard }}/${{ strategy.job-total }}"
    assert run["env"]["EXPERIMENT_ID"] == "${{ needs.plan.outputs.experiment_id }}"
    assert settings_read_by(DEPLOY / "run-shard") <= set(run["env"])
    upload = next(s for s in shard["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["if"] == "always()" and upload["with"]["path"] == f"{run['env']['RESULTS_DIR']}/"

    merge = jobs["merge"]
    assert set(merge["needs"]) == {"plan", "shard"} and merge["if"].startswith("always()")
    download = next(s for s in merge["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"]["pattern"] == upload["with"]["name"].replace("${{ matrix.shard }}", "*")
    (merged,) = [s for s in merge["steps"] if "deploy/merge-shards" in s.get("run", "")]
    assert merged["run"].split()[:3] == ["deploy/merge-shards", download["with"]["path"], "results"]
    assert {"resume", "shards"} <= set(workflow[True]["workflow_dispatch"]["inputs"])
    resume = jobs["resume"]
    assert resume["steps"][-2]["run"].count("--resume \"gh-$RUN_ID\"") == 1
    assert jobs["plan"]["steps"][0]["run"].count("experiment_id=gh-$RUN_ID") == 1  # the ID resume finds
