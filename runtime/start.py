"""What a local process that runs TFX's Beam components sets up around its heavy imports
and before its first Beam pickle: ``local_runner.py`` and each Beam pool process
(``components/beam_pool.py``) call all three, so a cost taken away in one is taken away in
the other.
"""

from __future__ import annotations


def before_imports() -> None:
    """Modules TFX imports but a local run does not use are loaded only if used."""
    from components import deferred_imports

    deferred_imports.install()


def before_pickles(pickles_stay_here: bool) -> None:
    """How Beam's pickles are made and compressed, set before this process makes or reads
    one (a pool's worker may be handed one as soon as its server starts).
    ``pickles_stay_here``: Beam runs on this machine (never a remote runner's workers).

    Where they stay, the pickler is the local runs' (``beam_runtime.LOCAL_PICKLE_LIBRARY``)
    from the start: each Beam pipeline then sets it again from its options, but a pool
    process builds none and would otherwise pickle again with Beam's default."""
    from apache_beam.internal import pickler

    from components import beam_pickle_codec, beam_runtime

    beam_pickle_codec.install(pickles_stay_here)
    if pickles_stay_here:
        pickler.set_library(beam_runtime.LOCAL_PICKLE_LIBRARY)


def after_imports() -> None:
    """Beam's per-run costs taken away (each module says which, and why)."""
    from components import beam_option_views, beam_overheads, beam_signatures

    beam_signatures.install()
    beam_option_views.install()
    beam_overheads.install()
