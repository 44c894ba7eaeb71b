"""The Trainer's TFJob on Kubeflow's training operator: a chief, workers and parameter servers
(``components/tfjob.py`` launches it; ``launch/training.py`` makes it from the --tfjob flags).
``models/strategy.py`` picks the strategy from the operator's ``TF_CONFIG``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from pipeline.field_error import FieldError

_KUBERNETES_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$")


@dataclasses.dataclass(frozen=True)
class TfJob:
    """The Trainer's TFJob: ``workers`` besides the chief, ``parameter_servers``, each replica
    a container of ``image`` with the given resources, in ``namespace`` (None: the task's)."""

    image: str
    workers: int = 0
    parameter_servers: int = 0
    namespace: str | None = None
    service_account: str | None = None
    cpu: str | None = None
    memory: str | None = None

    def __post_init__(self) -> None:
        if not self.image:
            raise FieldError("image", "is needed: the TFJob's replicas run the pipeline's image")
        if self.workers < 0 or self.parameter_servers < 0:
            name = "workers" if self.workers < 0 else "parameter_servers"
            raise FieldError(name, f"cannot be negative, got {getattr(self, name)}")
        if self.parameter_servers and not self.workers:
            raise FieldError("parameter_servers", "need at least one worker beside the chief")
        for name in ("namespace", "service_account"):
            value = getattr(self, name)
            if value is not None and not _KUBERNETES_NAME.match(value):
                raise FieldError(name, f"{value!r} is not a Kubernetes name (lower-case letters, digits, dashes)")
        for name in ("cpu", "memory"):
            value = getattr(self, name)
            if value is not None and not _QUANTITY.match(value):
                raise FieldError(name, f"{value!r} is not a Kubernetes quantity (e.g. 4, 500m, 16Gi)")

    def custom_config(self, name_prefix: str) -> dict[str, Any]:
        """The TFJob keys of the Trainer's custom_config (hyperparameters go beside them)."""
        from components.tfjob import TFJOB_KEY

        settings = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        return {TFJOB_KEY: {**settings, "name_prefix": name_prefix}}
