"""User code that runs inside TFX components: features, preprocessing, model, run_fn.

Everything here imports without TFX orchestration. The project uses Keras 2 (tf-keras)
deliberately: TensorFlow Transform 1.16 and the TFX 1.16 container both require it, so
``TF_USE_LEGACY_KERAS=1`` must be set before TensorFlow is first imported.
"""

import os

_LEGACY = os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
if _LEGACY not in ("1", "true", "True"):
    raise RuntimeError(
        f"TF_USE_LEGACY_KERAS={_LEGACY!r}: this project's models need Keras 2 (tf-keras), "
        "as TensorFlow Transform 1.16 and the TFX 1.16 image do. Unset it or set it to 1."
    )
