"""The fast CsvExampleGen against TFX's own: same rows in the same splits, same features,
same artifact properties; its worker processes, fall-backs and errors."""

from __future__ import annotations

import dataclasses
import glob
import os
import re
from pathlib import Path

import pytest
import tensorflow as tf
from tensorflow_data_validation.utils import stats_util
from tfx import v1 as tfx
from tfx.types import artifact_utils

from components import csv_encoding, csv_example_gen, csv_statistics, statistics_gen
from models import problem as problem_lib
from pipeline.pipeline import create_pipeline
from runtime import beam_args, beam_pool, decoded_columns, speedups
from tests.support.harness import node, run_component

# Cells on which a hand-written converter could go wrong; each row has all 9 columns.
EDGE_CASE_CSV = '''\
id,label,mixed,spaced,huge,empty,text,negative,quoted,nbsp
1,0,1,5,1,,plain,-3,"a, b",1
2,1,2.5, 7,99999999999999999999,,NA,-0.5,"line one
line two",2
3,0,1e3,8,3,,,-7,"",\xa03
4,1,,9,4,,Zürich,,"say ""hi""",4
5,0,-2,1_000,5,,1.5,0,x,5
'''


def _split_records(examples) -> dict[str, list[bytes]]:
    """Each split's tf.Examples (deterministic bytes, sorted: file order is not a contract)."""
    result = {}
    for split in artifact_utils.decode_split_names(examples.split_names):
        files = sorted(glob.glob(os.path.join(artifact_utils.get_split_uri([examples], split), "*.gz")))
        records = tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator()
        result[split] = sorted(tf.train.Example.FromString(r).SerializeToString(deterministic=True) for r in records)
    return result


def _both(config, root: Path, **example_gen_args):
    """Outputs of TFX's CsvExampleGen and of ours, on the same configuration."""
    ours = node(create_pipeline(config), "CsvExampleGen")
    theirs = tfx.components.CsvExampleGen(
        input_base=config.data_root,
        input_config=example_gen_args.get("input_config", ours.exec_properties["input_config"]),
        output_config=example_gen_args.get("output_config", ours.exec_properties["output_config"]),
    )
    if example_gen_args:
        ours = csv_example_gen.CsvExampleGen(input_base=config.data_root, **example_gen_args)
    return (
        run_component(theirs, {}, str(root / "tfx"))["examples"][0],
        run_component(ours, {}, str(root / "ours"))["examples"][0],
    )


@pytest.fixture(scope="module")
def compared(small_config, tmp_path_factory):
    return _both(small_config, tmp_path_factory.mktemp("compare"))


def test_same_rows_in_the_same_splits_as_tfx(compared):
    theirs, ours = compared
    expected, actual = _split_records(theirs), _split_records(ours)
    assert set(actual) == {"train", "eval"}
    for split in expected:
        assert actual[split] == expected[split], split
    assert len(actual["train"]) > len(actual["eval"]) > 0


def test_same_artifact_properties_as_tfx(compared):
    theirs, ours = compared
    assert ours.split_names == theirs.split_names
    for name in ("payload_format", "file_format"):
        assert ours.has_custom_property(name) == theirs.has_custom_property(name), name
        if theirs.has_custom_property(name):
            assert ours.get_string_custom_property(name) == theirs.get_string_custom_property(name)


def test_file_names_follow_tfx(compared):
    _, ours = compared
    for split in ("train", "eval"):
        names = os.listdir(artifact_utils.get_split_uri([ours], split))
        assert names == ["data_tfrecord-00000-of-00001.gz"]


def test_edge_case_cells_are_typed_and_split_as_tfx_does(small_config, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "edge.csv").write_text(EDGE_CASE_CSV, encoding="utf-8")
    config = small_config.__class__(data_root=str(data), output_root=str(tmp_path / "out"))
    # One split: hashed into two, five rows could leave one empty, which stops the run.
    one_split = tfx.proto.Input(splits=[tfx.proto.Input.Split(name="train", pattern="edge.csv")])
    theirs, ours = _both(config, tmp_path, input_config=one_split, output_config=tfx.proto.Output())
    assert _split_records(ours) == _split_records(theirs)
    types = csv_encoding.infer_column_types([str(data / "edge.csv")])
    assert {n: t.name for n, t in types.items()} == {
        "id": "INT",
        "label": "INT",
        "mixed": "FLOAT",
        "spaced": "INT",
        "huge": "STRING",
        "empty": "UNKNOWN",
        "text": "STRING",
        "negative": "FLOAT",
        "quoted": "STRING",
        # int() of the UTF-8 bytes of a no-break space fails, as in tfx_bsl (of the str it would not).
        "nbsp": "STRING",
    }


def _data_dir(tmp_path, small_config, rows: int, name: str = "part.csv") -> Path:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    lines = Path(small_config.data_root, "data.csv").read_text().splitlines()
    (data / name).write_text("\n".join(lines[: rows + 1]) + "\n")
    return data


def _ours(small_config, data: Path, tmp_path):
    config = small_config.__class__(data_root=str(data), output_root=str(tmp_path / "out"))
    return run_component(node(create_pipeline(config), "CsvExampleGen"), {}, str(tmp_path / "ours"))


def test_a_header_only_file_stops_here_where_tfx_writes_empty_splits(small_config, tmp_path):
    data = _data_dir(tmp_path, small_config, rows=0, name="empty.csv")
    with pytest.raises(csv_example_gen.NoDataError, match=r"empty\.csv: a header but no data rows"):
        _ours(small_config, data, tmp_path)


def test_a_split_left_empty_is_named_with_the_rows_per_split(small_config, tmp_path):
    data = _data_dir(tmp_path, small_config, rows=1)
    with pytest.raises(csv_example_gen.NoDataError, match=r"Split '(train|eval)' got none of the 1 rows"):
        _ours(small_config, data, tmp_path)


def test_no_matching_file_names_the_pattern_and_the_flag(small_config, tmp_path):
    (tmp_path / "data").mkdir()
    with pytest.raises(csv_example_gen.NoDataError, match=r"No file matches .*data/\*\.csv.*--data-pattern"):
        _ours(small_config, tmp_path / "data", tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", r"image\.csv is a binary file, not CSV"),
        ("fare,company\n1.5,Zürich Taxi\n".encode("latin-1"), r"image\.csv is not UTF-8 text .* rows"),
        ("fare,compañía\n1.5,x\n".encode("latin-1"), r"image\.csv is not UTF-8 text \(byte 0xf1 at offset 10"),
    ],
)
def test_an_unreadable_file_is_named_with_what_to_do(tmp_path, content, message):
    path = tmp_path / "image.csv"
    path.write_bytes(content)
    with pytest.raises(csv_encoding.CsvFileError, match=message):
        list(csv_encoding.read_blocks(str(path)))


def test_a_spreadsheets_csv_utf8_with_crlf_line_ends_runs_as_it_is(small_config, tmp_path):
    """A byte-order mark and CRLF line ends (a spreadsheet's "CSV UTF-8"): the same columns,
    rows and splits as the plain file."""
    (tmp_path / "plain").mkdir()
    plain = _data_dir(tmp_path / "plain", small_config, rows=60)
    saved = tmp_path / "saved" / "data"
    saved.mkdir(parents=True)
    text = (plain / "part.csv").read_text()
    (saved / "part.csv").write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    assert csv_encoding.column_names(str(saved / "part.csv")) == csv_encoding.column_names(str(plain / "part.csv"))
    assert _split_records(_ours(small_config, saved, tmp_path / "saved")["examples"][0]) == _split_records(
        _ours(small_config, plain, tmp_path / "plain")["examples"][0]
    )


@pytest.mark.parametrize(("separator", "called"), [(";", "semicolons"), ("\t", "tabs"), ("|", "vertical bars")])
def test_a_file_split_by_another_separator_is_named_as_such(tmp_path, separator, called):
    path = tmp_path / "export.csv"
    path.write_text(separator.join(["fare", "tips", "company"]) + "\n" + separator.join(["1,5", "0", "x"]) + "\n")
    with pytest.raises(csv_encoding.CsvFileError, match=rf"export\.csv is split by {called}, not commas"):
        csv_encoding.column_names(str(path))


def test_a_single_column_file_is_still_a_csv(tmp_path):
    path = tmp_path / "one.csv"
    path.write_text("fare\n1.5\n2\n")
    assert csv_encoding.column_names(str(path)) == ["fare"]
    assert sum(block.num_rows for block in csv_encoding.read_blocks(str(path))) == 2


@pytest.mark.parametrize("content", [b"", b"\n\n", b"  \r\n"])
def test_an_empty_file_is_named_as_empty(tmp_path, content):
    path = tmp_path / "nothing.csv"
    path.write_bytes(content)
    with pytest.raises(csv_encoding.CsvFileError, match=r"nothing\.csv is empty: a CSV file needs a header line"):
        csv_encoding.column_names(str(path))


def test_a_header_repeated_inside_a_file_is_named_with_its_row(tmp_path):
    """Two exports pasted together: the second header is a data row of text in number columns."""
    path = tmp_path / "pasted.csv"
    path.write_text("fare,company\n1.5,a\n2,b\nfare,company\n3,c\n")
    with pytest.raises(csv_encoding.CsvFileError, match=r"pasted\.csv: data row 3 repeats the header line"):
        csv_encoding.infer_column_types([str(path)])
    # Across blocks too: the row counts on from the blocks before.
    with pytest.raises(csv_encoding.CsvFileError, match=r"data row 3 repeats"):
        list(csv_encoding.read_blocks(str(path), block_bytes=16))


def test_a_value_equal_to_a_column_name_is_not_a_header(tmp_path):
    path = tmp_path / "values.csv"
    path.write_text("kind,company\nkind,x\nother,company\n")
    assert sum(block.num_rows for block in csv_encoding.read_blocks(str(path))) == 2


def test_files_with_different_headers_are_both_named_with_the_columns(tmp_path):
    (tmp_path / "a.csv").write_text("fare,tips\n1,2\n")
    (tmp_path / "b.csv").write_text("fare,tip\n1,2\n")
    with pytest.raises(csv_encoding.CsvFileError, match=r"b\.csv and .*a\.csv have different headers \(tip, tips\)"):
        csv_example_gen._glob_csv(str(tmp_path / "*.csv"))


def test_input_defined_splits_are_kept(small_config, tmp_path):
    data = tmp_path / "data"
    for split, rows in (("train", 30), ("eval", 12)):
        lines = Path(small_config.data_root, "data.csv").read_text().splitlines()
        (data / split).mkdir(parents=True)
        (data / split / "part.csv").write_text("\n".join(lines[: rows + 1]) + "\n")
    input_config = tfx.proto.Input(
        splits=[
            tfx.proto.Input.Split(name="train", pattern="train/*"),
            tfx.proto.Input.Split(name="eval", pattern="eval/*"),
        ]
    )
    config = small_config.__class__(data_root=str(data), output_root=str(tmp_path / "out"))
    theirs, ours = _both(config, tmp_path, input_config=input_config, output_config=tfx.proto.Output())
    actual = _split_records(ours)
    assert actual == _split_records(theirs)
    assert (len(actual["train"]), len(actual["eval"])) == (30, 12)


def test_worker_processes_write_one_shard_each_with_the_same_rows(no_pool, small_config, tmp_path):
    paths = [str(Path(small_config.data_root, "data.csv"))]
    single = [str(tmp_path / "one" / s) for s in ("train", "eval")]
    several = [str(tmp_path / "two" / s) for s in ("train", "eval")]
    # Small blocks, so the sample is several blocks shared out between two processes.
    counts_one = csv_example_gen.convert(paths, single, [2, 3], workers=1, block_bytes=8 << 10)
    counts_two = csv_example_gen.convert(paths, several, [2, 3], workers=2, block_bytes=8 << 10)
    assert counts_one == counts_two and sum(counts_two) == 600
    for one, two in zip(single, several, strict=True):
        assert sorted(os.listdir(two)) == ["data_tfrecord-00000-of-00002.gz", "data_tfrecord-00001-of-00002.gz"]
        read = lambda d: sorted(tf.data.TFRecordDataset(glob.glob(d + "/*"), "GZIP").as_numpy_iterator())  # noqa: E731
        assert read(one) == read(two)


def test_a_failing_worker_fails_the_component_with_its_error(no_pool, tmp_path):
    (tmp_path / "s").mkdir()
    job = dict(
        paths=[str(tmp_path / "missing.csv")],
        types={"a": "INT"},
        split_dirs=[str(tmp_path / "s")],
        buckets=None,
        shard=0,
        shards=2,
    )
    with pytest.raises(RuntimeError, match=r"(?s)worker failed.*missing\.csv"):
        csv_example_gen._run_workers([job])


@pytest.fixture
def pool():
    """The run's Beam pool of two processes, as ExampleGen starts it; closed afterwards."""
    beam_pool.start_in_background(2)
    yield
    beam_pool.close()


@pytest.fixture
def no_pool():
    """No Beam pool running (an earlier test's would take the jobs)."""
    beam_pool.close()


def test_with_the_runs_pool_its_processes_do_the_encoding_with_the_same_rows(pool, small_config, tmp_path, monkeypatch):
    paths = [str(Path(small_config.data_root, "data.csv"))]
    single = [str(tmp_path / "one" / s) for s in ("train", "eval")]
    pooled = [str(tmp_path / "pool" / s) for s in ("train", "eval")]
    counts_one = csv_example_gen.convert(paths, single, [2, 3], workers=1, block_bytes=8 << 10)

    def no_fresh_process():
        raise AssertionError("a fresh worker process was started beside the pool")

    monkeypatch.setattr(csv_example_gen, "worker_process_env", no_fresh_process)
    statistics = [csv_statistics.SplitStatistics(), csv_statistics.SplitStatistics()]
    counts_pooled = csv_example_gen.convert(
        paths, pooled, [2, 3], workers=2, block_bytes=8 << 10, statistics=statistics, keep_columns=True
    )
    assert counts_one == counts_pooled and sum(counts_pooled) == 600
    for one, two in zip(single, pooled, strict=True):
        assert sorted(f for f in os.listdir(two) if f.endswith(".gz")) == [
            "data_tfrecord-00000-of-00002.gz",
            "data_tfrecord-00001-of-00002.gz",
        ]
        read = lambda d: sorted(tf.data.TFRecordDataset(glob.glob(d + "/*"), "GZIP").as_numpy_iterator())  # noqa: E731
        assert read(one) == read(two)
    assert [s.to_proto().datasets[0].num_examples for s in statistics] == counts_pooled
    assert len(os.listdir(decoded_columns.columns_dir(pooled[0]))) == 2


def test_a_failing_job_in_the_pool_fails_the_component_with_its_error(pool, tmp_path):
    (tmp_path / "s").mkdir()
    job = dict(paths=[str(tmp_path / "missing.csv")], types={"a": "INT"}, split_dirs=[str(tmp_path / "s")])
    with pytest.raises(RuntimeError, match=r"(?s)failed in a Beam pool process.*missing\.csv"):
        csv_example_gen._run_workers([dict(job, buckets=None, shard=shard, shards=2) for shard in (0, 1)])


def test_example_gen_starts_the_runs_pool_when_its_args_name_the_pool(no_pool, small_config, tmp_path, compared):
    try:
        examples = run_component(
            node(create_pipeline(small_config), "CsvExampleGen"), {}, str(tmp_path), beam_args.pipeline_args(2)
        )["examples"][0]
        assert beam_pool.call_each("os:getpid", [[]] * 2) is not None
        assert len(beam_pool._pool.processes) == 2
        assert _split_records(examples) == _split_records(compared[0])
    finally:
        beam_pool.close()


def test_a_ragged_row_is_an_error_naming_the_file(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3\n")
    with pytest.raises(ValueError, match=r"bad\.csv is not a well-formed CSV file.*2 columns"):
        list(csv_encoding.read_blocks(str(bad)))


def test_files_on_other_file_systems_are_read_through_fileio(small_config):
    from tfx.dsl.io import fileio

    local = str(Path(small_config.data_root, "data.csv"))
    remote = "ram://csv-test/data.csv"
    fileio.makedirs("ram://csv-test")
    fileio.copy(local, remote, overwrite=True)
    assert csv_encoding.column_names(remote) == csv_encoding.column_names(local)
    assert [b.num_rows for b in csv_encoding.read_blocks(remote)] == [
        b.num_rows for b in csv_encoding.read_blocks(local)
    ]


def test_what_the_fast_path_lacks_goes_to_tfx_executor(small_config, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the fast path must not run")

    monkeypatch.setattr(csv_example_gen, "convert", refuse)
    output_config = tfx.proto.Output(
        split_config=tfx.proto.SplitConfig(
            splits=[
                tfx.proto.SplitConfig.Split(name="train", hash_buckets=2),
                tfx.proto.SplitConfig.Split(name="eval", hash_buckets=1),
            ],
            partition_feature_name="company",
        )
    )
    component = csv_example_gen.CsvExampleGen(input_base=small_config.data_root, output_config=output_config)
    examples = run_component(component, {}, str(tmp_path))["examples"][0]
    records = _split_records(examples)
    assert sum(len(r) for r in records.values()) == 600


def _driven(component, input_base: str):
    """``component`` with the exec properties TFX's ExampleGen driver resolves before its
    executor runs (the span, and the pattern with the span filled in), as every orchestrator
    runs it (Vertex: the task's preCacheCheck driver)."""
    from tfx.components.example_gen import input_processor
    from tfx.proto import example_gen_pb2, range_config_pb2
    from tfx.utils import proto_utils

    properties = component.exec_properties
    given = proto_utils.json_to_proto(properties["input_config"], example_gen_pb2.Input())
    ranged = properties.get("range_config")
    ranged = proto_utils.json_to_proto(ranged, range_config_pb2.RangeConfig()) if ranged else None
    processor = input_processor.FileBasedInputProcessor(input_base, given.splits, ranged)
    span, version = processor.resolve_span_and_version()
    resolved = example_gen_pb2.Input()
    resolved.CopyFrom(given)
    resolved.splits[0].pattern = processor.get_pattern_for_span_version(given.splits[0].pattern, span, version)
    properties.update(input_config=proto_utils.proto_to_json(resolved), span=span)
    return component


def _spans(root: Path, count: int) -> str:
    from tests.support.sample_data import write_sample

    for number in range(1, count + 1):
        write_sample(root / f"span-{number}", rows=200, every=7 + number)
    return str(root)


def _windowed(config, input_base: str, window_spans: int, range_config=None, with_speedups: bool = True):
    ours = node(create_pipeline(config), "CsvExampleGen")
    return csv_example_gen.CsvExampleGen(
        input_base=input_base,
        input_config=tfx.proto.Input(splits=[tfx.proto.Input.Split(name="single_split", pattern="span-{SPAN}/*.csv")]),
        output_config=ours.exec_properties["output_config"],
        window_spans=window_spans,
        window_splits=["train"],
        range_config=range_config,
        with_speedups=with_speedups,
    )


def test_a_window_trains_on_the_older_spans_and_evaluates_on_the_newest_only(small_config, tmp_path):
    """The window's train split holds each span's training rows, as that span alone would
    have split them; its eval split, the newest span's alone."""
    data = _spans(tmp_path / "data", 3)
    window = run_component(_driven(_windowed(small_config, data, 2), data), {}, str(tmp_path / "window"))
    examples = window["examples"][0]
    assert examples.get_string_custom_property(csv_example_gen.WINDOW_PROPERTY) == "2-3"
    alone = {}
    for number in (2, 3):
        only = tmp_path / f"only-{number}"
        (only / f"span-{number}").parent.mkdir(parents=True)
        os.symlink(os.path.join(data, f"span-{number}"), only / f"span-{number}")
        component = _driven(_windowed(small_config, str(only), 1), str(only))
        alone[number] = _split_records(run_component(component, {}, str(tmp_path / f"alone-{number}"))["examples"][0])
    got = _split_records(examples)
    assert got["train"] == sorted(alone[2]["train"] + alone[3]["train"])
    assert got["eval"] == alone[3]["eval"]
    assert alone[2]["eval"]  # the older span's eval rows exist, and are left out
    # The statistics kept for StatisticsGen describe the same rows.
    kept = statistics_gen.precomputed(examples, ["train", "eval"])
    for split, path in kept.items():
        assert stats_util.load_stats_binary(path).datasets[0].num_examples == len(got[split])
    # So do the columns kept for Transform, a file for each record file.
    for split in ("train", "eval"):
        files = decoded_columns.kept_columns_files(artifact_utils.get_split_uri([examples], split) + "/*")
        assert sum(_kept_rows(path) for path in files) == len(got[split])


def _kept_rows(path: str) -> int:
    with open(path, "rb") as source:
        return sum(batch.num_rows for batch in decoded_columns.read(source))


def _refuse_the_fast_path(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the fast path must not run")

    monkeypatch.setattr(csv_example_gen, "convert", refuse)


def test_with_the_speedups_off_tfx_executor_writes_the_examples_and_nothing_beside(
    small_config, tmp_path, monkeypatch, compared
):
    """The pipeline's switch is ExampleGen's parameter: off, TFX's own executor (tfx_bsl's
    CSV decoder) writes the examples, the rows TFX's CsvExampleGen writes, and nothing else."""
    example_gen = node(create_pipeline(dataclasses.replace(small_config, speedups=False)), "CsvExampleGen")
    assert example_gen.exec_properties[speedups.PARAMETER] == 0
    _refuse_the_fast_path(monkeypatch)
    examples = run_component(example_gen, {}, str(tmp_path))["examples"][0]
    assert sorted(os.listdir(examples.uri)) == ["Split-eval", "Split-train"]
    assert not examples.has_custom_property(statistics_gen.STATISTICS_PROPERTY)
    theirs, _ = compared
    assert _split_records(examples) == _split_records(theirs)


def test_with_the_speedups_off_tfx_executor_reads_the_window_as_the_fast_path_does(small_config, tmp_path, monkeypatch):
    data = _spans(tmp_path / "data", 3)
    fast = run_component(_driven(_windowed(small_config, data, 2), data), {}, str(tmp_path / "fast"))["examples"][0]
    _refuse_the_fast_path(monkeypatch)
    component = _driven(_windowed(small_config, data, 2, with_speedups=False), data)
    plain = run_component(component, {}, str(tmp_path / "plain"))["examples"][0]
    assert plain.get_string_custom_property(csv_example_gen.WINDOW_PROPERTY) == "2-3"
    assert _split_records(plain) == _split_records(fast)
    assert not plain.has_custom_property(statistics_gen.STATISTICS_PROPERTY)


def test_a_given_span_ends_the_window_there(small_config, tmp_path):
    from tfx.proto import range_config_pb2

    data = _spans(tmp_path / "data", 3)
    static = range_config_pb2.RangeConfig(
        static_range=range_config_pb2.StaticRange(start_span_number=2, end_span_number=2)
    )
    component = _driven(_windowed(small_config, data, 4, static), data)
    examples = run_component(component, {}, str(tmp_path / "out"))["examples"][0]
    assert examples.get_string_custom_property(csv_example_gen.WINDOW_PROPERTY) == "1-2"


def test_spans_with_different_headers_are_refused(small_config, tmp_path):
    data = _spans(tmp_path / "data", 2)
    first = Path(data) / "span-1" / "data.csv"
    lines = first.read_text().splitlines()
    first.write_text("\n".join([lines[0] + ",extra", *(line + ",1" for line in lines[1:])]) + "\n")
    with pytest.raises(csv_encoding.CsvFileError, match="different headers"):
        run_component(_driven(_windowed(small_config, data, 2), data), {}, str(tmp_path / "out"))


# ---------------------------------------------------------------- header names


def _as_people_write_them(small_config, tmp_path) -> tuple[Path, dict[str, str]]:
    """The sample with every header as a spreadsheet would write it ("Trip Miles ($)" for
    trip_miles), and those header names by feature name, from the scaffold's rule."""
    lines = Path(small_config.data_root, "data.csv").read_text().splitlines()
    names = lines[0].split(",")
    people = [name.replace("_", " ").title() + " ($)" for name in names]
    features = problem_lib.feature_names(people)
    assert [features[p] for p in people] == names  # the rule takes each back to its feature name
    data = tmp_path / "people"
    data.mkdir()
    (data / "data.csv").write_text("\n".join([",".join(people), *lines[1:]]) + "\n")
    return data, {features[p]: p for p in people}


def _split_config():
    return tfx.proto.Output(
        split_config=tfx.proto.SplitConfig(
            splits=[
                tfx.proto.SplitConfig.Split(name="train", hash_buckets=2),
                tfx.proto.SplitConfig.Split(name="eval", hash_buckets=1),
            ]
        )
    )


def test_headers_as_people_write_them_make_the_examples_their_feature_names_make(small_config, tmp_path):
    data, headers = _as_people_write_them(small_config, tmp_path)
    theirs = tfx.components.CsvExampleGen(input_base=small_config.data_root, output_config=_split_config())
    ours = csv_example_gen.CsvExampleGen(input_base=str(data), output_config=_split_config(), column_names=headers)
    expected = _split_records(run_component(theirs, {}, str(tmp_path / "tfx"))["examples"][0])
    assert _split_records(run_component(ours, {}, str(tmp_path / "ours"))["examples"][0]) == expected
    # Without a mapping, nothing is renamed and nothing is passed (the shipped problems' components as before).
    assert node(create_pipeline(small_config), "CsvExampleGen").exec_properties.get("column_names") is None


def test_worker_processes_rename_the_headers_too(no_pool, small_config, tmp_path):
    data, headers = _as_people_write_them(small_config, tmp_path)
    original = [str(tmp_path / "original" / s) for s in ("train", "eval")]
    renamed = [str(tmp_path / "renamed" / s) for s in ("train", "eval")]
    paths = [str(Path(small_config.data_root, "data.csv"))]
    counts = csv_example_gen.convert(paths, original, [2, 3], workers=2, block_bytes=8 << 10)
    assert (
        csv_example_gen.convert(
            [str(data / "data.csv")], renamed, [2, 3], workers=2, block_bytes=8 << 10, headers=headers
        )
        == counts
    )
    for one, two in zip(original, renamed, strict=True):
        read = lambda d: sorted(tf.data.TFRecordDataset(glob.glob(d + "/*"), "GZIP").as_numpy_iterator())  # noqa: E731
        assert read(one) == read(two)


def test_tfx_executor_renames_the_headers_too(small_config, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the fast path must not run")

    data, headers = _as_people_write_them(small_config, tmp_path)
    expected = _split_records(
        run_component(
            tfx.components.CsvExampleGen(input_base=small_config.data_root, output_config=_split_config()),
            {},
            str(tmp_path / "tfx"),
        )["examples"][0]
    )
    monkeypatch.setattr(csv_example_gen.beam_args, "runs_locally", lambda args: False)
    monkeypatch.setattr(csv_example_gen, "convert", refuse)
    ours = csv_example_gen.CsvExampleGen(input_base=str(data), output_config=_split_config(), column_names=headers)
    assert _split_records(run_component(ours, {}, str(tmp_path / "ours"))["examples"][0]) == expected


def test_a_header_renamed_in_new_data_stops_example_gen_naming_the_column(small_config, tmp_path):
    data, headers = _as_people_write_them(small_config, tmp_path)
    feature, header = next(iter(headers.items()))
    text = (data / "data.csv").read_text()
    (data / "data.csv").write_text(text.replace(header, header.lower().replace(" ", ""), 1))
    ours = csv_example_gen.CsvExampleGen(input_base=str(data), output_config=_split_config(), column_names=headers)
    with pytest.raises(csv_encoding.CsvFileError, match=f"rename it back to '{re.escape(header)}'.*{feature} ="):
        run_component(ours, {}, str(tmp_path / "ours"))


@pytest.mark.parametrize("static_span", [None, 2])
def test_without_a_driver_the_executor_resolves_the_span_as_tfxs_driver_does(small_config, tmp_path, static_span):
    """Where no orchestrator runs TFX's driver (the open-source Kubeflow backend), the
    executor resolves the span itself: the same rows, window, span, version and input
    fingerprint as after TFX's driver."""
    from tfx.components.example_gen import input_processor
    from tfx.proto import range_config_pb2

    data = _spans(tmp_path / "data", 3)
    static = range_config_pb2.RangeConfig(
        static_range=range_config_pb2.StaticRange(start_span_number=static_span, end_span_number=static_span)
    )
    ranged = static if static_span else None
    driven = run_component(_driven(_windowed(small_config, data, 2, ranged), data), {}, str(tmp_path / "driven"))
    itself = run_component(_windowed(small_config, data, 2, ranged), {}, str(tmp_path / "itself"))
    (driven,), (itself,) = driven["examples"], itself["examples"]
    assert _split_records(itself) == _split_records(driven)
    window = itself.get_string_custom_property(csv_example_gen.WINDOW_PROPERTY)
    assert window == driven.get_string_custom_property(csv_example_gen.WINDOW_PROPERTY)
    assert window == ("1-2" if static_span else "2-3")
    split = tfx.proto.Input.Split(name="single_split", pattern="span-{SPAN}/*.csv")
    processor = input_processor.FileBasedInputProcessor(data, [split], ranged)
    span, version = processor.resolve_span_and_version()
    # On the artifact as TFX's driver puts them there (driver.update_output_artifact).
    assert itself.get_int_custom_property("span") == span == (static_span or 3) and version is None
    assert itself.get_string_custom_property("input_fingerprint") == processor.get_input_fingerprint(span, version)


def test_the_driverless_variant_is_no_file_based_example_gen_and_takes_the_run_id(small_config):
    """Kubeflow's compiler gives every FileBasedExampleGen a driver hook; this one has none."""
    import dataclasses

    from tfx.components.example_gen.component import FileBasedExampleGen

    from components.champion import RUN_ID_PLACEHOLDER

    example_gen = node(create_pipeline(dataclasses.replace(small_config, example_gen_driver=False)), "CsvExampleGen")
    assert isinstance(example_gen, csv_example_gen.CsvExampleGenWithoutDriver)
    assert not isinstance(example_gen, FileBasedExampleGen)
    assert example_gen.exec_properties[csv_example_gen.RUN_ID_KEY] == RUN_ID_PLACEHOLDER
    default = node(create_pipeline(small_config), "CsvExampleGen")
    assert isinstance(default, FileBasedExampleGen) and default.exec_properties.get(csv_example_gen.RUN_ID_KEY) is None


def test_a_span_handed_over_as_a_json_number_is_a_whole_span(small_config, tmp_path):
    """Pipeline spec 2.1 hands the driver's span over as a JSON number (2.0 on Vertex)."""
    data = _spans(tmp_path / "data", 2)
    component = _driven(_windowed(small_config, data, 2), data)
    component.exec_properties["span"] = float(component.exec_properties["span"])
    examples = run_component(component, {}, str(tmp_path / "out"))["examples"][0]
    assert examples.get_string_custom_property(csv_example_gen.WINDOW_PROPERTY) == "1-2"
