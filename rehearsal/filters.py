"""Resolver filter expressions (``ResolverSpec.ArtifactQuerySpec.filter``), evaluated
against the rehearsal's artifact store.

The grammar TFX compiles and KFP's proto documents: clauses joined by ``AND``, each
``field OP value`` with OP one of ``= != < <= > >=``; fields ``schema_title``,
``artifact_type`` (a synonym), ``name``, ``uri``, ``state``, ``metadata.<key>``
(optionally ``.number_value``/``.string_value``/``.bool_value``), and
``in_context("<context>")``. Anything else is refused by name rather than guessed.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_CLAUSE = re.compile(
    r"""^\s*(?P<field>[A-Za-z_][\w.]*)\s*(?P<op>!=|<=|>=|=|<|>)\s*
        (?P<value>"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|[A-Za-z_]+)\s*$""",
    re.VERBOSE,
)
_CONTEXT = re.compile(r'^\s*in_context\(\s*"(?P<context>[^"]*)"\s*\)\s*$')
_VALUE_KINDS = ("number_value", "string_value", "bool_value")


class FilterError(ValueError):
    """A filter the rehearsal does not understand; the message quotes it."""


@dataclasses.dataclass(frozen=True)
class Clause:
    field: str
    op: str
    value: Any

    def matches(self, artifact: Mapping[str, Any]) -> bool:
        actual = _field(artifact, self.field)
        if actual is None:
            return False
        try:
            return _OPS[self.op](actual, self.value)
        except TypeError:  # comparing a string with a number: no match
            return False


@dataclasses.dataclass(frozen=True)
class Query:
    clauses: tuple[Clause, ...]
    context: str | None = None

    def matches(self, artifact: Mapping[str, Any]) -> bool:
        return all(c.matches(artifact) for c in self.clauses)


def _split_and(text: str) -> list[str]:
    """Splits on AND outside quotes."""
    parts, current, quoted, i = [], [], False, 0
    while i < len(text):
        ch = text[i]
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        if not quoted and text[i : i + 5] == " AND ":
            parts.append("".join(current))
            current, i = [], i + 5
            continue
        current.append(ch)
        i += 1
    parts.append("".join(current))
    return [p for p in (p.strip() for p in parts) if p]


def _literal(token: str) -> Any:
    if token.startswith('"'):
        return re.sub(r"\\(.)", r"\1", token[1:-1])  # AIP-160 escapes: \" and \\
    if re.fullmatch(r"-?\d+(?:\.\d+)?", token):
        return float(token)
    if token in ("true", "false"):
        return token == "true"
    return token  # a bare word: an enum such as LIVE


def parse(text: str) -> Query:
    clauses, context = [], None
    for part in _split_and(text):
        if m := _CONTEXT.match(part):
            context = m["context"]
            continue
        m = _CLAUSE.match(part)
        if not m:
            raise FilterError(f"cannot parse the clause {part!r} of the resolver filter {text!r}")
        field = m["field"]
        if field.split(".")[0] not in ("schema_title", "artifact_type", "name", "uri", "state", "metadata"):
            raise FilterError(f"unknown field {field!r} in the resolver filter {text!r}")
        clauses.append(Clause(field, m["op"], _literal(m["value"])))
    return Query(tuple(clauses), context)


def _field(artifact: Mapping[str, Any], field: str) -> Any:
    head, _, rest = field.partition(".")
    if head in ("schema_title", "artifact_type"):
        return artifact["schema_title"]
    if head in ("name", "uri", "state"):
        return artifact[head]
    # metadata.<key>[.<kind>_value]
    key, _, kind = rest.rpartition(".") if rest.endswith(_VALUE_KINDS) else (rest, "", "")
    value = artifact["metadata"].get(key)
    if kind == "number_value":
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if kind == "string_value":
        return value if isinstance(value, str) else None
    if kind == "bool_value":
        return value if isinstance(value, bool) else None
    return value
