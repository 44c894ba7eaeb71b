"""Podman as this project drives it: its settings from the project's own ``containers.conf``
(runc, the caller's resource limits), and the few commands the image build and the
rehearsal need. Podman runs containers without a daemon, as root or not; Debian's package
(``apt-get install podman runc``) is what ``make image`` installs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence

CONTAINERS_CONF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "containers.conf")


class PodmanError(RuntimeError):
    """Podman is missing, or one of its commands failed; the message says which and why."""


def available() -> bool:
    return shutil.which("podman") is not None


def environment() -> dict[str, str]:
    """The caller's environment with the project's podman settings."""
    return {**os.environ, "CONTAINERS_CONF": CONTAINERS_CONF}


def command(*args: str) -> list[str]:
    if not available():
        raise PodmanError("podman is not installed: `make image` installs it (Debian's podman and runc)")
    return ["podman", *args]


def run(*args: str, check: bool = True, timeout: float | None = None) -> subprocess.CompletedProcess:
    """A podman command whose output is read (not a container's run: see ``Popen`` for those)."""
    process = subprocess.run(
        command(*args), env=environment(), capture_output=True, text=True, check=False, timeout=timeout
    )
    if check and process.returncode != 0:
        raise PodmanError(f"podman {' '.join(args[:3])} ... failed ({process.returncode}): {process.stderr.strip()}")
    return process


def image_exists(image: str) -> bool:
    return run("image", "exists", image, check=False).returncode == 0


def inspect_image(image: str) -> dict:
    return json.loads(run("image", "inspect", image).stdout)[0]


def changed_files(container: str) -> list[str]:
    """Files (not directories) a stopped container added or changed in its own file system:
    ``podman diff``, each path looked at in the container's mounted file system."""
    lines = run("container", "diff", container).stdout.splitlines()
    paths = [line.split(" ", 1)[1] for line in lines if line[:2] in ("A ", "C ")]
    mounted = run("container", "mount", container, check=False)
    if mounted.returncode != 0:  # not root: directories cannot be told apart, keep every path
        return paths
    try:
        root = mounted.stdout.strip()
        return [p for p in paths if not os.path.isdir(os.path.join(root, p.lstrip("/")))]
    finally:
        run("container", "unmount", container, check=False)


def remove(names: Sequence[str]) -> None:
    if names:
        run("rm", "--force", "--ignore", *names, check=False)


def remove_labelled(label: str) -> None:
    """Every container carrying ``label`` (``key=value``), running or not."""
    found = run("ps", "--all", "--quiet", "--filter", f"label={label}", check=False).stdout.split()
    remove(found)
