"""Modules TFX imports at start-up that a local run does not use (the InfraValidator's
Kubernetes runner), loaded on first use instead (importlib's ``LazyLoader``;
docs/speedups.md). Written against tfx 1.16.0.
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
