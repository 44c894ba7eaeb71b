"""User code that runs inside TFX components: features, preprocessing, model, run_fn.

Everything here imports without TFX orchestration. This package is also the one place
that sets the environment TensorFlow reads at its first import; every entry point (the
runners, the benchmark, the tests, the TFX image) imports a project module before
TensorFlow, and so gets it:

- Keras 2 (tf-keras), deliberately: TensorFlow Transform 1.16 and the TFX 1.16 container
  both require it, so ``TF_USE_LEGACY_KERAS=1`` must be set before TensorFlow is imported;
- TensorFlow's C++ logging at warnings and above (``TF_CPP_MIN_LOG_LEVEL=2``), unless the
  environment says otherwise.
"""

import os

_LEGACY = os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
if _LEGACY not in ("1", "true", "True"):
    raise RuntimeError(
        f"TF_USE_LEGACY_KERAS={_LEGACY!r}: this project's models need Keras 2 (tf-keras), "
        "as TensorFlow Transform 1.16 and the TFX 1.16 image do. Unset it or set it to 1."
    )
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
