"""The project's image, built here with podman from the ``Dockerfile`` and ``uv.lock`` (its
Debian base made with ``debootstrap``), and checked against the lock.

    python -m rehearsal.image            # what `make image` runs
    python -m rehearsal.image --gpu      # the GPU variant (the lock's `gpu` group)
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib

from rehearsal import podman
from runtime.terminal import say

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_IMAGE = "localhost/pipeline:rehearsal"
BASE_IMAGE = "localhost/pipeline-base:debian-bookworm"
DEBIAN_RELEASE, DEBIAN_MIRROR = "bookworm", "http://deb.debian.org/debian"
# What the public debian image sets, which an imported file system lacks.
BASE_CHANGES = ("ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 'CMD ["bash"]')
# Where a TLS-intercepting proxy's certificate authorities are found on the building
# machine, in this order; passed as the build secret `ca`, never stored in the image.
CA_BUNDLE_CANDIDATES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
GPU_GROUP = "gpu"
BUILD_LOCK = "/var/tmp/pipeline-image-build.lock"
# Python's own packaging tools: an image may hold them where the lock does not list them.
NOT_LOCKED = frozenset({"pip", "setuptools", "wheel"})
# The image's entrypoint, Beam's SDK harness boot, and the Go module it is built from.
BOOT = "/opt/apache/beam/boot"
BEAM_GO_MODULE = "github.com/apache/beam/sdks/v2"


class ImageError(RuntimeError):
    """The image cannot be built, or differs from the lock; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class Build:
    image: str
    seconds: float
    size_bytes: int
    layers_built: int  # steps podman ran rather than took from its cache


def ensure_base(progress=say) -> None:
    """Makes ``BASE_IMAGE`` with debootstrap unless podman already has it (once per machine)."""
    if podman.image_exists(BASE_IMAGE):
        return
    if os.geteuid() != 0:
        raise ImageError(f"making the base image {BASE_IMAGE} needs root (debootstrap): run `make image` as root")
    progress(f"Making the base image {BASE_IMAGE} (debootstrap {DEBIAN_RELEASE}, once per machine) ...")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="debootstrap-", dir="/var/tmp") as root:
        subprocess.run(
            ["debootstrap", "--variant=minbase", DEBIAN_RELEASE, root, DEBIAN_MIRROR],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        changes = [a for change in BASE_CHANGES for a in ("--change", change)]
        subprocess.run(
            podman.command("import", *changes, "-", BASE_IMAGE),
            stdin=tar.stdout,
            env=podman.environment(),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        tar.stdout.close()
        if tar.wait() != 0:
            raise ImageError(f"could not archive the debootstrap of {DEBIAN_RELEASE} in {root}")
    progress(f"Made the base image in {time.monotonic() - started:.1f} s")


def ca_bundle() -> str | None:
    for candidate in CA_BUNDLE_CANDIDATES:
        path = os.environ.get(candidate, "") if not candidate.startswith("/") else candidate
        if path and os.path.isfile(path):
            return path
    return None


def build_command(image: str, context: str, gpu: bool, ca: str | None) -> list[str]:
    args = ["build", "--from", BASE_IMAGE, "--network", "host", "--layers", "--tag", image]
    args += ["--file", os.path.join(context, "Dockerfile")]
    if ca:
        args += ["--secret", f"id=ca,src={ca}"]
    if gpu:
        args += ["--build-arg", f"LOCK_GROUPS={GPU_GROUP}"]
    return podman.command(*args, context)


def build(image: str = DEFAULT_IMAGE, context: str = REPO_ROOT, gpu: bool = False, log=None, progress=say) -> Build:
    """Builds ``image`` from ``context``; podman's output goes to ``log`` (a file; None: the terminal)."""
    if gpu and GPU_GROUP not in locked_groups(context):
        raise ImageError(
            f"no GPU variant: {context}/pyproject.toml has no `{GPU_GROUP}` dependency group, so the lock holds no "
            "CUDA wheels to build it from"
        )
    with open(BUILD_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time on this machine (test workers, make)
        ensure_base(progress)
        started = time.monotonic()
        command = build_command(image, context, gpu, ca_bundle())
        process = subprocess.Popen(
            command, env=podman.environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        lines = []
        for line in process.stdout:  # as podman goes: a cold build takes minutes
            lines.append(line)
            (log or sys.stdout).write(line)
        returncode = process.wait()
    output = "".join(lines)
    if returncode != 0:
        tail = "".join(lines[-20:])
        raise ImageError(f"podman build of {image} failed (exit code {returncode}):\n{tail}")
    seconds = time.monotonic() - started
    size = int(podman.inspect_image(image).get("Size", 0))
    return Build(image, seconds, size, steps_run(output))


def steps_run(output: str) -> int:
    """The steps of a build that podman ran rather than took from its cache, read from its
    output: each ``--> <id>`` that ends a step and repeats no ``--> Using cache <id>``. Stages
    build side by side, so a step's lines need not follow its STEP line; the ``--> <id>``
    after COMMIT is the image's."""
    cached, run, committing = [], 0, False
    for line in output.splitlines():
        if line.startswith("--> Using cache "):
            cached.append(line.split()[-1])
        elif re.fullmatch(r"--> [0-9a-f]+", line.strip()):
            short = line.split()[1]
            run += not committing and not any(full.startswith(short) for full in cached)
            committing = False
        else:
            committing = re.match(r"(\[\d+/\d+\] )?COMMIT ", line) is not None
    return run


def locked_groups(context: str = REPO_ROOT) -> set[str]:
    with open(os.path.join(context, "pyproject.toml"), "rb") as f:
        return set(tomllib.load(f).get("dependency-groups", {}))


def python_in(image: str, code: str) -> str:
    """What ``code`` prints, run by the image's ``python`` in place of its entrypoint (boot)."""
    return podman.run("run", "--rm", "--network", "none", "--entrypoint", "python", image, "-c", code).stdout


def installed_distributions(image: str) -> dict[str, str]:
    """Every distribution installed in the image's Python: normalized name -> version."""
    code = (
        "import importlib.metadata as m, json\n"
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    return {normalize(name): version for name, version in json.loads(python_in(image, code)).items()}


def boot_beam_version(image: str) -> str | None:
    """The Beam version the image's boot was built from, as Go records it in the binary (what
    ``go version -m`` prints as its ``mod`` line), or None without a boot built from Beam's module."""
    code = (
        "import os, re\n"
        f"data = open({BOOT!r}, 'rb').read() if os.path.exists({BOOT!r}) else b''\n"
        f"found = re.search(rb'\\nmod\\t{re.escape(BEAM_GO_MODULE)}\\tv(\\S+)\\t', data)\n"
        "print(found.group(1).decode() if found else '')"
    )
    return python_in(image, code).strip() or None


def marker_environment(image: str) -> dict[str, str]:
    """The image's PEP 508 marker values (its Python, platform and machine)."""
    code = "import json; from packaging.markers import default_environment as e; print(json.dumps(e()))"
    return json.loads(python_in(image, code))


def locked_distributions(environment: dict[str, str], groups: tuple[str, ...] = (), context: str = REPO_ROOT) -> dict:
    """What ``uv sync --frozen --no-dev`` installs from the lock for a machine with these markers."""
    from packaging.markers import Marker

    uv = os.path.join(REPO_ROOT, ".tools", "bin", "uv")  # the Makefile's; any context's lock reads alike
    args = [uv if os.path.exists(uv) else "uv", "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project"]
    args += [a for g in groups for a in ("--group", g)]
    text = subprocess.run(args, cwd=context, capture_output=True, text=True, check=True).stdout
    found = {}
    for line in text.splitlines():
        requirement, _, marker = line.partition(";")
        if not requirement.strip() or requirement.lstrip().startswith(("#", "-")):
            continue
        if marker.strip() and not Marker(marker.strip()).evaluate(environment):
            continue
        name, _, version = requirement.strip().partition("==")
        found[normalize(name.split("[")[0])] = version.strip()
    return found


def differences_from_lock(image: str, groups: tuple[str, ...] = (), context: str = REPO_ROOT) -> list[str]:
    """One line per distribution the image lacks, adds or holds at another version than the lock,
    and one if its boot is not built from the locked Beam."""
    installed = installed_distributions(image)
    locked = locked_distributions(marker_environment(image), groups, context)
    lines = [f"{name}: locked {locked[name]}, not installed" for name in sorted(locked.keys() - installed.keys())]
    extra = sorted(installed.keys() - locked.keys() - NOT_LOCKED)
    lines += [f"{name}: installed {installed[name]}, not in the lock" for name in extra]
    lines += [
        f"{name}: locked {locked[name]}, installed {installed[name]}"
        for name in sorted(locked.keys() & installed.keys())
        if locked[name] != installed[name]
    ]
    booted = boot_beam_version(image)
    if booted != locked.get("apache-beam"):
        lines.append(f"{BOOT}: built from Beam {booted}, locked apache-beam {locked.get('apache-beam')}")
    return lines


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rehearsal.image", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default=DEFAULT_IMAGE, help=f"the image's name (default {DEFAULT_IMAGE})")
    parser.add_argument("--gpu", action="store_true", help=f"the GPU variant: adds the lock's `{GPU_GROUP}` group")
    parser.add_argument("--context", default=REPO_ROOT, help="the build context (default: this project)")
    args = parser.parse_args(argv)
    try:
        result = build(args.tag, args.context, args.gpu)
        groups = (GPU_GROUP,) if args.gpu else ()
        differences = differences_from_lock(args.tag, groups, args.context)
    except (ImageError, podman.PodmanError, subprocess.CalledProcessError, FileNotFoundError) as err:
        say(f"error: {err}", err=True)
        return 1
    how = "from podman's cache" if result.layers_built == 0 else f"{result.layers_built} steps run"
    say(f"Built {result.image} in {result.seconds:.1f} s ({how}); {result.size_bytes / 1e9:.2f} GB")
    if differences:
        say(f"error: {result.image} differs from uv.lock:\n  " + "\n  ".join(differences), err=True)
        return 1
    count = len(installed_distributions(args.tag))
    say(f"Its Python packages are uv.lock's ({count} distributions); its {BOOT} is the locked Beam's.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
