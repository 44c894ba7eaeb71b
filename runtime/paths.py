"""Whether one path (local or gs://) lies inside another: how a component or the Trainer
tells this pipeline's artifacts from another pipeline's (every artifact a pipeline writes
lives under its pipeline root, as its champion record does)."""

from __future__ import annotations

import os
import posixpath


def _normalized(path: str) -> str:
    """``path`` without ``.``/``..``, doubled or trailing slashes; a local one made absolute
    (the executor and its pipeline root share the process's working directory)."""
    scheme, sep, rest = path.partition("://")
    if sep:  # gs://bucket/... : the bucket and the path, the scheme's case aside
        return f"{scheme.lower()}://{posixpath.normpath(rest)}"
    return os.path.normpath(os.path.abspath(path))


def is_under(uri: str, root: str) -> bool:
    """True when ``uri`` is ``root`` or inside it, by whole path segments: ``<r>/name-2/m``
    is not under ``<r>/name``."""
    uri, root = _normalized(uri), _normalized(root)
    return uri == root or uri.startswith(root.rstrip("/") + "/")
