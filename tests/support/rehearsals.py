"""The kubeflow_runner arguments of a rehearsal, as the rehearsal tests run it."""

from __future__ import annotations

from pathlib import Path

from rehearsal.image import DEFAULT_IMAGE

BUCKET = "gs://rehearsal-test"


def rehearsal_argv(
    root: Path, data_dir: Path | str, *extra: str, problem_dir: Path | str | None = None, job_file: str = "job.json"
) -> list[str]:
    """``--rehearse`` of the compiled job into ``root``, its data root (gs://) read from
    ``data_dir``; ``problem_dir``: the problem (default: the taxi example). Its tasks run in
    the project's image (the ``rehearsal_image`` fixture builds it)."""
    return [
        "--rehearse",
        *(["--problem", str(problem_dir)] if problem_dir is not None else []),
        "--image",
        DEFAULT_IMAGE,
        "--output-root",
        f"{BUCKET}/out",
        "--data-root",
        f"{BUCKET}/data",
        "--rehearse-gcs",
        f"{BUCKET}/data={data_dir}",
        "--rehearsal-root",
        str(root),
        "--output-file",
        str(root / job_file),
        *extra,
    ]


def local_uri(root: Path, uri: str) -> str:
    """Where the stand-in Cloud Storage of the rehearsal in ``root`` keeps a gs:// ``uri``."""
    return str(root / "gcs" / uri.removeprefix("gs://"))


def training_record(root: Path, trainer: dict) -> dict:
    """What ``run_fn`` recorded (``training.json``) for the rehearsed Trainer task ``trainer``."""
    from models.trainer import read_training_record

    return read_training_record(local_uri(root, trainer["outputs"]["model_run"][0]["uri"]))
