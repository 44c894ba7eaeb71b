"""What a local process that runs TFX's Beam components sets up around its heavy imports:
``local_runner.py`` and each Beam pool process (``components/beam_pool.py``) call both, so
a cost taken away in one is taken away in the other.
"""

from __future__ import annotations


def before_imports() -> None:
    """Modules TFX imports but a local run does not use are loaded only if used."""
    from components import deferred_imports

    deferred_imports.install()


def after_imports(pickles_stay_here: bool) -> None:
    """Beam's per-run costs taken away (each module says which, and why).
    ``pickles_stay_here``: Beam runs on this machine (never a remote runner's workers)."""
    from components import beam_option_views, beam_overheads, beam_pickle_codec, beam_signatures

    beam_signatures.install()
    beam_option_views.install()
    beam_overheads.install()
    beam_pickle_codec.install(pickles_stay_here)
