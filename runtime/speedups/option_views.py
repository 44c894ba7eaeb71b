"""Beam's pipeline option views, each built once per options object and view class.

``Pipeline.apply`` reads the type-check settings through ``options.view_as(TypeOptions)``
twice for every transform it applies, and each call builds a fresh argparse parser for the
class and parses the pipeline's flags again. TFX's Beam components apply thousands of
transforms, so a run spends about a second building the same parsers (docs/performance.md).
A view holds nothing of its own: its values live in the dictionary it shares with the
options it was made from, and its flags are theirs. So the view made by the first call
serves every later one while the options keep the same flags and dictionary (a copy or an
unpickled object is a new object with its own views). Values, defaults and overrides stay
exactly Beam's. Written against apache-beam 2.61.0 (``runtime.speedups`` checks ``view_as``).
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
