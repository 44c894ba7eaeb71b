"""Beam's lookups of function signatures, computed once per function rather than on every
DoFn validation (docs/speedups.md); Beam still validates every DoFn. Written against
apache-beam 2.61.0.
"""

from __future__ import annotations

import inspect
import threading
import types
import weakref
from collections.abc import Callable

from apache_beam.transforms import core
from apache_beam.typehints import decorators

# Beam's own lookup (what apache_beam.transforms.core calls), which this wraps.
BEAM_GET_SIGNATURE: Callable[[Callable], inspect.Signature] = decorators.get_signature

# function -> {bound: its signature}; entries go with their function.
_signatures: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def get_signature(func: Callable) -> inspect.Signature:
    """Beam's ``get_signature(func)``, computed once per Python function.

    A bound method's signature is its function's without the first parameter, whatever
    object it is bound to, so methods are keyed by their function; other callables
    (builtins, classes, callable objects, partials) are looked up afresh every time.
    """
    if isinstance(func, types.MethodType) and isinstance(func.__func__, types.FunctionType):
        key, bound = func.__func__, True
    elif isinstance(func, types.FunctionType):
        key, bound = func, False
    else:
        return BEAM_GET_SIGNATURE(func)
    known = _signatures.get(key)
    if known is not None and bound in known:
        return known[bound]
    signature = BEAM_GET_SIGNATURE(func)
    with _lock:
        _signatures.setdefault(key, {})[bound] = signature
    return signature


def install() -> None:
    """Has Beam's DoFn validation in this process use ``get_signature``."""
    core.get_signature = get_signature
