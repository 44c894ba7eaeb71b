"""The project's image: built from uv.lock (its packages are the lock's), its dependency
layers reused when only the code changes, nothing of the building machine baked in; and
the podman commands the rehearsal runs its containers with."""

from __future__ import annotations

import json
import re
import shutil
import tomllib

import pytest
import yaml

from pipeline.config import REPO_ROOT
from rehearsal import image, podman
from rehearsal.containers import STAND_IN_FILES, Containers, left_behind

CODE = ("models", "pipeline", "components", "runtime")


def _in_image(tag: str, *command: str) -> str:
    return podman.run("run", "--rm", "--network", "none", tag, *command).stdout


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
    assert len(differences) == 3


def test_the_image_runs_python_3_11_keras_2_and_the_projects_code(rehearsal_image):
    code = "import sys, os, models; print(sys.version_info[:2], os.environ['TF_USE_LEGACY_KERAS'], models.__file__)"
    out = _in_image(rehearsal_image, "python", "-c", code).split()
    assert out == ["(3,", "11)", "1", "/pipeline/models/__init__.py"]


def test_nothing_of_the_building_machine_is_in_the_image(rehearsal_image):
    assert _in_image(rehearsal_image, "ls", "/pipeline").split() == ["components", "models", "pipeline", "runtime"]
    # No build secret (the CA bundle), no uv cache, no manifest or uv left from the build.
    leftovers = "find /run/secrets /root/.cache /build /tmp -type f 2>/dev/null; true"
    assert _in_image(rehearsal_image, "sh", "-c", leftovers) == ""
    # The compiler was removed in the step that used it.
    assert _in_image(rehearsal_image, "sh", "-c", "command -v g++ || echo none").strip() == "none"


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
    first = re.search(r"^FROM (\S+)", dockerfile, re.M).group(1)
    assert re.fullmatch(r"docker\.io/library/debian:bookworm-\d{8}-slim", first)
    requires = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11,<3.12" and "python3.11 " in dockerfile
    assert "uv sync --frozen --no-dev" in dockerfile


def test_the_cloud_image_adds_beams_sdk_harness_of_the_locked_beam_and_python():
    """Dataflow's workers start /opt/apache/beam/boot; the stage `make image` builds here stops before it."""
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)(?: AS (\S+))?$", dockerfile, re.M)
    assert (f"docker.io/apache/beam_python3.11_sdk:{_locked_version('apache-beam')}", "beam-sdk") in stages
    assert stages[-1] == (image.TARGET, "")  # the last stage: the image, plus...
    last = dockerfile[dockerfile.rindex("\nFROM ") :]
    assert "COPY --from=beam-sdk /opt/apache/beam /opt/apache/beam" in last
    assert 'ENTRYPOINT ["/opt/apache/beam/boot"]' in last


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
