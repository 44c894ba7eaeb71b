"""The speedups in Vertex tasks: the taxi job rehearsed in the project's image as built
(speedups on, the image's default) and in the same image with ``ENV PIPELINE_SPEEDUPS=0``,
alternated, then each task's median seconds and the ratio.

    python -m bench.image_speedups [--repeats 3] [--problem data/taxi]

The image must be built (``make image``); the second one is derived from it here, so the
two differ in that variable alone. Each rehearsal runs in a fresh root (no cache).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from pipeline.config import DEFAULT_PROBLEM_DIR, REPO_ROOT
from rehearsal import image, podman

WITHOUT = "localhost/pipeline:no-speedups"
BUCKET = "gs://speedups-bench"


def derive_without_speedups(base: str, tag: str = WITHOUT) -> None:
    with tempfile.TemporaryDirectory() as context:
        with open(os.path.join(context, "Dockerfile"), "w") as f:
            f.write(f"FROM {base}\nENV PIPELINE_SPEEDUPS=0\n")
        podman.run("build", "--tag", tag, context)


def rehearse(tag: str, problem: str, root: str) -> dict[str, float]:
    """One rehearsal of the problem's compiled job in ``tag``: seconds per task, and in all."""
    argv = [
        sys.executable,
        "kubeflow_runner.py",
        "--rehearse",
        "--problem",
        problem,
        "--image",
        tag,
        "--output-root",
        f"{BUCKET}/out",
        "--data-root",
        f"{BUCKET}/data",
        "--rehearse-gcs",
        f"{BUCKET}/data={problem}",
        "--rehearsal-root",
        root,
        "--output-file",
        os.path.join(root, "job.json"),
    ]
    done = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the rehearsal in {tag} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    (job,) = os.listdir(os.path.join(root, "logs"))
    with open(os.path.join(root, "logs", job, "rehearsal.json")) as f:
        record = json.load(f)
    seconds = {t["name"]: t["seconds"] for t in record["tasks"]}
    seconds["all tasks"] = sum(seconds.values())
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.image_speedups", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--problem", default=DEFAULT_PROBLEM_DIR)
    parser.add_argument("--image", default=image.DEFAULT_IMAGE, help="the image as built (speedups on)")
    args = parser.parse_args(argv)
    derive_without_speedups(args.image)
    runs: dict[str, list[dict[str, float]]] = {args.image: [], WITHOUT: []}
    with tempfile.TemporaryDirectory(prefix="image-speedups-") as folder:
        for repeat in range(args.repeats):
            for tag in (args.image, WITHOUT) if repeat % 2 == 0 else (WITHOUT, args.image):
                root = os.path.join(folder, f"{len(runs[tag])}-{tag.rsplit(':', 1)[1]}")
                runs[tag].append(rehearse(tag, args.problem, root))
                print(f"repeat {repeat + 1}, {tag}: {runs[tag][-1]['all tasks']:.1f} s", flush=True)
    on, off = runs[args.image], runs[WITHOUT]
    print(f"\nMedian seconds per task over {args.repeats} alternated pairs (speedups on / off = ratio):")
    for task in on[0]:
        a, b = statistics.median(r[task] for r in on), statistics.median(r[task] for r in off)
        print(f"  {task:<48} {a:7.1f} {b:7.1f}  {a / b:5.2f}" if b else f"  {task:<48} {a:7.1f} {b:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
