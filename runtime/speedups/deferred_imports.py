"""Modules TFX imports at start-up that a local run does not use, loaded on first use instead.

TFX's orchestrator imports every standard component, and the InfraValidator's executor
imports its Kubernetes model-server runner, which imports the whole Kubernetes client: a
sizeable share of every local run's start-up, for a component this pipeline does not run.
Deferred (importlib's ``LazyLoader``), such a module is an empty module object until
something reads an attribute of it; then it loads as it would have, so a pipeline that
does run the InfraValidator gets the real runner. Only modules that others import whole
(``from package import module``, ``import module``) can be deferred: a ``from module import
name`` reads the attribute at once. Written against tfx 1.16.0, whose start-up imports the
deferred module (a test checks it does).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys

DEFERRED = frozenset({"tfx.components.infra_validator.model_server_runners.kubernetes_runner"})


class _DeferringFinder(importlib.abc.MetaPathFinder):
    """Finds the ``DEFERRED`` modules where Python would, with a loader that defers them."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in DEFERRED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return None
        spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


def install() -> None:
    """Defers the ``DEFERRED`` modules in this process from now on (once, however often called)."""
    if not any(isinstance(finder, _DeferringFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _DeferringFinder())
