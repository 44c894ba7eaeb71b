"""runtime.start: both local entry points get every deferral, the pickle codec and pickler, and
every Beam patch, checked in a new interpreter (the test process may have installed them already)."""

from __future__ import annotations

import json

import pytest

from tests.support.fresh_python import fresh_python


@pytest.mark.parametrize("pickles_stay_here", [True, False])
def test_before_and_after_the_imports_everything_is_installed(pickles_stay_here):
    outcome = json.loads(
        fresh_python(
            "import json, sys, dill; "
            "from apache_beam.internal import dill_pickler, pickler; "
            "from apache_beam.options.pipeline_options import PipelineOptions; "
            "from apache_beam.transforms import core; "
            "from apache_beam.runners.portability.fn_api_runner import worker_handlers; "
            "from runtime import start; from runtime.speedups import option_views, overheads, signatures; "
            "start.before_imports(); "
            "deferring = [type(f).__name__ for f in sys.meta_path].count('_DeferringFinder'); "
            f"start.before_pickles(pickles_stay_here={pickles_stay_here}); "
            "start.after_imports(); "
            "print(json.dumps(dict(deferring=deferring, "
            "signatures=core.get_signature is signatures.get_signature, "
            "views=PipelineOptions.view_as is option_views.view_as, "
            "trace=dill.dill._trace is overheads.trace, "
            "cache=worker_handlers.STATE_CACHE_SIZE_MB, "
            "codec=dill_pickler.bz2.__name__, "
            "library=pickler.desired_pickle_lib.__name__.rpartition('.')[2])))"
        ).splitlines()[-1]
    )
    codec = "_Writer" if pickles_stay_here else "_Reader"
    # Where pickles stay here, the local runs' pickler from the start; else Beam's default.
    library = "cloudpickle_pickler" if pickles_stay_here else "dill_pickler"
    assert outcome == {
        "deferring": 1,
        "signatures": True,
        "views": True,
        "trace": True,
        "cache": 0,
        "codec": codec,
        "library": library,
    }
