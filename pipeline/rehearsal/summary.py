"""The rehearsal's account of itself, in the same form as a local run's summary: tasks,
status, seconds, the Evaluator's metrics and verdict, where the model was pushed."""

from __future__ import annotations

from pipeline.rehearsal.runner import Rehearsal
from pipeline.run_summary import ComponentRun, RunSummary, record_output

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
                record_output(summary, task.name, key, artifact["uri"], artifact["metadata"], inputs_by_key)
    return summary
