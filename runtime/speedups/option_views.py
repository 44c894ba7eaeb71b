"""Beam's pipeline option views, each built once per options object and view class rather
than a fresh argparse parse per transform applied (docs/speedups.md). Values, defaults and
overrides stay Beam's. Written against apache-beam 2.61.0.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from apache_beam.options.pipeline_options import PipelineOptions

# Beam's own view_as, which this wraps.
BEAM_VIEW_AS: Callable[[PipelineOptions, type], PipelineOptions] = PipelineOptions.view_as

# options -> {view class: view}; entries go with their options object.
_views: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def view_as(options: PipelineOptions, cls: type) -> PipelineOptions:
    """Beam's ``options.view_as(cls)``, made once per options object and class."""
    try:
        known = _views.get(options)
    except TypeError:  # an options subclass that is not hashable or weakly referable
        return BEAM_VIEW_AS(options, cls)
    view = known.get(cls) if known else None
    if view is not None and view._flags is options._flags and view._all_options is options._all_options:
        return view
    view = BEAM_VIEW_AS(options, cls)
    with _lock:
        _views.setdefault(options, {})[cls] = view
    return view


def install() -> None:
    """Has every ``PipelineOptions.view_as`` in this process go through ``view_as``."""
    PipelineOptions.view_as = view_as
