"""The rehearsal's account of itself, in the same form as a local run's summary: tasks,
status, seconds, the Evaluator's metrics and verdict, where the model was pushed; and what
the tasks asked of the Google Cloud stand-ins."""

from __future__ import annotations

from rehearsal.runner import Rehearsal
from report.run_summary import ComponentRun, RunSummary, record_output

_STATES = {"SUCCEEDED": "complete", "CACHED": "cached", "FAILED": "FAILED", "NOT_RUN": "not run"}


def summarize(rehearsal: Rehearsal) -> RunSummary:
    summary = RunSummary(run_id=rehearsal.job_id, components=[])
    for task in rehearsal.tasks:
        summary.components.append(
            ComponentRun(task.name, _STATES[task.state], task.seconds, task.started, task.started + task.seconds)
        )
        inputs_by_key = {k: {a["name"] for a in v} for k, v in task.inputs.items()}
        for key, artifacts in task.outputs.items():
            for artifact in artifacts[:1]:
                # Read where the stand-in Cloud Storage keeps it, as Vertex's console reads GCS.
                uri = rehearsal.local(artifact["uri"])
                record_output(summary, task.name, key, uri, artifact["metadata"], inputs_by_key)
    return summary


def describe_stand_ins(rehearsal: Rehearsal) -> list[str]:
    """The image the tasks ran in, and what they asked of the Google Cloud stand-ins, in a few lines: the hosts they
    reached through the proxy (refusals named), training jobs and their replicas with the
    accelerators that were not rehearsed, and the endpoints deployed."""
    lines = [
        f"Each task ran in a fresh container of {name} (image {id_[:12]})." for name, id_ in rehearsal.images.items()
    ]
    if forwarded := rehearsal.connections_by_host():
        hosts = ", ".join(f"{host} ({count})" for host, count in forwarded.items())
        lines.append(f"Google Cloud, stood in for here: the tasks' connections went to {hosts}.")
    for connection in rehearsal.connections:
        if connection.refused:
            lines.append(f"  REFUSED {connection.host}:{connection.port}: {connection.outcome[len('refused: ') :]}")
    for job in rehearsal.training_jobs:
        replicas = ", ".join(f"{r.name} ({'stopped' if r.stopped else f'exit {r.exit_code}'})" for r in job.replicas)
        state = job.state.removeprefix("JOB_STATE_")
        lines.append(f"Vertex AI Training job {job.display_name}: {state}, replicas {replicas}.")
        lines.extend(f"  Not rehearsed: {note}" for note in job.not_rehearsed)
    for deployment in rehearsal.deployments:
        lines.append(f"Vertex AI endpoint: {deployment.describe()}")
    return lines
