"""Where the Pusher puts blessed models on Vertex AI: the flags that choose it (an endpoint,
a canary share, or registering only) and the typed settings they become
(``pipeline.config.VertexEndpoint``)."""

from __future__ import annotations

import argparse

from launch.flag_errors import SettingsError
from pipeline.config import DEFAULT_SERVING_IMAGE, VertexEndpoint


def add_push_flags(parser: argparse.ArgumentParser) -> None:
    serving = parser.add_argument_group("Vertex AI Model Registry and endpoint, for the Pusher")
    serving.add_argument(
        "--endpoint-name",
        help="Register each blessed model as the next version of the pipeline's registry model, and deploy it to "
        "this Vertex AI endpoint.",
    )
    serving.add_argument(
        "--register-model",
        action="store_true",
        help="Register each blessed model as the next version of the pipeline's registry model, without deploying.",
    )
    serving.add_argument(
        "--canary-percent",
        type=int,
        default=0,
        help="Deploy a new version beside the champion with this share of the endpoint's traffic (1-99); "
        "python -m runs.release promotes or rolls it back. 0: all of the traffic at once.",
    )
    serving.add_argument(
        "--explanations",
        action="store_true",
        help="Upload each version with an explanation spec (sampled Shapley over the raw input columns) for "
        "Vertex Explainable AI, which Google deprecated (docs/release.md says what it can and cannot do).",
    )
    serving.add_argument(
        "--serving-machine-type", default="n1-standard-2", help="Endpoint machine type. (default: %(default)s)"
    )
    serving.add_argument(
        "--serving-image", default=DEFAULT_SERVING_IMAGE, help="Prebuilt serving container. (default: %(default)s)"
    )


def pushes_to_vertex(args: argparse.Namespace) -> bool:
    return bool(args.endpoint_name or args.register_model)


def check_push_flags(args: argparse.Namespace) -> None:
    if args.explanations and not pushes_to_vertex(args):
        raise SettingsError("--explanations needs --endpoint-name or --register-model: the spec goes with an upload")


def push_from_args(args: argparse.Namespace) -> VertexEndpoint | None:
    """Where the Pusher puts models on Vertex AI (None: the serving directory); a canary share
    without an endpoint is refused by ``VertexEndpoint``."""
    if not (pushes_to_vertex(args) or args.canary_percent):
        return None
    return VertexEndpoint(
        project=args.project,
        region=args.region,
        endpoint_name=args.endpoint_name,
        machine_type=args.serving_machine_type,
        serving_image=args.serving_image,
        canary_percent=args.canary_percent,
        explanations=args.explanations,
    )
