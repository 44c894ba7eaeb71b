"""A configuration value that cannot work, named by its field (``launch.flags`` names the flag
that set it instead). Imports nothing of the project, so any module may raise it."""

from __future__ import annotations


class FieldError(ValueError):
    """A configuration value that cannot work: ``field`` names it, ``problem`` says why and the fix."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field, self.problem = field, problem
