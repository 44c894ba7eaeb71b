"""runtime.speedups.option_views: each view built once, with Beam's values, shared writes and type
checks, and nothing kept alive."""

from __future__ import annotations

import copy
import gc
import pickle
import weakref

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import (
    DebugOptions,
    DirectOptions,
    GoogleCloudOptions,
    PipelineOptions,
    StandardOptions,
    TypeOptions,
)
from apache_beam.typehints.decorators import TypeCheckError

from runtime.speedups import option_views
from tests.support.fresh_python import fresh_python

FLAGS = ["--runner=DirectRunner", "--direct_num_workers=2", "--experiments=a", "--no_pipeline_type_check"]
BEAM_VIEW_AS = option_views.BEAM_VIEW_AS
VIEWS = [TypeOptions, StandardOptions, DirectOptions, DebugOptions, GoogleCloudOptions]


@pytest.fixture
def counted_beam_views(monkeypatch):
    """Installs view_as, with a fresh cache, counting the views Beam builds."""
    built = []

    def beam_view_as(options, cls):
        built.append(cls)
        return BEAM_VIEW_AS(options, cls)

    monkeypatch.setattr(option_views, "BEAM_VIEW_AS", beam_view_as)
    monkeypatch.setattr(option_views, "_views", weakref.WeakKeyDictionary())
    monkeypatch.setattr(PipelineOptions, "view_as", PipelineOptions.view_as)
    option_views.install()
    return built


def _values(view: PipelineOptions) -> dict:
    return {name: getattr(view, name) for name in view._visible_option_list()}


@pytest.mark.parametrize("cls", VIEWS, ids=lambda cls: cls.__name__)
def test_views_have_beams_values(cls, counted_beam_views):
    ours = PipelineOptions(FLAGS, temp_location="/tmp/x")
    beams = PipelineOptions(FLAGS, temp_location="/tmp/x")
    expected = _values(BEAM_VIEW_AS(beams, cls))
    assert _values(ours.view_as(cls)) == expected
    assert _values(ours.view_as(cls)) == expected
    assert ours.get_all_options() == beams.get_all_options()


def test_each_view_is_built_once_per_options(counted_beam_views):
    first, second = PipelineOptions(FLAGS), PipelineOptions(FLAGS)
    for _ in range(3):
        first.view_as(TypeOptions)
        first.view_as(StandardOptions)
        second.view_as(TypeOptions)
    assert counted_beam_views == [TypeOptions, StandardOptions, TypeOptions]


def test_writes_through_one_view_are_seen_by_all(counted_beam_views):
    options = PipelineOptions(FLAGS)
    options.view_as(DirectOptions).direct_num_workers = 5
    assert options.view_as(DirectOptions).direct_num_workers == 5
    assert options.get_all_options()["direct_num_workers"] == 5
    options.view_as(DebugOptions).add_experiment("b")
    assert options.view_as(DebugOptions).experiments == ["a", "b"]


def test_copies_and_unpickled_options_have_views_of_their_own(counted_beam_views):
    options = PipelineOptions(FLAGS)
    options.view_as(StandardOptions).streaming = True
    for other in (copy.deepcopy(options), pickle.loads(pickle.dumps(options))):
        assert other.view_as(StandardOptions).streaming is True
        other.view_as(StandardOptions).streaming = False
        assert options.view_as(StandardOptions).streaming is True


def test_a_replaced_dictionary_gets_a_new_view(counted_beam_views):
    options = PipelineOptions(FLAGS)
    assert options.view_as(DirectOptions).direct_num_workers == 2
    options._all_options = {"direct_num_workers": 7}
    assert options.view_as(DirectOptions).direct_num_workers == 7
    assert counted_beam_views == [DirectOptions, DirectOptions]


def test_views_go_with_their_options(counted_beam_views):
    options = PipelineOptions(FLAGS)
    options.view_as(TypeOptions)
    gone = weakref.ref(options)
    del options
    gc.collect()
    assert gone() is None
    assert len(option_views._views) == 0


def _length(word: str) -> int:
    return len(word)


@pytest.mark.parametrize("type_check", [True, False])
def test_installed_pipelines_still_check_types_as_told(type_check, counted_beam_views):
    """Pipeline.apply reads pipeline_type_check through the views: a wrong element type
    fails at construction with it on and passes with it off."""
    flags = [] if type_check else ["--no_pipeline_type_check"]
    pipeline = beam.Pipeline("DirectRunner", options=PipelineOptions(flags))
    numbers = pipeline | beam.Create([1, 2]).with_output_types(int)
    if type_check:
        with pytest.raises(TypeCheckError, match="_length"):
            numbers | beam.Map(_length).with_input_types(str)
    else:
        numbers | beam.Map(_length).with_input_types(str)
    assert counted_beam_views.count(TypeOptions) == 1


def test_importing_installs_nothing():
    code = (
        "from apache_beam.options.pipeline_options import PipelineOptions; "
        "from runtime.speedups import option_views; "
        "print(PipelineOptions.view_as is option_views.BEAM_VIEW_AS)"
    )
    assert fresh_python(code) == "True"
