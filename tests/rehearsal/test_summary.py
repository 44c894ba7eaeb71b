"""What the rehearsal's summary says of the Google Cloud stand-ins the tasks used."""

from __future__ import annotations

from rehearsal.cloud.endpoints import Deployment
from rehearsal.cloud.jobs import JobRecord, ReplicaRecord
from rehearsal.cloud.proxy import Connection
from rehearsal.runner import Rehearsal
from rehearsal.summary import describe_stand_ins

FORWARDED = "forwarded to 127.0.0.1:4000"


def test_the_image_hosts_refusals_jobs_with_what_was_not_rehearsed_and_endpoints():
    rehearsal = Rehearsal(
        "job-1",
        "taxi",
        "/logs",
        [],
        connections=[
            Connection("www.googleapis.com", 443, "http/1.1", FORWARDED),
            Connection("www.googleapis.com", 443, "http/1.1", FORWARDED),
            Connection("us-central1-aiplatform.googleapis.com", 443, "h2", FORWARDED),
            Connection("169.254.169.254", 80, "", "refused: a plain GET: only HTTPS stand-ins exist"),
        ],
        training_jobs=[
            JobRecord(
                "projects/p/locations/l/customJobs/1",
                "tfx_1",
                "JOB_STATE_SUCCEEDED",
                "",
                (
                    ReplicaRecord("workerpool0-replica-0", 0, "/a.log", False),
                    ReplicaRecord("workerpool2-replica-0", -15, "/b.log", True),
                ),
                ("workerpool0: 1 x TPU_V3 on cloud-tpu ran on the CPU, without TPU_NAME",),
            )
        ],
        deployments=[
            Deployment(
                "projects/p/locations/l/endpoints/9",
                "taxi-endpoint",
                "5",
                "projects/p/locations/l/models/3",
                "2",
                "v1",
                "gs://b/m",
                100,
                "http://127.0.0.1:1",
            )
        ],
        images={"localhost/pipeline:rehearsal": "637aecb5de8f00aa11"},
    )
    assert describe_stand_ins(rehearsal) == [
        "Each task ran in a fresh container of localhost/pipeline:rehearsal (image 637aecb5de8f).",
        "Google Cloud, stood in for here: the tasks' connections went to us-central1-aiplatform.googleapis.com (1), "
        "www.googleapis.com (2).",
        "  REFUSED 169.254.169.254:80: a plain GET: only HTTPS stand-ins exist",
        "Vertex AI Training job tfx_1: SUCCEEDED, replicas workerpool0-replica-0 (exit 0), "
        "workerpool2-replica-0 (stopped).",
        "  Not rehearsed: workerpool0: 1 x TPU_V3 on cloud-tpu ran on the CPU, without TPU_NAME",
        "Vertex AI endpoint: taxi-endpoint (projects/p/locations/l/endpoints/9) serves v1 "
        "(projects/p/locations/l/models/3 version 2, from gs://b/m) as deployed model 5 with 100% of its traffic, "
        "answering TensorFlow Serving's REST API from the serving TensorFlow",
    ]
    assert rehearsal.connections_by_host() == {"us-central1-aiplatform.googleapis.com": 1, "www.googleapis.com": 2}
