"""Fetching Flink's and Beam's parts: a file kept only when its hash is the published one,
directories that appear whole or not at all, the job server's launcher manifest."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import zipfile

import pytest

from flink_cluster import fetch


@pytest.fixture
def published(tmp_path, monkeypatch):
    """A file served from this machine, listed by a stand-in index under its sha256."""
    served = tmp_path / "served" / "part-1.0.tar.gz"
    served.parent.mkdir()
    served.write_bytes(b"the published bytes")
    monkeypatch.setattr(fetch, "index_entry", lambda file: {"url": served.as_uri()})
    return fetch.PyPIFile("part", "1.0", served.name, hashlib.sha256(served.read_bytes()).hexdigest())


def test_a_download_matching_its_checksum_is_kept(published, tmp_path):
    target = fetch.download(published, tmp_path / "downloads", progress=lambda line: None)
    assert target.read_bytes() == b"the published bytes"
    assert [p.name for p in target.parent.iterdir()] == [published.filename]


def test_a_download_unlike_its_checksum_is_refused_and_nothing_stays(published, tmp_path):
    wrong = fetch.PyPIFile(published.project, published.version, published.filename, "0" * 64)
    with pytest.raises(fetch.ChecksumError, match="sha256"):
        fetch.download(wrong, tmp_path / "downloads", progress=lambda line: None)
    assert list((tmp_path / "downloads").iterdir()) == []


def test_a_damaged_copy_is_fetched_again(published, tmp_path):
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / published.filename).write_bytes(b"cut sho")
    target = fetch.download(published, tmp_path / "downloads", progress=lambda line: None)
    assert target.read_bytes() == b"the published bytes"


def test_an_interrupted_assembly_leaves_nothing_and_a_rerun_completes(tmp_path):
    final = tmp_path / "home"

    def interrupted(scratch):
        (scratch / "half").write_text("x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fetch.assembled(final, interrupted)
    assert list(tmp_path.iterdir()) == []
    fetch.assembled(final, lambda scratch: (scratch / "whole").write_text("x"))
    assert [p.name for p in final.iterdir()] == ["whole"]
    fetch.assembled(final, interrupted)  # complete: not built again


def test_the_launcher_manifest_names_every_jar_and_the_beam_version(tmp_path):
    jars = [tmp_path / "lib" / f"a-dependency-with-a-rather-long-name-{n}.jar" for n in range(40)]
    launcher = tmp_path / "launcher.jar"
    fetch.write_launcher(launcher, jars)
    with zipfile.ZipFile(launcher) as jar:
        raw = jar.read("META-INF/MANIFEST.MF")
    assert max(len(line) for line in raw.split(b"\r\n")) <= 72
    attributes = fetch.launcher_attributes(launcher)
    assert attributes["Main-Class"] == "org.apache.beam.runners.flink.FlinkJobServerDriver"
    assert attributes["Class-Path"].split() == [f"lib/{jar.name}" for jar in jars]
    assert attributes["Implementation-Version"] == fetch.JOB_SERVER_BEAM_VERSION


def test_java_runs_the_launcher_with_its_class_path(tmp_path):
    """``java -jar`` reads the wrapped manifest: the main class is found in a jar named last
    on a long ``Class-Path``."""
    if shutil.which("javac") is None:
        pytest.skip("no JDK (javac) is installed")
    (tmp_path / "Hello.java").write_text(
        'class Hello { public static void main(String[] a) { System.out.println("hello"); } }'
    )
    subprocess.run(["javac", "-d", str(tmp_path / "classes"), str(tmp_path / "Hello.java")], check=True)
    (tmp_path / "lib").mkdir()
    with zipfile.ZipFile(tmp_path / "lib" / "hello.jar", "w") as jar:
        jar.write(tmp_path / "classes" / "Hello.class", "Hello.class")
    jars = [tmp_path / "lib" / f"absent-dependency-number-{n}.jar" for n in range(30)] + [
        tmp_path / "lib" / "hello.jar"
    ]
    fetch.write_launcher(tmp_path / "launcher.jar", jars, main_class="Hello")
    ran = subprocess.run(["java", "-jar", str(tmp_path / "launcher.jar")], capture_output=True, text=True)
    assert ran.stdout == "hello\n", ran.stderr
