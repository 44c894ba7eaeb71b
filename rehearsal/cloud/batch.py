"""Vertex AI's batch prediction jobs (``JobService``'s ``CreateBatchPredictionJob`` and
``GetBatchPredictionJob``), on this machine: the job reads its JSON Lines instances from
the stand-in Cloud Storage, sends them to the model version's server (the one serving it on
an endpoint when it is deployed, else one started for the job and stopped after it) as
TensorFlow Serving's ``{"instances": [...]}``, and writes ``{"instance": ..., "prediction":
...}`` lines to ``<output prefix>/prediction-<model>-<time>/prediction.results-00000-of-00001``,
as Vertex names them. Only the JSON Lines formats are served; anything else fails the job
with the reason, as Vertex fails a job it cannot read.
"""

from __future__ import annotations

import glob
import itertools
import json
import logging
import os
import threading
import time

import grpc
from google.cloud import aiplatform_v1 as v1

from rehearsal.cloud.api_error import ApiError
from rehearsal.cloud.model_servers import PREDICT_ROUTE, http_request
from rehearsal.cloud.registry import copy, now

log = logging.getLogger(__name__)
State = v1.JobState
BATCH_SIZE = 64


class BatchPredictions:
    """The jobs; ``models`` is the ``endpoints.VertexModels`` whose versions and servers they use."""

    def __init__(self, models) -> None:
        self._models = models
        self._lock = threading.RLock()
        self._jobs: dict[str, v1.BatchPredictionJob] = {}
        self._ids = itertools.count(int(time.time() * 1000))

    def methods(self) -> dict:
        return {
            "CreateBatchPredictionJob": (self.create, v1.CreateBatchPredictionJobRequest),
            "GetBatchPredictionJob": (self.get, v1.GetBatchPredictionJobRequest),
        }

    def create(self, request: v1.CreateBatchPredictionJobRequest) -> v1.BatchPredictionJob:
        version = self._models.registry.version(request.batch_prediction_job.model)
        with self._lock:
            job = copy(request.batch_prediction_job)
            job.name = f"{request.parent}/batchPredictionJobs/{next(self._ids)}"
            job.model_version_id = version.resource.version_id
            job.state, job.create_time, job.update_time = State.JOB_STATE_PENDING, now(), now()
            self._jobs[job.name] = job
            created = copy(job)
        threading.Thread(target=self._run, args=(job.name, version), name=f"batch-{job.name[-6:]}").start()
        return created

    def get(self, request: v1.GetBatchPredictionJobRequest) -> v1.BatchPredictionJob:
        with self._lock:
            if request.name not in self._jobs:
                raise ApiError(grpc.StatusCode.NOT_FOUND, f"BatchPredictionJob {request.name} not found")
            return copy(self._jobs[request.name])

    def _set(self, name: str, **fields) -> v1.BatchPredictionJob:
        with self._lock:
            job = self._jobs[name]
            for key, value in fields.items():
                setattr(job, key, value)
            job.update_time = now()
            return copy(job)

    def _run(self, name: str, version) -> None:
        job = self._set(name, state=State.JOB_STATE_RUNNING, start_time=now())
        try:
            directory, count = self._predict(job, version)
        except Exception as e:  # the job fails with the reason, as Vertex's does
            log.exception("Vertex AI stand-in: batch prediction %s failed", name)
            self._set(name, state=State.JOB_STATE_FAILED, end_time=now(), error={"code": 3, "message": str(e)})
            return
        self._set(
            name,
            state=State.JOB_STATE_SUCCEEDED,
            end_time=now(),
            output_info=v1.BatchPredictionJob.OutputInfo(gcs_output_directory=directory),
            completion_stats=v1.CompletionStats(successful_count=count),
        )

    def _local(self, uri: str) -> str:
        if not uri.startswith("gs://"):
            raise ValueError(f"{uri} is not a gs:// URI")
        return os.path.join(self._models.gcs_folder, uri[len("gs://") :])

    def _predict(self, job: v1.BatchPredictionJob, version) -> tuple[str, int]:
        formats = (job.input_config.instances_format, job.output_config.predictions_format)
        if formats != ("jsonl", "jsonl"):
            raise ValueError(f"the stand-in reads and writes JSON Lines only, not {formats}")
        sources = sorted(p for uri in job.input_config.gcs_source.uris for p in glob.glob(self._local(uri)))
        if not sources:
            raise ValueError(f"no input file matches {list(job.input_config.gcs_source.uris)}")
        prefix = job.output_config.gcs_destination.output_uri_prefix.rstrip("/")
        stamp = time.strftime("%Y_%m_%dT%H_%M_%S")
        directory = f"{prefix}/prediction-{version.resource.display_name}-{stamp}"
        os.makedirs(self._local(directory), exist_ok=True)
        port, stop = self._models.server_for(version)
        count = 0
        try:
            with open(os.path.join(self._local(directory), "prediction.results-00000-of-00001"), "w") as out:
                for instances in _batches(sources):
                    status, _, body = http_request(
                        port, "POST", PREDICT_ROUTE, json.dumps({"instances": instances}).encode()
                    )
                    if status != 200:
                        raise ValueError(f"the model answered {status}: {body.decode(errors='replace')[:500]}")
                    for instance, prediction in zip(instances, json.loads(body)["predictions"], strict=True):
                        out.write(json.dumps({"instance": instance, "prediction": prediction}) + "\n")
                    count += len(instances)
        finally:
            stop()
        return directory, count


def _batches(paths: list[str]):
    """The instances of the JSON Lines files, ``BATCH_SIZE`` at a time, read as they go."""
    batch = []
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.strip():
                    batch.append(json.loads(line))
                    if len(batch) == BATCH_SIZE:
                        yield batch
                        batch = []
    if batch:
        yield batch
