"""``python -m runs.release`` on a local serving directory: what TensorFlow Serving would
serve, rollback (kept, not deleted), and the refusals. On Vertex AI its commands are
``components/registry.py``'s, tested through the stand-ins in tests/components/test_registry.py."""

from __future__ import annotations

import os

import pytest

from runs import release
from tests.support.problems import SHIPPED, SHIPPED_DIRS


def _serving_dir(root, versions: list[str]) -> str:
    folder = root / "serving_model" / SHIPPED["penguins"].name
    for version in versions:
        (folder / version).mkdir(parents=True)
        (folder / version / "saved_model.pb").write_bytes(b"")
    return str(folder)


def _run(root, command: str, capsys) -> tuple[int, str, str]:
    argv = [command, "--problem", str(SHIPPED_DIRS["penguins"]), "--output-root", str(root)]
    code = release.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_status_says_which_version_tensorflow_serving_serves(tmp_path, capsys):
    _serving_dir(tmp_path, ["1700000001", "1700000100", "1700000020"])
    code, out, _ = _run(tmp_path, "status", capsys)
    assert code == 0
    assert "TensorFlow Serving serves version 1700000100 (the newest)" in out
    assert out.index("version 1700000100 (serving)") < out.index("version 1700000020") < out.index("1700000001")


def test_rollback_moves_the_newest_out_and_keeps_it_and_goes_on_to_the_one_before(tmp_path, capsys):
    serving = _serving_dir(tmp_path, ["1", "2", "3"])
    code, out, _ = _run(tmp_path, "rollback", capsys)
    assert code == 0 and "now serves version 2" in out
    assert release.local_versions(serving) == ["1", "2"]
    assert os.path.isfile(os.path.join(serving + release.ROLLED_BACK_SUFFIX, "3", "saved_model.pb"))
    # After a rollback, another one goes back one more.
    assert _run(tmp_path, "rollback", capsys)[0] == 0
    assert release.local_versions(serving) == ["1"]
    code, _, err = _run(tmp_path, "rollback", capsys)
    assert code == 2 and "no previous version to roll back to" in err and "version 1 is the only one" in err
    assert release.local_versions(serving) == ["1"]  # a refusal changes nothing
    assert "rolled back, kept in" in _run(tmp_path, "status", capsys)[1]


def test_promote_is_refused_locally_with_the_reason(tmp_path, capsys):
    serving = _serving_dir(tmp_path, ["1", "2"])
    code, _, err = _run(tmp_path, "promote", capsys)
    assert code == 2 and "a serving directory has no canary" in err and "--endpoint-name" in err
    assert release.local_versions(serving) == ["1", "2"]


def test_nothing_pushed_yet_is_said(tmp_path, capsys):
    code, _, err = _run(tmp_path, "status", capsys)
    assert code == 2 and "nothing was pushed to" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--project", "p"], "--project needs --region and a gs:// --output-root"),
        (["--endpoint-name", "e"], "--endpoint-name needs --project and --region"),
    ],
)
def test_wrong_flags_are_named(tmp_path, capsys, extra, message):
    code = release.main(["status", "--problem", str(SHIPPED_DIRS["penguins"]), "--output-root", str(tmp_path), *extra])
    assert code == 2 and message in capsys.readouterr().err


def _record_pushes(root, versions: list[str]) -> str:
    """The champion record as the Pusher leaves it after pushing each version in turn."""
    from pipeline.config import PipelineConfig
    from runtime import champion

    pipeline_root = PipelineConfig(problem=SHIPPED["penguins"], output_root=str(root)).pipeline_root
    for version in versions:
        entry = champion.Entry(f"{pipeline_root}/Trainer/model/{version}", f"{pipeline_root}/b/{version}", "", version)
        champion.update(pipeline_root, lambda record, entry=entry: record.pushed(entry))
    return pipeline_root


def test_rollback_moves_the_champion_record_with_what_serves(tmp_path, capsys):
    from runtime import champion

    _serving_dir(tmp_path, ["1", "2", "3"])
    pipeline_root = _record_pushes(tmp_path, ["1", "2", "3"])
    code, out, _ = _run(tmp_path, "rollback", capsys)
    assert code == 0 and "the next run compares with and warm-starts from version 2" in out
    record = champion.read(pipeline_root)
    assert record.champion.version == "2" and [e.version for e in record.previous] == ["1"]
    assert [e.version for e in record.rolled_back] == ["3"]
    assert (
        "champion record: the next run compares with and warm-starts from version 2"
        in _run(tmp_path, "status", capsys)[1]
    )


def test_a_record_that_disagrees_with_the_serving_directory_is_refused_and_nothing_moves(tmp_path, capsys):
    from runtime import champion

    serving = _serving_dir(tmp_path, ["1", "2", "3"])
    pipeline_root = _record_pushes(tmp_path, ["1", "2"])
    before = champion.read(pipeline_root)
    code, _, err = _run(tmp_path, "rollback", capsys)
    assert code == 2 and "names version 2 while" in err and "serves version 3" in err
    assert release.local_versions(serving) == ["1", "2", "3"] and champion.read(pipeline_root) == before
