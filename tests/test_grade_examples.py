"""The ready-to-use examples of examples/grading/, checked as far as this machine allows.

No Slurm, Kubernetes or GitHub Actions here: each example's scripts are run by bash with the
scheduler's variables set as the scheduler sets them and a stand-in for Python that records
the command line; what they would run must be a command the grader's CLI accepts, with the
shard numbers covering 0 … N-1 once each. The merge steps run for real on shards' outputs.
The Kubernetes example's capabilities are tried with bubblewrap itself (``capsh`` keeps only
the container runtime's default capabilities plus those the Job adds); its seccomp and
AppArmor settings cannot be tried here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import grade
from helpers.grading import report, shards
from paths import ROOT

EXAMPLES = ROOT / "examples" / "grading"
SLURM = EXAMPLES / "slurm"
K8S = EXAMPLES / "kubernetes"
ACTIONS = EXAMPLES / "github-actions" / "grade.yml"

# The capabilities containerd and Docker give a container by default (moby's defaults).
RUNTIME_DEFAULT_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
                        "NET_BIND_SERVICE", "NET_RAW", "SYS_CHROOT", "MKNOD", "AUDIT_WRITE", "SETFCAP")


def _stub(folder: Path) -> Path:
    """A stand-in for Python that appends its arguments (one JSON list per call) to $ARGV_LOG."""
    folder.mkdir(parents=True, exist_ok=True)
    stub = folder / "python"
    stub.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "with open(os.environ['ARGV_LOG'], 'a') as f:\n"
                    "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n")
    stub.chmod(0o755)
    return stub


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _grader_args(call: list[str]) -> list[str]:
    assert call[:2] == ["-m", "helpers.grade"], call
    return call[2:]


def _bash(script: str | Path, cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    cmd = ["bash", str(script), *args] if isinstance(script, Path) else ["bash", "-c", script]
    return subprocess.run(cmd, cwd=cwd, env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True,
                          timeout=60)


def _shard_outputs(root: Path, count: int, students: list[str]) -> list[Path]:
    """Outputs of ``count`` shards of a class, as the graders write them (journal and shard.json)."""
    folders = []
    for i in range(count):
        out = root / f"shard-{i}"
        out.mkdir(parents=True)
        own = [s for s in students if shards.shard_of(s, "01_illustrated_self_attention", count) == i]
        with open(out / report.JOURNAL, "w") as f:
            for j, s in enumerate(own):
                f.write(report.json_line({"student": s, "notebook": "01_illustrated_self_attention",
                                          "status": "graded", "score": j, "max_score": 14, "exercises": [],
                                          "graded_at": "2025-01-01T10:00:00Z"}) + "\n")
        shards.write_record(out, shards.ShardSpec(i, count), len(students), len(own), 0, len(own), 0, True)
        folders.append(out)
    return folders


STUDENTS = [f"s{i:02d}" for i in range(12)]


# ----------------------------------------------------------------------------- Slurm


def test_every_example_shell_script_parses():
    scripts = [*SLURM.iterdir()]
    assert {p.name for p in scripts} >= {"grade-array.sbatch", "merge.sbatch", "submit.sh"}
    for script in scripts:
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, (script, proc.stderr)
        assert os.access(script, os.X_OK), f"{script} is not executable"


def test_slurm_array_tasks_run_the_shards_of_one_class(tmp_path):
    stub = _stub(tmp_path / "bin")
    log = tmp_path / "argv.jsonl"
    array = re.search(r"^#SBATCH --array=0-(\d+)$", (SLURM / "grade-array.sbatch").read_text(), re.M)
    count = int(array.group(1)) + 1
    for task in range(count):  # what Slurm sets for each task of --array=0-(N-1)
        env = {"SUBMISSIONS": "/class", "PYTHON": str(stub), "ARGV_LOG": str(log), "SLURM_ARRAY_TASK_ID": str(task),
               "SLURM_ARRAY_TASK_COUNT": str(count), "SLURM_CPUS_PER_TASK": "2"}
        proc = _bash(SLURM / "grade-array.sbatch", tmp_path, env)
        assert proc.returncode == 0, proc.stderr
    seen = []
    for call in _calls(log):
        command, args = grade.parse(_grader_args(call))
        assert command == "grade" and args.submissions == Path("/class") and args.jobs == 2
        seen.append((args.shard.index, args.shard.count, args.out))
    assert sorted(seen) == [(i, count, Path(f"grades/shard-{i}")) for i in range(count)]
    # one task run again on its own (--array=3: an array of one) still grades shard 3 of N
    log.unlink()
    env.update(SLURM_ARRAY_TASK_ID="3", SLURM_ARRAY_TASK_COUNT="1", SHARDS=str(count))
    assert _bash(SLURM / "grade-array.sbatch", tmp_path, env).returncode == 0
    (call,) = _calls(log)
    assert grade.parse(_grader_args(call))[1].shard == shards.ShardSpec(3, count)
    # without the class folder it refuses to start (rather than grading nothing)
    proc = _bash(SLURM / "grade-array.sbatch", tmp_path, {"PYTHON": str(stub), "ARGV_LOG": str(log)})
    assert proc.returncode != 0 and "SUBMISSIONS" in proc.stderr


def test_slurm_submit_queues_the_array_then_the_merge_after_it(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/usr/bin/env bash\necho \"$*\" >> \"$SBATCH_LOG\"\n"
                                    "n=$(wc -l < \"$SBATCH_LOG\"); echo \"$((4000 + n));cluster\"\n")
    (bin_dir / "sbatch").chmod(0o755)
    log = tmp_path / "sbatch.log"
    env = {"SUBMISSIONS": "/class", "SHARDS": "5", "SBATCH_LOG": str(log),
           "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(SLURM / "submit.sh")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    first, second = log.read_text().splitlines()
    assert "--array=0-4" in first and first.endswith("grade-array.sbatch")
    assert "--dependency=afterany:4001" in second and second.endswith("merge.sbatch")


def test_slurm_merge_script_merges_the_shards_for_real(tmp_path):
    _shard_outputs(tmp_path / "grades", 3, STUDENTS)
    env = {"PYTHON": sys.executable, "HOME": str(tmp_path)}
    proc = _bash(SLURM / "merge.sbatch", tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    lines = (tmp_path / "grades" / "merged" / report.GRADES).read_text().splitlines()
    assert [line.split(",")[0] for line in lines[1:]] == STUDENTS
    shutil.rmtree(tmp_path / "grades" / "shard-1")  # a shard lost: the merge says so and fails
    proc = _bash(SLURM / "merge.sbatch", tmp_path, env)
    assert proc.returncode == 1 and "1/3" in proc.stderr and "missing" in proc.stderr


# ----------------------------------------------------------------------------- Kubernetes


def _k8s(name: str) -> dict:
    (doc,) = [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]
    return doc


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in a container's command and args."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env[m.group(1)], text)


def test_kubernetes_indexed_job_runs_each_shard_once():
    job = _k8s("grade-job.yaml")
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["template"]["spec"]["restartPolicy"] == "Never"
    (container,) = spec["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert container["command"] == ["python", "-m", "helpers.grade"]
    seen = []
    for index in range(spec["completions"]):
        args = [_expand(a, {"JOB_COMPLETION_INDEX": str(index)}) for a in container["args"]]
        command, parsed = grade.parse(args)
        assert command == "grade"
        seen.append((parsed.shard.index, parsed.shard.count, parsed.out))
    count = spec["completions"]
    assert spec["parallelism"] == count
    assert sorted(seen) == [(i, count, Path(f"/data/grades/shard-{i}")) for i in range(count)]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/data" in mounts


def test_kubernetes_merge_job_merges_the_shards_for_real(tmp_path):
    job = _k8s("merge-job.yaml")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"][:2] == ["sh", "-c"]
    line = container["command"][2].replace("exec python", f"exec {shlex.quote(sys.executable)}")
    _shard_outputs(tmp_path / "grades", 4, STUDENTS)
    proc = _bash(line.replace("/data", str(tmp_path)), tmp_path, {"HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert len((tmp_path / "grades" / "merged" / report.GRADES).read_text().splitlines()) == 1 + len(STUDENTS)


def test_kubernetes_image_is_built_from_the_repository_with_bubblewrap():
    text = (K8S / "Dockerfile").read_text()
    assert re.search(r"apt-get install .*bubblewrap", text)
    for line in re.findall(r"^COPY (.+)$", text, re.M):
        *sources, _ = line.split()
        for source in sources:
            assert (ROOT / source).exists(), f"the Dockerfile copies {source}, which the repository lacks"
    assert "-r requirements.txt" in text and "python:3.11" in text
    ignored = (K8S / "Dockerfile.dockerignore").read_text().split()
    assert ".venv" in ignored and "solutions" in ignored


def _capsh_keep(keep: list[str], command: str) -> subprocess.CompletedProcess:
    """Run ``command`` with only the capabilities ``keep`` in the bounding and effective sets."""
    every = subprocess.run(["capsh", "--print"], capture_output=True, text=True).stdout
    bounding = re.search(r"Bounding set =(\S*)", every).group(1).split(",")
    wanted = {f"cap_{c.lower()}" for c in keep}
    drop = ",".join(c for c in bounding if c and c not in wanted)
    return subprocess.run(["capsh", f"--drop={drop}", "--", "-c", command], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("capsh") is None or shutil.which("bwrap") is None,
                    reason="needs root, capsh and bwrap to try the Job's capabilities")
def test_the_capabilities_the_job_grants_are_those_the_sandbox_needs():
    (container,) = _k8s("grade-job.yaml")["spec"]["template"]["spec"]["containers"]
    security = container["securityContext"]
    assert security["runAsUser"] == 0 and not security.get("privileged")
    added = security["capabilities"]["add"]
    probe = f"{shlex.quote(sys.executable)} -c 'from helpers.grading.sandbox import probe_bwrap; print(probe_bwrap())'"
    if _capsh_keep(list(RUNTIME_DEFAULT_CAPS) + ["SYS_ADMIN", "NET_ADMIN", "SYS_PTRACE"], probe).stdout.strip() != \
            "None":
        pytest.skip("bubblewrap cannot build its sandbox here even with more capabilities")
    with_job = _capsh_keep([*RUNTIME_DEFAULT_CAPS, *added], probe)
    assert with_job.stdout.strip() == "None", with_job.stdout + with_job.stderr
    for missing in added:  # each capability it adds is needed: without it, no sandbox
        fewer = _capsh_keep([*RUNTIME_DEFAULT_CAPS, *(c for c in added if c != missing)], probe)
        assert fewer.stdout.strip() != "None", f"{missing} is not needed"


# ----------------------------------------------------------------------------- GitHub Actions


def test_github_actions_matrix_runs_each_shard_once_then_merges(tmp_path):
    workflow = yaml.safe_load(ACTIONS.read_text())
    assert set(workflow) >= {"name", "jobs"} and "workflow_dispatch" in workflow[True]  # YAML 1.1 reads `on` as True
    jobs = workflow["jobs"]
    matrix = jobs["grade"]["strategy"]["matrix"]["shard"]
    (step,) = [s for s in jobs["grade"]["steps"] if "helpers.grade" in str(s.get("run", ""))]
    venv = tmp_path / ".venv" / "bin"
    _stub(venv)
    log = tmp_path / "argv.jsonl"
    seen = []
    for shard in matrix:
        env = {k: str(v).replace("${{ inputs.submissions }}", "submissions").replace("${{ matrix.shard }}", str(shard))
               for k, v in step["env"].items()}
        proc = _bash(step["run"], tmp_path, {**env, "ARGV_LOG": str(log)})
        assert proc.returncode == 0, proc.stderr
    for call in _calls(log):
        command, args = grade.parse(_grader_args(call))
        assert command == "grade" and args.submissions == Path("submissions")
        seen.append((args.shard.index, args.shard.count, args.out))
    count = len(matrix)
    assert sorted(seen) == [(i, count, Path(f"grades/shard-{i}")) for i in range(count)]
    # the merge job waits for every shard, also failed ones, and merges what the artifacts hold
    merge = jobs["merge"]
    assert merge["needs"] == "grade" and merge["if"] == "always()"
    download = next(s for s in merge["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact"))
    upload = next(s for s in jobs["grade"]["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "grades/shard-${{ matrix.shard }}" and upload["if"] == "always()"
    (run,) = [s["run"] for s in merge["steps"] if "helpers.grade merge" in str(s.get("run", ""))]
    merge_line = next(line for line in run.splitlines() if "helpers.grade merge" in line)
    root = tmp_path / "merge"
    artifacts = root / download["with"]["path"]
    for i, folder in enumerate(_shard_outputs(tmp_path / "shards", count, STUDENTS)):
        shutil.copytree(folder, artifacts / f"grades-shard-{i}")  # download-artifact: one folder per artifact
    proc = _bash(merge_line.replace(".venv/bin/python", shlex.quote(sys.executable)), root, {"HOME": str(root)})
    assert proc.returncode == 0, proc.stderr
    assert len((root / "grades" / "merged" / report.GRADES).read_text().splitlines()) == 1 + len(STUDENTS)
