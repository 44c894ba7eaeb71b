"""The champion record (runtime/champion.py): how pushes, promotions and rollbacks move it,
how it is written, when its champion cannot serve as a baseline, and the pointers the
Champion component writes."""

from __future__ import annotations

import os

import pytest

from runtime import champion


def _entry(root, name: str, files: bool = False) -> champion.Entry:
    model, blessing = os.path.join(root, "Trainer", name), os.path.join(root, "Evaluator", name)
    if files:
        os.makedirs(os.path.join(model, champion.SERVING_DIR))
        open(os.path.join(model, champion.SERVING_DIR, "saved_model.pb"), "wb").close()
        os.makedirs(blessing)
        open(os.path.join(blessing, champion.BLESSED_FILE), "w").close()
    return champion.Entry(model, blessing, f"/serving/{name}", name)


def test_a_push_makes_the_champion_and_keeps_the_one_before_for_a_rollback(tmp_path):
    first, second = _entry(tmp_path, "1"), _entry(tmp_path, "2")
    record = champion.Record().pushed(first).pushed(second)
    assert record.champion == second and record.previous == (first,) and record.candidate is None
    back = record.rolled_back_once()
    assert back.champion == first and back.previous == () and back.rolled_back == (second,)
    with pytest.raises(champion.RecordError, match="no earlier champion"):
        back.rolled_back_once()


def test_a_canary_is_the_candidate_until_promoted_and_a_rollback_drops_it(tmp_path):
    first, canary = _entry(tmp_path, "1"), _entry(tmp_path, "2")
    record = champion.Record().pushed(first).pushed(canary, canary=True)
    assert record.champion == first and record.candidate == canary
    promoted = record.promoted()
    assert promoted.champion == canary and promoted.previous == (first,) and promoted.candidate is None
    dropped = record.rolled_back_once()
    assert dropped.champion == first and dropped.candidate is None and dropped.rolled_back == (canary,)
    with pytest.raises(champion.RecordError, match="no candidate"):
        dropped.promoted()


def test_the_record_is_written_whole_and_read_back(tmp_path):
    root = str(tmp_path / "root")
    assert champion.read(root) == champion.Record()
    record = champion.update(root, lambda r: r.pushed(_entry(root, "1")).pushed(_entry(root, "2"), canary=True))
    assert champion.read(root) == record
    assert os.listdir(root) == [champion.RECORD_FILE]  # no partial file left beside it


def test_the_champion_is_handed_over_only_when_its_files_are_there_and_ours(tmp_path):
    root = str(tmp_path / "root")
    assert champion.champion_of(root) == (None, "no model of this pipeline has been blessed and pushed yet")
    served = _entry(root, "1", files=True)
    champion.write(root, champion.Record().pushed(served))
    assert champion.champion_of(root) == (served, "")
    os.remove(os.path.join(served.blessing, champion.BLESSED_FILE))
    entry, reason = champion.champion_of(root)
    assert entry is None and "its blessing's files are gone" in reason
    foreign = _entry(tmp_path / "other-root", "1", files=True)
    champion.write(root, champion.Record().pushed(foreign))
    entry, reason = champion.champion_of(root)
    assert entry is None and "not under this pipeline's root" in reason


def test_a_pointer_resolves_to_its_target_or_says_why_there_is_none(tmp_path):
    pointer, plain = str(tmp_path / "pointer"), str(tmp_path / "plain")
    champion.write_pointer(pointer, "/champion/model")
    assert champion.resolve(pointer) == ("/champion/model", "")
    champion.write_pointer(pointer, None, "no champion yet")
    assert champion.resolve(pointer) == (None, "no champion yet")
    assert champion.resolve(plain) == (plain, "")  # an artifact that is no pointer is itself
