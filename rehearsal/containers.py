"""Fresh podman containers of the project's image for rehearsed tasks and training replicas, as
Vertex starts one per task and one per replica: nothing of this machine's environment or files
but the stand-ins' certificate authority and credentials; what each leaves behind is recorded.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence

from rehearsal import podman

LABEL = "pipeline-rehearsal"
# Where the stand-ins' files (certificate authority, credentials) appear inside a container.
STAND_IN_FILES = "/etc/rehearsal"
# Entries of `podman diff` that say nothing about what a task left behind: bytecode caches,
# and the stand-ins' files mounted into every container.
_NOT_LEFT_BEHIND = re.compile(rf"(^|/)__pycache__(/|$)|\.pyc$|^{re.escape(STAND_IN_FILES)}/")


class ImageMissingError(RuntimeError):
    """The compiled spec names an image podman does not have."""


@dataclasses.dataclass
class Containers:
    """The containers of one rehearsed job, named and labelled after it."""

    job_id: str
    _mounts: dict[str, str] = dataclasses.field(default_factory=dict)
    _env: dict[str, str] = dataclasses.field(default_factory=dict)

    def reach(self, stand_in_env: Mapping[str, str]) -> None:
        """Gives every later container the stand-ins' variables; the files they name (given
        with this machine's paths) are mounted read-only and the variables name them inside."""
        for key, value in stand_in_env.items():
            if os.path.isabs(value) and os.path.isfile(value):
                inside = self._mounts.setdefault(
                    value, f"{STAND_IN_FILES}/{len(self._mounts)}-{os.path.basename(value)}"
                )
                self._env[key] = inside
            else:
                self._env[key] = value

    def name(self, suffix: str) -> str:
        return re.sub(r"[^a-zA-Z0-9_.-]", "-", f"{LABEL}-{self.job_id}-{suffix}")

    def command(
        self,
        suffix: str,
        image: str,
        command: Sequence[str],
        args: Sequence[str] = (),
        env: Mapping[str, str] = (),
        hosts: Mapping[str, str] = (),
    ) -> list[str]:
        """The ``podman run`` of one container: ``command`` replaces the image's entrypoint;
        ``hosts``: names the container resolves (name -> address)."""
        if not command:
            raise ValueError(f"{suffix}: no command to run (a rehearsal runs commands, not an image's entrypoint)")
        options = ["run", "--name", self.name(suffix), "--label", f"{LABEL}={self.job_id}", "--network", "host"]
        options += ["--pull", "never", "--stop-timeout", "10", "--entrypoint", json.dumps(list(command))]
        for name, address in dict(hosts).items():
            options += ["--add-host", f"{name}:{address}"]
        for host, inside in self._mounts.items():
            options += ["--volume", f"{host}:{inside}:ro"]
        for key, value in {**self._env, **dict(env)}.items():
            options += ["--env", f"{key}={value}"]
        return podman.command(*options, image, *args)

    def run(
        self, suffix: str, image: str, command: Sequence[str], args: Sequence[str], log_file
    ) -> tuple[int, list[str]]:
        """Runs one task's container to its end, output to ``log_file``; its exit code and
        the files it wrote (removed with it). The image is checked up front
        (``runner.refuse_unrehearsable``)."""
        name = self.name(suffix)
        podman.remove([name])  # a container of an interrupted earlier attempt
        try:
            process = subprocess.run(
                self.command(suffix, image, command, args),
                env=podman.environment(),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                check=False,
            )
            written = left_behind(podman.changed_files(name)) if process.returncode != 125 else []
        finally:
            podman.remove([name])
        return process.returncode, written

    # A cloud.jobs.ReplicaLauncher: each Vertex AI Training replica, and each TFJob replica
    # (cloud/kubernetes.py), in its own container.

    def environment(self, replica) -> dict[str, str]:
        return dict(self._env)

    def launch(self, replica, image: str, command: list[str], env: dict[str, str], hosts: Mapping[str, str] = ()):
        from rehearsal.cloud.jobs import Launch

        suffix = _replica_suffix(replica)
        podman.remove([self.name(suffix)])
        return Launch(self.command(suffix, image, command[:1], command[1:], env, hosts), podman.environment())

    def remove(self, replica) -> None:
        podman.remove([self.name(_replica_suffix(replica))])

    def remove_all(self) -> None:
        """Every container of this job still there (a replica whose client was killed, say)."""
        podman.remove_labelled(f"{LABEL}={self.job_id}")


def _replica_suffix(replica) -> str:
    return f"training-{replica.job_id}-{replica.name}"


def check_image(image: str) -> None:
    if not podman.image_exists(image):
        raise ImageMissingError(
            f"the compiled job runs its tasks in the image {image}, which podman does not have here: build it with "
            f"`make image IMAGE={image}` (python -m rehearsal.image --tag {image})"
        )


def left_behind(changed: Sequence[str]) -> list[str]:
    """The files a container wrote, Python's bytecode caches and the stand-ins' mounts left out."""
    return sorted(p for p in changed if not _NOT_LEFT_BEHIND.search(p))
