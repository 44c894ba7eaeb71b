"""The ExecutorInput a task receives, built as Vertex builds it, and the placeholders in
a container's command line resolved against it.

Parameters go into both the typed ``parameters`` (pipeline-spec schema 2.0.0, what TFX's
entrypoint reads) and ``parameterValues`` (schema 2.1). Input artifacts carry their
resource name, URI, type schema and the metadata their producer wrote; output artifacts
their name, URI and type; ``outputFile`` is ``executor_output.json`` in the task's
directory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rehearsal.job import JobError, Task


def parameter_values(task: Task, runtime_parameters: Mapping[str, Any]) -> dict[str, dict]:
    """name -> typed Value ({"stringValue"|"intValue"|"doubleValue"}) for each input
    parameter, gs:// paths and all, as Vertex passes them."""
    found = {}
    for name, source in task.spec.get("inputs", {}).get("parameters", {}).items():
        if "runtimeValue" in source:
            runtime = source["runtimeValue"]
            if "constantValue" in runtime:
                value = dict(runtime["constantValue"])
            elif "constant" in runtime:
                value = _typed(runtime["constant"], task.component, name)
            else:
                value = _typed(
                    _runtime_parameter(runtime["runtimeParameter"], runtime_parameters), task.component, name
                )
        elif "componentInputParameter" in source:
            value = _typed(
                _runtime_parameter(source["componentInputParameter"], runtime_parameters), task.component, name
            )
        else:
            raise JobError(f"task {task.name}: parameter {name} comes from {sorted(source)}, which TFX never compiles")
        found[name] = value
    return found


def _runtime_parameter(name: str, runtime_parameters: Mapping[str, Any]) -> Any:
    if name not in runtime_parameters:
        raise JobError(f"the job's runtimeConfig sets no value for the pipeline parameter {name!r}")
    value = runtime_parameters[name]
    if isinstance(value, dict):  # a typed Value (runtimeConfig.parameters)
        return next(iter(value.values()))
    return value


def _typed(value: Any, component: Mapping[str, Any], name: str) -> dict:
    """A plain value as a typed Value, by the type the component declares."""
    declared = component.get("inputDefinitions", {}).get("parameters", {}).get(name, {})
    kind = declared.get("parameterType") or declared.get("type", "STRING")
    if kind in ("INT", "NUMBER_INTEGER"):
        return {"intValue": str(int(value))}
    if kind in ("DOUBLE", "NUMBER_DOUBLE"):
        return {"doubleValue": float(value)}
    return {"stringValue": value if isinstance(value, str) else json.dumps(value)}


def untyped(value: Mapping[str, Any]) -> Any:
    """A typed Value as the google.protobuf.Value of ``parameterValues``."""
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    return value.get("stringValue", "")


def typed(value: Any) -> dict:
    """A google.protobuf.Value (a driver's ``parameterValues``) as a typed Value."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return {"stringValue": value if isinstance(value, str) else json.dumps(value)}
    if float(value).is_integer():
        return {"intValue": str(int(value))}
    return {"doubleValue": float(value)}


def runtime_artifact(artifact: Mapping[str, Any]) -> dict:
    """A stored artifact as a RuntimeArtifact."""
    return {
        "name": artifact["name"],
        "type": artifact["type"],
        "uri": artifact["uri"],
        "metadata": dict(artifact["metadata"]),
    }


def build(
    parameters: Mapping[str, dict],
    inputs: Mapping[str, list[Mapping[str, Any]]],
    outputs: Mapping[str, list[Mapping[str, Any]]],
    output_file: str,
) -> dict:
    """The ExecutorInput, as JSON (camelCase, as Vertex serializes it)."""
    executor_input: dict[str, Any] = {
        "inputs": {
            "parameters": {k: dict(v) for k, v in parameters.items()},
            "parameterValues": {k: untyped(v) for k, v in parameters.items()},
        },
        "outputs": {
            "artifacts": {k: {"artifacts": [runtime_artifact(a) for a in v]} for k, v in outputs.items()},
            "outputFile": output_file,
        },
    }
    if inputs:
        executor_input["inputs"]["artifacts"] = {
            k: {"artifacts": [runtime_artifact(a) for a in v]} for k, v in inputs.items()
        }
    return executor_input


def merge_driver_output(executor_input: dict, driver_output: Mapping[str, Any]) -> None:
    """What Vertex does with a ``preCacheCheck`` driver's ExecutorOutput before the main
    container: its parameter values replace the task's (in both fields), and its output
    artifacts' metadata is carried onto the task's outputs."""
    inputs = executor_input["inputs"]
    for name, value in driver_output.get("parameterValues", {}).items():
        inputs["parameterValues"][name] = value
        inputs["parameters"][name] = typed(value)
    for name, value in driver_output.get("parameters", {}).items():
        inputs["parameters"][name] = dict(value)
        inputs["parameterValues"][name] = untyped(value)
    for key, listed in driver_output.get("artifacts", {}).items():
        ours = executor_input["outputs"]["artifacts"].get(key, {}).get("artifacts", [])
        for mine, theirs in zip(ours, listed.get("artifacts", []), strict=False):
            mine["metadata"].update(theirs.get("metadata", {}))


_PLACEHOLDER = re.compile(r"\{\{\$(?P<path>[^}]*)\}\}")
_PATH = re.compile(
    r"""^\.(?P<side>inputs|outputs)\.(?P<kind>parameters|artifacts)\['(?P<key>[^']+)'\]
        (?:\.(?P<attr>uri|path|metadata)(?:\['(?P<meta>[^']+)'\])?)?$|^\.outputs\.output_file$""",
    re.VERBOSE,
)


class EmptyInputError(LookupError):
    """A placeholder refers to an input artifact list that is empty."""


def resolve(text: str, executor_input: Mapping[str, Any]) -> str:
    """``{{$}}`` is the whole ExecutorInput as JSON; ``{{$.inputs.parameters['k']}}``,
    ``{{$.inputs.artifacts['k'].uri}}``, ``...metadata['m']``, ``{{$.outputs...}}`` and
    ``{{$.outputs.output_file}}`` the parts. An unknown placeholder is an error."""

    def one(match: re.Match) -> str:
        path = match["path"]
        if path == "":
            return json.dumps(executor_input, sort_keys=True)
        m = _PATH.match(path)
        if not m:
            raise JobError(f"the rehearsal does not know the placeholder {match[0]!r}")
        if m["side"] is None:
            return executor_input["outputs"]["outputFile"]
        side = executor_input[m["side"]]
        if m["kind"] == "parameters":
            return str(side.get("parameterValues", {})[m["key"]])
        listed = side.get("artifacts", {}).get(m["key"], {}).get("artifacts", [])
        if not listed:
            raise EmptyInputError(f"{match[0]}: no {m['side'][:-1]} artifact {m['key']!r}")
        artifact = listed[0]
        if m["attr"] == "metadata":
            value = artifact["metadata"].get(m["meta"], "") if m["meta"] else artifact["metadata"]
            return value if isinstance(value, str) else json.dumps(value)
        if m["attr"] in ("uri", "path"):
            return artifact["uri"]
        return artifact["name"]

    return _PLACEHOLDER.sub(one, text)
