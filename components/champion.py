"""Champion, the project's own component: hands this pipeline's champion (its Model and
ModelBlessing, as the champion record under the pipeline's root names them:
``runtime.champion``) to DriftGate, the Trainer's warm start and the Evaluator, or marks both
outputs empty with the reason. It runs on every run (docs/operating.md, "The champion record").
"""

# No `from __future__ import annotations`: TFX reads the component's type hints at runtime.
from absl import logging
from tfx.dsl.component.experimental.annotations import OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts

from runtime import champion

NODE_ID = "Champion"
# The run's id on Kubeflow Pipelines and Vertex AI (kubeflow/pipelines backend/src/v2/driver/resolve.go).
RUN_ID_PLACEHOLDER = "{{$.pipeline_job_uuid}}"
# On both outputs: the directory pointed at, or "" and the reason there is none.
CHAMPION_PROPERTY = "champion"
NONE_REASON = "no_champion_because"


@component
def Champion(
    model: OutputArtifact[standard_artifacts.Model],
    model_blessing: OutputArtifact[standard_artifacts.ModelBlessing],
    pipeline_root: Parameter[str],
    run_id: Parameter[str] = "",
) -> None:
    """Points ``model`` and ``model_blessing`` at the recorded champion's, or marks them
    empty with the reason."""
    entry, reason = champion.champion_of(pipeline_root)
    for artifact, target in ((model, entry and entry.model), (model_blessing, entry and entry.blessing)):
        champion.write_pointer(artifact.uri, target, reason)
        artifact.set_string_custom_property(CHAMPION_PROPERTY, target or "")
        if reason:
            artifact.set_string_custom_property(NONE_REASON, reason)
    if entry is None:
        logging.info("No champion to compare with or start from: %s.", reason)
    else:
        logging.info("Champion: %s, blessed in %s.", entry.describe(), entry.blessing)
