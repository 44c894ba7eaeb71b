"""The project's image: built from uv.lock (its packages are the lock's), its dependency
layers reused when only the code changes, nothing of the building machine baked in, its
entrypoint Beam's boot built at the lock's Beam version and serving Beam's SDK workers (as
Flink's worker pool and as Dataflow's workers start it); and the podman commands the
rehearsal runs its containers with."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import zipfile

import pytest
import yaml

from pipeline.config import REPO_ROOT
from rehearsal import image, podman
from rehearsal.containers import STAND_IN_FILES, Containers, left_behind

CODE = ("models", "pipeline", "components", "runtime")


def _in_image(tag: str, program: str, *args: str) -> str:
    """What ``program`` prints in a container of the image, run in place of its entrypoint."""
    return podman.run("run", "--rm", "--network", "none", "--entrypoint", program, tag, *args).stdout


def test_the_images_python_packages_are_the_locks(rehearsal_image):
    assert image.differences_from_lock(rehearsal_image) == []
    installed = image.installed_distributions(rehearsal_image)
    assert {"tfx", "tensorflow", "apache-beam", "tensorflow-transform"} <= installed.keys()
    assert "pytest" not in installed and "ruff" not in installed  # the dev group stays out


def test_the_lock_comparison_names_what_differs(rehearsal_image, monkeypatch):
    locked = image.locked_distributions(image.marker_environment(rehearsal_image))
    altered = {**locked, "tfx": "0.0.1", "a-package-nobody-installed": "1.0"}
    del altered["apache-beam"]
    monkeypatch.setattr(image, "locked_distributions", lambda *args: altered)
    differences = image.differences_from_lock(rehearsal_image)
    assert "a-package-nobody-installed: locked 1.0, not installed" in differences
    assert f"apache-beam: installed {locked['apache-beam']}, not in the lock" in differences
    assert f"tfx: locked 0.0.1, installed {locked['tfx']}" in differences
    beam = locked["apache-beam"]
    assert f"{image.BOOT}: built from Beam {beam}, locked apache-beam None" in differences
    assert len(differences) == 4


def test_the_image_runs_python_3_11_keras_2_and_the_projects_code(rehearsal_image):
    code = "import sys, os, models; print(sys.version_info[:2], os.environ['TF_USE_LEGACY_KERAS'], models.__file__)"
    out = _in_image(rehearsal_image, "python", "-c", code).split()
    assert out == ["(3,", "11)", "1", "/pipeline/models/__init__.py"]


def test_the_images_processes_collect_their_first_generation_less_often_unless_speedups_are_off(rehearsal_image):
    from runtime.speedups import ENV_VAR, OFF_VALUES

    code = "import gc; print(*gc.get_threshold())"
    # Without site's start-up (-S), no .pth line runs: Python's own thresholds.
    python_default = _in_image(rehearsal_image, "python", "-S", "-c", code).split()
    assert _in_image(rehearsal_image, "python", "-c", code).split() == ["100000", *python_default[1:]]
    assert python_default[0] != "100000"
    for off in OFF_VALUES:
        options = ["run", "--rm", "--network", "none", "--env", f"{ENV_VAR}={off.upper()}", "--entrypoint", "python"]
        assert podman.run(*options, rehearsal_image, "-c", code).stdout.split() == python_default, off


def test_nothing_of_the_building_machine_is_in_the_image(rehearsal_image):
    assert _in_image(rehearsal_image, "ls", "/pipeline").split() == ["components", "models", "pipeline", "runtime"]
    # No build secret (the CA bundle), no uv cache, no manifest or uv left from the build.
    leftovers = "find /run/secrets /root/.cache /build /tmp -type f 2>/dev/null; true"
    assert _in_image(rehearsal_image, "sh", "-c", leftovers) == ""
    # The compiler was removed in the step that used it; Go, which built boot, stayed in its stage.
    assert _in_image(rehearsal_image, "sh", "-c", "command -v g++ || echo none").strip() == "none"
    no_go = "command -v go; ls -d /usr/lib/go-* /root/go /root/.cache/go-build 2>/dev/null; true"
    assert _in_image(rehearsal_image, "sh", "-c", no_go) == ""


def test_a_change_to_the_code_rebuilds_the_code_layers_alone(rehearsal_image, tmp_path):
    context = tmp_path / "context"
    context.mkdir()
    for name in ("Dockerfile", "pyproject.toml", "uv.lock"):
        shutil.copy(REPO_ROOT / name, context / name)
    for package in CODE:
        shutil.copytree(REPO_ROOT / package, context / package, ignore=shutil.ignore_patterns("__pycache__"))
    with open(context / "models" / "features.py", "a") as f:
        f.write("\n# a change to the code\n")
    tag = "localhost/pipeline:layer-test"
    try:
        with open(tmp_path / "build.log", "w") as log:
            build = image.build(tag, str(context), log=log)
        before = podman.inspect_image(rehearsal_image)["RootFS"]["Layers"]
        after = podman.inspect_image(tag)["RootFS"]["Layers"]
    finally:
        podman.run("rmi", "--force", tag, check=False)
    assert build.layers_built <= len(CODE) + 1  # from the changed COPY on
    shared = len([1 for a, b in zip(before, after, strict=False) if a == b])
    assert len(before) == len(after) and shared >= len(before) - len(CODE)
    assert before[:2] == after[:2]  # the base and the locked environment


# A build's output where one stage's cached COPY waits on another stage: its cache line comes
# after the next stage's STEP lines.
INTERLEAVED = """\
[3/4] STEP 4/5: COPY --from=manifest /beam-version /build/beam-version
[4/4] STEP 1/16: FROM b867628bf6db AS image
[4/4] STEP 2/16: ARG UV_VERSION=0.13.8
--> Using cache df22cf75d2a6fd063ed6b1704c23bfad87ac41f7e5c16595b648546ce40bf088
--> df22cf75d2a
[2/4] STEP 4/4: RUN python3.11 -c "print(1)" > /beam-version
--> Using cache b8f5e18e30916274c039fb5097f9a1c744ee99b401aafc703cd1cbfde151a720
--> b8f5e18e309
--> Using cache a067047b52708de8909d461c75f6e5c3fc2c4d7951af7d892c033036e1cee0a7
--> a067047b527
[4/4] STEP 12/16: COPY models/ /pipeline/models/
--> c9e0f10ec50
[4/4] STEP 13/16: COPY pipeline/ /pipeline/pipeline/
--> 4acbf9ab4f9
[4/4] STEP 16/16: ENV PYTHONPATH=/pipeline
[4/4] COMMIT localhost/pipeline:layer-test
--> 689e14d2632
Successfully tagged localhost/pipeline:layer-test
"""


def test_the_steps_run_are_those_not_taken_from_the_cache_in_whatever_order_stages_print():
    assert image.steps_run(INTERLEAVED) == 2  # the two COPYs of the code; the COMMIT is the image
    models_cached = INTERLEAVED.replace("--> c9e0f10ec50", "--> Using cache c9e0f10ec50aa\n--> c9e0f10ec50")
    assert image.steps_run(models_cached) == 1


def test_the_gpu_variant_is_refused_without_cuda_wheels_in_the_lock(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[dependency-groups]\ndev = ["pytest"]\n')
    with pytest.raises(image.ImageError, match="no `gpu` dependency group, so the lock holds no CUDA wheels"):
        image.build("localhost/x:gpu", str(tmp_path), gpu=True)


def test_the_build_passes_the_ca_bundle_as_a_secret_and_the_base_with_from(monkeypatch):
    monkeypatch.setattr(podman, "available", lambda: True)
    command = image.build_command("localhost/p:1", "/ctx", gpu=True, ca="/etc/ca.pem")
    assert command[:2] == ["podman", "build"]
    assert command[command.index("--from") + 1] == image.BASE_IMAGE
    assert command[command.index("--secret") + 1] == "id=ca,src=/etc/ca.pem"
    assert command[command.index("--build-arg") + 1] == "LOCK_GROUPS=gpu"
    assert command[-1] == "/ctx" and "--secret" not in image.build_command("localhost/p:1", "/ctx", False, None)


def test_a_containers_command_replaces_the_entrypoint_and_mounts_only_the_stand_ins_files(tmp_path, monkeypatch):
    monkeypatch.setattr(podman, "available", lambda: True)
    authority = tmp_path / "ca.pem"
    authority.write_text("x")
    containers = Containers("job-1")
    containers.reach({"SSL_CERT_FILE": str(authority), "REQUESTS_CA_BUNDLE": str(authority), "https_proxy": "http://a"})
    argv = containers.command("Trainer", "img:1", ["python", "-m", "x"], ["--a", "b"], {"TF_CONFIG": "{}"})
    assert argv[argv.index("--entrypoint") + 1] == json.dumps(["python", "-m", "x"])
    assert argv[-3:] == ["img:1", "--a", "b"]
    volumes = [argv[i + 1] for i, a in enumerate(argv) if a == "--volume"]
    assert volumes == [f"{authority}:{STAND_IN_FILES}/0-ca.pem:ro"]
    env = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--env")
    assert env == {
        "SSL_CERT_FILE": f"{STAND_IN_FILES}/0-ca.pem",
        "REQUESTS_CA_BUNDLE": f"{STAND_IN_FILES}/0-ca.pem",
        "https_proxy": "http://a",
        "TF_CONFIG": "{}",
    }
    assert argv[argv.index("--name") + 1] == "pipeline-rehearsal-job-1-Trainer"
    assert argv[argv.index("--network") + 1] == "host" and argv[argv.index("--pull") + 1] == "never"


def test_what_a_container_left_behind_is_its_files_without_bytecode():
    changed = ["/tmp/x", "/root/state.txt", "/pipeline/models/__pycache__/a.cpython-311.pyc", "/pipeline/a.pyc"]
    changed += [f"{STAND_IN_FILES}/0-ca.pem"]
    assert left_behind(changed) == ["/root/state.txt", "/tmp/x"]


def _locked_version(name: str) -> str:
    lock = tomllib.loads((REPO_ROOT / "uv.lock").read_text())
    (version,) = [p["version"] for p in lock["package"] if p["name"] == name]
    return version


def test_the_dockerfile_builds_from_a_public_dated_debian_12_with_the_locks_python():
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    first, *later = re.findall(r"^FROM (\S+)", dockerfile, re.M)
    assert re.fullmatch(r"docker\.io/library/debian:bookworm-\d{8}-slim", first)
    assert set(later) == {"base"}  # the one image pulled: Beam's boot is built, not copied from Beam's image
    requires = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11,<3.12" and "python3.11 " in dockerfile
    assert "uv sync --frozen --no-dev" in dockerfile


def test_the_images_entrypoint_is_beams_boot_built_at_the_locks_beam_version(rehearsal_image):
    """As in Beam's own SDK images: Dataflow's and Flink's SDK workers start the entrypoint."""
    assert podman.inspect_image(rehearsal_image)["Config"]["Entrypoint"] == [image.BOOT]
    assert image.boot_beam_version(rehearsal_image) == _locked_version("apache-beam")
    started = podman.run("run", "--rm", "--network", "none", rehearsal_image, check=False)
    assert started.returncode == 1 and "No id provided." in started.stderr  # boot's own check of its flags
    # boot checks Beam is installed with `python -m pip show` and installs staged packages with pip.
    assert "from /opt/venv/lib/python3.11/site-packages/pip " in _in_image(rehearsal_image, "pip", "--version")


def test_boot_ships_the_licenses_of_beam_and_of_every_go_module_linked_in(rehearsal_image):
    code = (
        "import os, re\n"
        f"data = open({image.BOOT!r}, 'rb').read()\n"
        "for module in sorted(set(re.findall(rb'\\ndep\\t(\\S+)\\t', data))):\n"
        "    folder = '/opt/apache/beam/third_party_licenses/golang/' + module.decode()\n"
        "    print(module.decode(), len(os.listdir(folder)) if os.path.isdir(folder) else 0)"
    )
    linked = dict(line.split() for line in image.python_in(rehearsal_image, code).splitlines())
    assert "google.golang.org/grpc" in linked and "google.golang.org/protobuf" in linked
    assert [module for module, files in linked.items() if int(files) == 0] == []
    assert "Apache License" in _in_image(rehearsal_image, "head", "-c", "200", "/opt/apache/beam/LICENSE")


def test_cloud_build_builds_the_dockerfile_with_buildkit_and_pushes_the_image():
    config = yaml.safe_load((REPO_ROOT / "cloudbuild.yaml").read_text())
    (step,) = config["steps"]
    assert step["name"] == "gcr.io/cloud-builders/docker" and "DOCKER_BUILDKIT=1" in step["env"]
    assert step["args"][0] == "build" and step["args"][-1] == "."
    assert step["args"][step["args"].index("--tag") + 1] == "${_IMAGE}" == config["images"][0]
    assert step["args"][step["args"].index("--build-arg") + 1] == "LOCK_GROUPS=${_GROUPS}"


@pytest.mark.parametrize("with_secret", [True, False])
def test_the_ca_secret_is_used_when_given_and_optional(rehearsal_image, tmp_path, with_secret):
    """The Dockerfile's own line that picks the `ca` secret up, in a build with and without it
    (a cloud build gives none)."""
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    (pick_up,) = set(re.findall(r"if \[ -s /run/secrets/ca \]; then export [^;]*; fi;", dockerfile))
    step = f'RUN --mount=type=secret,id=ca {pick_up} echo "certificates: ${{SSL_CERT_FILE:-the image\'s own}}"'
    (tmp_path / "Dockerfile").write_text(f"FROM {image.BASE_IMAGE}\n{step}\n")
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    secret = ["--secret", f"id=ca,src={tmp_path / 'ca.pem'}"] if with_secret else []
    tag = "localhost/pipeline:secret-test"
    try:
        out = podman.run("build", "--no-cache", "--network", "none", *secret, "--tag", tag, str(tmp_path)).stdout
    finally:
        podman.run("rmi", "--force", tag, check=False)
    assert ("certificates: /run/secrets/ca" if with_secret else "certificates: the image's own") in out


# Beam's worker pool always listens on this port (boot passes it to worker_pool_main); one
# pool at a time on the machine.
WORKER_POOL_PORT = 50000
WORKER_POOL_LOCK = "/var/tmp/beam-worker-pool-50000.lock"
PACKAGE = "bootprobe_pkg"
# `docker` for Beam's DOCKER environment, answered by podman (the script says how).
PODMAN_DOCKER = REPO_ROOT / "tests" / "support" / "podman_docker"
# A portable job run from this machine's environment (the job service embedded in it) whose
# SDK workers run in containers of the image, with a staged --extra_package that boot installs
# in the worker. Arguments: the wheel, the environment's options (JSON) and the command line
# expected as the worker container's process 1 (JSON: the program, then its flags' names,
# sorted). The assertion runs in the worker, so a failure fails the job.
PIPELINE = f"""
import json, sys
import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

def in_worker(x):
    import {PACKAGE}
    with open("/proc/1/cmdline") as f:
        program, *flags = f.read().split("\\0")[:-1]
    return x * 10, {PACKAGE}.__file__, (program, *sorted(flag.split("=")[0] for flag in flags))

wheel, environment, process_1 = sys.argv[1], json.loads(sys.argv[2]), tuple(json.loads(sys.argv[3]))
options = PipelineOptions(["--runner=PortableRunner", "--job_endpoint=embed", *environment, "--extra_package=" + wheel])
installed = "/opt/venv/lib/python3.11/site-packages/{PACKAGE}/__init__.py"
with beam.Pipeline(options=options) as p:
    expected = [(n * 10, installed, process_1) for n in (1, 2, 3)]
    assert_that(p | beam.Create([1, 2, 3]) | beam.Map(in_worker), equal_to(expected))
print("the workers ran the staged package")
"""


def _run_job(tmp_path, environment: list[str], process_1: list[str], env: dict[str, str] | None = None) -> None:
    """PIPELINE run with these environment options; it fails unless every element was
    processed by a worker whose container's process 1 is ``process_1`` and that imported the
    staged package from the image's venv."""
    command = [sys.executable, "-c", PIPELINE, _wheel(tmp_path), json.dumps(environment), json.dumps(process_1)]
    # A worker that cannot start leaves the job waiting for it: the timeout ends the wait.
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the workers ran the staged package" in done.stdout


def _wheel(folder, name: str = PACKAGE, version: str = "0.1") -> str:
    """A pure-Python wheel of one module, nothing else (nothing to build or download)."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{path},sha256={_digest(text)},{len(text.encode())}" for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name_in_wheel, text in files.items():
            wheel.writestr(name_in_wheel, text)
    return str(path)


def _digest(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def boot_worker_pool(rehearsal_image):
    """The image run as `boot --worker_pool`, as a Flink cluster's SDK worker sidecar runs it."""
    with open(WORKER_POOL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _listening(WORKER_POOL_PORT):
            pytest.fail(f"port {WORKER_POOL_PORT}, where boot's worker pool listens, is taken by another process")
        name = f"pipeline-boot-worker-pool-{time.time_ns()}"
        podman.run("run", "-d", "--network", "host", "--name", name, rehearsal_image, "--worker_pool")
        try:
            for _ in range(120):  # Beam's import in the container takes a few seconds
                running = podman.run("container", "inspect", "--format", "{{.State.Running}}", name).stdout.strip()
                if running != "true" or _listening(WORKER_POOL_PORT):
                    break
                time.sleep(0.5)
            assert _listening(WORKER_POOL_PORT), podman.run("logs", name, check=False).stderr[-2000:]
            yield name
        finally:
            podman.run("rm", "--force", name, check=False)


@pytest.mark.slow
def test_boot_serves_beams_sdk_workers_and_installs_a_staged_package(boot_worker_pool, tmp_path):
    """Flink's EXTERNAL environment: the pool (process 1) starts a boot per worker."""
    environment = ["--environment_type=EXTERNAL", f"--environment_config=localhost:{WORKER_POOL_PORT}"]
    _run_job(tmp_path, environment, [image.BOOT, "--worker_pool"])


@pytest.mark.slow
def test_boot_started_with_dataflows_worker_flags_installs_a_staged_package(rehearsal_image, tmp_path):
    """Dataflow's worker VMs start the SDK container with boot's worker flags, no worker pool;
    Beam's DOCKER environment starts it the same way (through PODMAN_DOCKER's `docker`), one
    container per worker: boot fetches the staged package from the job's artifact service,
    installs it and starts the SDK harness."""
    environment = ["--environment_type=DOCKER", f"--environment_config={rehearsal_image}"]
    flags = ["--artifact_endpoint", "--control_endpoint", "--id", "--logging_endpoint", "--provision_endpoint"]
    label = f"test-{time.time_ns()}"
    # Beam mounts the machine's application-default credentials into the container when there
    # are some: none here.
    no_credentials = str(tmp_path / "no-credentials.json")
    path = f"{PODMAN_DOCKER}:{os.environ['PATH']}"
    env = {**os.environ, "PATH": path, "GOOGLE_APPLICATION_CREDENTIALS": no_credentials, "PODMAN_DOCKER_LABEL": label}
    try:
        _run_job(tmp_path, environment, [image.BOOT, *flags], env)
    finally:
        left = podman.run("ps", "--all", "--quiet", "--filter", f"label=podman-docker={label}").stdout.split()
        if left:
            podman.run("rm", "--force", *left, check=False)
    assert left == []  # Beam's end of the job removed its containers
