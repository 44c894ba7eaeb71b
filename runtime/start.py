"""What a local process that runs TFX's Beam components sets up around its heavy imports
and before its first Beam pickle: ``local_runner.py`` and each Beam pool process
(``runtime/beam_pool.py``) call the same functions, so a cost taken away in one is taken
away in the other. Each installs the speedups of its stage (``runtime.speedups``), none
when they are switched off.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from runtime import speedups
from runtime.beam_args import LOCAL_PICKLE_LIBRARY


def before_imports() -> None:
    """Modules TFX imports but a local run does not use are loaded only if used."""
    speedups.install(speedups.Stage.START)


@contextlib.contextmanager
def heavy_imports() -> Iterator[None]:
    """Around the process's heavy imports: their objects kept out of garbage collections
    (``runtime.speedups.frozen_imports``), unless the speedups are switched off."""
    if not speedups.enabled():
        yield
        return
    from runtime.speedups.frozen_imports import frozen_imports

    with frozen_imports():
        yield


def before_pickles(pickles_stay_here: bool) -> None:
    """How Beam's pickles are made and compressed, set before this process makes or reads
    one (a pool's worker may be handed one as soon as its server starts).
    ``pickles_stay_here``: Beam runs on this machine (never a remote runner's workers).

    Where they stay, the pickler is the local runs' (``beam_args.LOCAL_PICKLE_LIBRARY``,
    Beam's own option, set whatever the switch says) from the start: each Beam pipeline
    then sets it again from its options, but a pool process builds none and would
    otherwise pickle again with Beam's default."""
    from apache_beam.internal import pickler

    speedups.install(speedups.Stage.PICKLES, pickles_stay_here=pickles_stay_here)
    if pickles_stay_here:
        pickler.set_library(LOCAL_PICKLE_LIBRARY)


def after_imports() -> None:
    """Beam's per-run costs taken away (each speedup's module says which, and why)."""
    speedups.install(speedups.Stage.IMPORTED)
