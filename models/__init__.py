"""User code that runs inside TFX components: features, preprocessing, model, run_fn.

Importable without TFX orchestration. Importing it sets what TensorFlow reads at its first
import: Keras 2 (``TF_USE_LEGACY_KERAS=1``, any other value refused) and C++ logs at warnings
and above, unless the environment says otherwise (docs/versions.md).
"""

import os

_LEGACY = os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
if _LEGACY not in ("1", "true", "True"):
    raise RuntimeError(
        f"TF_USE_LEGACY_KERAS={_LEGACY!r}: this project's models need Keras 2 (tf-keras), "
        "as TensorFlow Transform 1.16 and the TFX 1.16 image do. Unset it or set it to 1."
    )
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
