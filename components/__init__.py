"""The project's own TFX components (standard TFX components are used as they are), and
the Beam policy they and the pipeline share."""

import models  # noqa: F401  (first: sets the environment TensorFlow reads, see models/__init__.py)
