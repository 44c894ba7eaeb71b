"""The pipeline definition and its configuration, compiling and submitting it; never
imports a runner."""

import models  # noqa: F401  (first: sets the environment TensorFlow reads, see models/__init__.py)
