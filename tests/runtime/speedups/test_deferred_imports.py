"""runtime.speedups.deferred_imports: TFX starts without the deferred modules, which load whole on first use;
each deferred module is one TFX really imports at start-up. Each check runs in a fresh
interpreter, as the test process has long imported everything."""

from __future__ import annotations

import json

from runtime.speedups import deferred_imports
from tests.support.fresh_python import fresh_python

KUBERNETES_RUNNER = "tfx.components.infra_validator.model_server_runners.kubernetes_runner"
START_UP = "import models; from tfx.orchestration.local.local_dag_runner import LocalDagRunner"


def _run(code: str) -> dict:
    return json.loads(fresh_python(code).splitlines()[-1])


def test_tfx_starts_without_the_kubernetes_client_and_its_runner_loads_on_first_use():
    """Installed twice (one finder), then TFX's start-up: the deferred module waits for its
    first use; another module of the same package loads as usual."""
    deferred = KUBERNETES_RUNNER
    assert deferred in deferred_imports.DEFERRED
    outcome = _run(
        "import json, sys; from runtime.speedups import deferred_imports; "
        "deferred_imports.install(); deferred_imports.install(); "
        f"{START_UP}; "
        "finders = [type(f).__name__ for f in sys.meta_path].count('_DeferringFinder'); "
        "import tfx.components.infra_validator.model_server_runners.local_docker_runner as other; "
        f"module = sys.modules[{deferred!r}]; before = type(module).__name__; "
        "k8s_before = 'kubernetes' in sys.modules; "
        "runner = module.KubernetesRunner.__name__; "
        "print(json.dumps(dict(before=before, k8s_before=k8s_before, after=type(module).__name__, "
        "k8s_after='kubernetes' in sys.modules, runner=runner, finders=finders, other=type(other).__name__)))"
    )
    assert outcome["finders"] == 1 and outcome["other"] == "module"
    assert outcome["before"] == "_LazyModule" and outcome["k8s_before"] is False
    assert outcome["after"] == "module" and outcome["k8s_after"] is True
    assert outcome["runner"] == "KubernetesRunner"


def test_each_deferred_module_is_one_tfx_imports_at_start_up():
    """Without the finder TFX's start-up loads every deferred module: none is deferred for nothing."""
    outcome = _run(
        f"import json, sys; {START_UP}; "
        f"print(json.dumps([m in sys.modules for m in {sorted(deferred_imports.DEFERRED)!r}]))"
    )
    assert outcome and all(outcome)
