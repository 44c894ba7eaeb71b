"""The pipeline definition and its configuration; never imports a runner."""
