"""The project's container image, as far as a task can tell: the files the Dockerfile
copies in, its working directory and its environment, laid out under a local folder.

Tasks then run as subprocesses of this project's Python environment (which holds the
same TFX, Beam and TensorFlow the image's base holds) in that folder, with the image's
``ENV`` settings and nothing inherited from the caller but ``PATH`` and the locale. So a
package the Dockerfile forgets to copy, or an environment variable only set on the
developer's shell, fails the rehearsal as it would fail on Vertex. Each task gets a fresh
copy (``Container.fresh``): its own files, home and temporary directory. What cannot be
rehearsed: the image's Python (3.10) and its exact installed packages, and a task writing
to an absolute path such as ``/tmp`` directly (it shares this machine's).
"""

from __future__ import annotations

import dataclasses
import glob
import os
import shlex
import shutil
import sys

from pipeline.rehearsal.job import JobError

_PASSED_THROUGH = ("LANG", "LC_ALL", "TZ")


@dataclasses.dataclass(frozen=True)
class Image:
    """What the Dockerfile gives every container: files, working directory, variables."""

    copies: tuple[tuple[str, str], ...]
    workdir: str = "/"
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_dockerfile(cls, path: str) -> Image:
        copies, workdir, env = [], "/", []
        for instruction, args in _instructions(path):
            if instruction == "WORKDIR":
                workdir = os.path.join(workdir, args)
            elif instruction in ("COPY", "ADD"):
                words = [w for w in shlex.split(args) if not w.startswith("--")]
                if len(words) < 2:
                    raise JobError(f"{path}: cannot read {instruction} {args}")
                *sources, target = words
                target = os.path.join(workdir, target)
                copies.extend((source, target if len(sources) == 1 else os.path.join(target, "")) for source in sources)
            elif instruction == "ENV":
                env.extend(_env_pairs(args))
        return cls(tuple(copies), workdir, tuple(env))

    def stage(self, context_dir: str, image_root: str) -> Container:
        """Copies the build context's files where the image has them, under ``image_root``."""
        if os.path.exists(image_root):
            shutil.rmtree(image_root)
        for source, target in self.copies:
            matches = sorted(glob.glob(os.path.join(context_dir, source)))
            if not matches:
                raise JobError(f"the Dockerfile copies {source!r}, which is not in {context_dir}")
            for found in matches:
                local = _under(image_root, target)
                if os.path.isdir(found):
                    shutil.copytree(found, local, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    os.makedirs(local if target.endswith("/") else os.path.dirname(local), exist_ok=True)
                    shutil.copy2(found, local)
        workdir = _under(image_root, self.workdir)
        os.makedirs(workdir, exist_ok=True)
        env = {k: os.environ[k] for k in _PASSED_THROUGH if k in os.environ}
        # `python` in a task's command is this project's interpreter.
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "/usr/bin:/bin")])
        for key, value in self.env:
            env[key] = os.pathsep.join(_under(image_root, p) if p.startswith("/") else p for p in value.split(":"))
        return Container(workdir=workdir, env=env, image_root=image_root)


@dataclasses.dataclass(frozen=True)
class Container:
    workdir: str
    env: dict[str, str]
    image_root: str

    def fresh(self, folder: str, extra_env: dict[str, str] | None = None) -> Container:
        """A new container of this image under ``folder``, as Vertex starts one per task: its
        own copy of the image's files, an empty home and temporary directory, and nothing of
        what an earlier container wrote."""
        image_root = os.path.join(folder, "image")
        shutil.copytree(self.image_root, image_root, symlinks=True)
        home, tmp = os.path.join(folder, "home"), os.path.join(folder, "tmp")
        os.makedirs(home)
        os.makedirs(tmp)
        env = {k: v.replace(self.image_root, image_root) for k, v in self.env.items()}
        env.update(extra_env or {}, HOME=home, TMPDIR=tmp)
        return Container(self.workdir.replace(self.image_root, image_root, 1), env, image_root)

    def written(self, reference: Container) -> list[str]:
        """Files this container wrote outside gs:// (paths relative to its folder): what a
        fresh container of ``reference``'s image would not have. Python's bytecode caches
        are left out."""
        folder = os.path.dirname(self.image_root)
        found = []
        for top, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                path = os.path.join(top, name)
                relative = os.path.relpath(path, folder)
                inside = os.path.relpath(path, self.image_root)
                if inside.startswith("..") or not os.path.exists(os.path.join(reference.image_root, inside)):
                    found.append(relative)
        return sorted(found)


@dataclasses.dataclass
class Containers:
    """A fresh container per task and per training replica, under ``folder``. A task's is
    removed when its process ends (``discard``, which notes what it wrote outside gs://);
    the replicas' go with the folder when the rehearsal ends."""

    image: Container
    folder: str
    extra_env: dict[str, str] = dataclasses.field(default_factory=dict)

    def new(self, name: str) -> Container:
        return self.image.fresh(os.path.join(self.folder, name), self.extra_env)

    def discard(self, container: Container) -> list[str]:
        written = container.written(self.image)
        shutil.rmtree(os.path.dirname(container.image_root), ignore_errors=True)
        return written

    def for_replica(self, replica) -> tuple[dict[str, str], str]:
        """A Vertex AI Training replica's container (``cloud.jobs.JobService``'s replica_setup)."""
        container = self.new(os.path.join("training", f"{replica.job_id}-{replica.name}"))
        return container.env, container.workdir


def _under(root: str, container_path: str) -> str:
    return os.path.join(root, container_path.lstrip("/"))


def _instructions(path: str):
    """(INSTRUCTION, arguments) per Dockerfile instruction, continuation lines joined."""
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, args = line.partition(" ")
            yield instruction.upper(), args.strip()


def _env_pairs(args: str) -> list[tuple[str, str]]:
    words = shlex.split(args)
    if words and "=" not in words[0]:  # legacy form: ENV KEY value
        return [(words[0], " ".join(words[1:]))]
    return [tuple(w.split("=", 1)) for w in words]
