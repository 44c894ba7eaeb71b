"""The project's own TFX components (standard TFX components are used as they are)."""

import models  # noqa: F401  (first: sets the environment TensorFlow reads, see models/__init__.py)
