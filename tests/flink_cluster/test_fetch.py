"""Fetching Flink's and Beam's parts: a file kept only when its hash is the published one,
directories that appear whole or not at all, the job server's launcher manifest, the job
server shaded into one jar."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import zipfile
from xml.etree import ElementTree

import pytest

from flink_cluster import fetch
from launch import flink
from tests.support.flink_parts import fetched

POM = {"m": "http://maven.apache.org/POM/4.0.0"}


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


def test_the_fat_jar_is_shaded_as_beams_own_job_server_jar():
    """Beam's Gradle shadowJar: services files merged, the job server as main class,
    signatures dropped; the same dependencies as the launcher's."""
    project = ElementTree.fromstring(fetch.job_server_pom(shaded=True))
    launcher = ElementTree.fromstring(fetch.job_server_pom())
    assert project.findtext("m:packaging", namespaces=POM) == "jar"
    assert dependencies(project) == dependencies(launcher) and len(dependencies(project)) == 4
    plugin = project.find("m:build/m:plugins/m:plugin", POM)
    assert ":".join(plugin.findtext(f"m:{key}", namespaces=POM) for key in ("groupId", "artifactId", "version")) == (
        fetch.SHADE_PLUGIN
    )
    transformers = {t.get("implementation").rsplit(".", 1)[1]: t for t in plugin.iterfind(".//m:transformer", POM)}
    assert set(transformers) == {"ServicesResourceTransformer", "ManifestResourceTransformer"}
    assert transformers["ManifestResourceTransformer"].findtext("m:mainClass", namespaces=POM) == fetch.JOB_SERVER_MAIN
    excluded = [e.text for e in plugin.iterfind(".//m:filter/m:excludes/m:exclude", POM)]
    assert excluded == ["META-INF/*.SF", "META-INF/*.DSA", "META-INF/*.RSA"]


def dependencies(project: ElementTree.Element) -> list[str]:
    return [
        ":".join(d.findtext(f"m:{key}", namespaces=POM) for key in ("groupId", "artifactId", "version"))
        for d in project.iterfind("m:dependencies/m:dependency", POM)
    ]


@pytest.fixture
def shading_maven(monkeypatch):
    """``mvn`` replaced: each call recorded, the shaded jar written where Maven puts it (or a failure)."""
    calls = []

    def maven(pom, repository, *goals):
        calls.append(goals)
        if monkeypatch.fail:
            raise fetch.FetchError("mvn failed")
        (pom.parent / "target").mkdir()
        (pom.parent / "target" / f"beam-flink-job-server-{fetch.JOB_SERVER_BEAM_VERSION}.jar").write_bytes(b"jar")

    monkeypatch.fail = False
    monkeypatch.setattr(fetch, "maven", maven)
    return calls, monkeypatch


def test_the_fat_jar_is_built_once_and_kept(shading_maven, tmp_path):
    calls, _ = shading_maven
    jar = fetch.fetch_fat_job_server(tmp_path, progress=lambda line: None)
    assert jar == fetch.fat_job_server_jar(tmp_path) and jar.read_bytes() == b"jar"
    assert calls == [(f"{fetch.JAR_PLUGIN}:jar", f"{fetch.SHADE_PLUGIN}:shade")]
    assert fetch.fetch_fat_job_server(tmp_path, progress=lambda line: None) == jar
    assert len(calls) == 1
    assert [p.name for p in tmp_path.iterdir()] == [jar.name]


def test_a_failed_shading_leaves_nothing(shading_maven, tmp_path):
    _, monkeypatch = shading_maven
    monkeypatch.fail = True
    with pytest.raises(fetch.FetchError):
        fetch.fetch_fat_job_server(tmp_path, progress=lambda line: None)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_the_built_fat_jar_holds_the_job_server_and_every_registrar():
    """Built by Maven (or cached): its main class runs the job server, each services file
    lists every registrar the launcher's jars list, no signature is left, and the project's
    job server check reads it as Beam 2.62.0's for Flink 1.19."""
    jar = fetched(fetch.fetch_fat_job_server, "the job server could not be fetched or shaded")
    launcher = fetched(fetch.fetch_job_server, "the job server could not be fetched or shaded")
    registrar = "META-INF/services/org.apache.beam.sdk.options.PipelineOptionsRegistrar"
    listed = set()
    for dependency in (launcher.parent / "lib").glob("*.jar"):
        with zipfile.ZipFile(dependency) as archive:
            if registrar in archive.namelist():
                listed |= registrations(archive.read(registrar))
    with zipfile.ZipFile(jar) as archive:
        names = archive.namelist()
        assert registrations(archive.read(registrar)) == listed and len(listed) > 2
        manifest = archive.read("META-INF/MANIFEST.MF").decode()
    assert f"Main-Class: {fetch.JOB_SERVER_MAIN}" in manifest.splitlines()
    assert fetch.JOB_SERVER_MAIN.replace(".", "/") + ".class" in names
    assert not [name for name in names if re.match(r"META-INF/[^/]+\.(SF|DSA|RSA)$", name)]
    assert flink.read_job_server(str(jar)) == flink.JobServer(fetch.JOB_SERVER_BEAM_VERSION, "1.19")


def registrations(services_file: bytes) -> set[str]:
    lines = (line.strip() for line in services_file.decode().splitlines())
    return {line for line in lines if line and not line.startswith("#")}
