"""The image the speedups benchmark compares against differs from the project's image in
PIPELINE_SPEEDUPS=0 alone."""

from __future__ import annotations

from bench import image_speedups
from rehearsal import podman


def test_the_derived_image_differs_in_the_speedups_switch_alone(rehearsal_image):
    tag = "localhost/pipeline:no-speedups-test"
    try:
        image_speedups.derive_without_speedups(rehearsal_image, tag)
        base, derived = podman.inspect_image(rehearsal_image), podman.inspect_image(tag)
    finally:
        podman.run("rmi", "--force", tag, check=False)
    assert set(derived["Config"]["Env"]) - set(base["Config"]["Env"]) == {"PIPELINE_SPEEDUPS=0"}
    assert set(base["Config"]["Env"]) <= set(derived["Config"]["Env"])
    assert derived["RootFS"]["Layers"][: len(base["RootFS"]["Layers"])] == base["RootFS"]["Layers"]
    assert (derived["Config"].get("WorkingDir"), derived["Config"].get("Entrypoint")) == (
        base["Config"].get("WorkingDir"),
        base["Config"].get("Entrypoint"),
    )
