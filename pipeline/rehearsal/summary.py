"""The rehearsal's account of itself, in the same form as a local run's summary: tasks,
status, seconds, the Evaluator's metrics and verdict, where the model was pushed."""

from __future__ import annotations

from pipeline.rehearsal.runner import Rehearsal
from pipeline.run_summary import ComponentRun, RunSummary, read_evaluation

_STATES = {"SUCCEEDED": "complete", "CACHED": "cached", "FAILED": "FAILED", "NOT_RUN": "not run"}


def summarize(rehearsal: Rehearsal) -> RunSummary:
    from components.evaluator import REUSED_FROM  # imports TFX and TFMA: only when summarizing

    summary = RunSummary(run_id=rehearsal.job_id, components=[])
    for task in rehearsal.tasks:
        summary.components.append(
            ComponentRun(task.name, _STATES[task.state], task.seconds, task.started, task.started + task.seconds)
        )
        for key, artifacts in task.outputs.items():
            if not artifacts:
                continue
            artifact = artifacts[0]
            metadata = artifact["metadata"]
            if key == "blessing" and "blessed" in metadata:
                summary.blessed = bool(metadata["blessed"])
                baselines = {a["name"] for a in task.inputs.get("baseline_model", [])}
                summary.had_baseline = bool(baselines)
                summary.baseline_is_candidate = bool(baselines) and baselines == {
                    a["name"] for a in task.inputs.get("model", [])
                }
            elif key == "evaluation":
                read_evaluation(summary, artifact["uri"])
                summary.evaluation_reused_from = metadata.get(REUSED_FROM) or None
            elif key == "pushed_model" and metadata.get("pushed"):
                summary.pushed_to = metadata.get("pushed_destination")
            elif key == "model_run":
                summary.tensorboard_dir = artifact["uri"]
    return summary
