"""The project's own TFX components (standard TFX components are used as they are)."""
