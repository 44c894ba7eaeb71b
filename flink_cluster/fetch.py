"""Flink's and Beam's published parts, fetched by name and version into ``.tools/flink/``,
each checked against its published checksum: Flink 1.19.3's jars (PyPI's
``apache-flink-libraries`` sdist) and its scripts and default configuration (the
``apache-flink`` wheel's ``pyflink/bin`` and ``pyflink/conf``), laid out as a Flink home; and
Beam's Flink 1.19 job server, Beam's runner with its dependencies as Maven resolves them
(``--strict-checksums``) plus a launcher jar naming them on its ``Class-Path``; and the same
job server as one self-contained jar, built by Maven's shade plugin from those dependencies
(what a compiled job's tasks build Beam's uber jar from and upload to the cluster).

Idempotent: what is complete is kept, a download goes to a ``.part`` file renamed once its
hash matches, a directory is assembled beside its final name and renamed when whole.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS = REPO_ROOT / ".tools" / "flink"
FLINK_VERSION = "1.19.3"
# Beam's Flink runner for Flink 1.19, whose job server submits the pipelines. Maven Central
# serves its runner at 2.62.0 (no job-server uber jar, no 2.61.0): one minor version past
# the Python SDK of uv.lock (2.61.0), which the portable job API allows.
JOB_SERVER_BEAM_VERSION = "2.62.0"
FLINK_RUNNER_ARTIFACT = "beam-runners-flink-1.19"
JOB_SERVER_MAIN = "org.apache.beam.runners.flink.FlinkJobServerDriver"
PYPI_INDEX = "https://pypi.org/simple"


class FetchError(RuntimeError):
    """A part could not be fetched (offline, no Maven, a registry refusing)."""


class ChecksumError(FetchError):
    """A part did not match its published checksum."""


@dataclasses.dataclass(frozen=True)
class PyPIFile:
    """One file of a PyPI release, with the sha256 PyPI publishes for it."""

    project: str
    version: str
    filename: str
    sha256: str


FLINK_LIBRARIES = PyPIFile(
    "apache-flink-libraries",
    FLINK_VERSION,
    "apache-flink-libraries-1.19.3.tar.gz",
    "4a58e3a1fb7d83340bc96b6c080624c6d792d69fae5d294b96224775204a9c60",
)
# Any of the release's wheels holds the same scripts and configuration; this one is Linux's.
FLINK_SCRIPTS = PyPIFile(
    "apache-flink",
    FLINK_VERSION,
    "apache_flink-1.19.3-cp311-cp311-manylinux_2_5_x86_64.manylinux1_x86_64.manylinux_2_17_x86_64"
    ".manylinux2014_x86_64.whl",
    "ff572c6ffa3867c21b8a455aefb50c53c91973fd0408df594ca26cb0a7bebc77",
)


def flink_home(tools: Path = TOOLS) -> Path:
    return tools / f"flink-{FLINK_VERSION}"


def job_server_dir(tools: Path = TOOLS) -> Path:
    return tools / f"beam-flink-job-server-{JOB_SERVER_BEAM_VERSION}"


def job_server_jar(tools: Path = TOOLS) -> Path:
    """The launcher ``--flink_job_server_jar`` names: ``java -jar`` runs Beam's job server."""
    return job_server_dir(tools) / f"beam-runners-flink-1.19-job-server-{JOB_SERVER_BEAM_VERSION}.jar"


def fat_job_server_jar(tools: Path = TOOLS) -> Path:
    """The job server as one jar (``--flink_submit_uber_jar`` builds the job's jar from it)."""
    return tools / f"beam-runners-flink-1.19-job-server-{JOB_SERVER_BEAM_VERSION}-shaded.jar"


def classes(jar: Path) -> set[str]:
    """The class files ``jar`` holds (its multi-release variants left out)."""
    with zipfile.ZipFile(jar) as archive:
        return {name for name in archive.namelist() if name.endswith(".class") and not name.startswith("META-INF/")}


def runner_jars(home: Path, job_server: Path) -> list[Path]:
    """The jars of the job server's ``lib`` that hold none of the classes of Flink's (in
    ``home``): Beam's runner and what it needs beyond Flink. Flink's own jars, and the
    libraries its distribution bundles (Kryo, slf4j, Apache Commons...), stay Flink's."""
    flinks = set().union(*(classes(jar) for jar in (home / "lib").glob("*.jar")))
    return [jar for jar in sorted((job_server / "lib").glob("*.jar")) if not classes(jar) & flinks]


def fetch_all(tools: Path = TOOLS, progress=print) -> tuple[Path, Path]:
    """Flink's home and the job server's launcher jar, fetched where missing."""
    return fetch_flink(tools, progress), fetch_job_server(tools, progress)


# PyPI files: the index names the URL and the sha256; ours must match both.


def index_entry(file: PyPIFile, index: str = PYPI_INDEX) -> dict:
    """The index's record of ``file`` (PEP 691 JSON), its published sha256 checked against ours."""
    request = urllib.request.Request(
        f"{index}/{file.project}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    entry = next((f for f in files if f["filename"] == file.filename), None)
    if entry is None:
        raise FetchError(f"{file.project} {file.version}: the index lists no {file.filename}")
    if entry["hashes"].get("sha256") != file.sha256:
        raise ChecksumError(f"{file.filename}: the index publishes sha256 {entry['hashes']}, expected {file.sha256}")
    return entry


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def download(file: PyPIFile, directory: Path, progress=print) -> Path:
    """``file`` in ``directory``, downloaded unless a verified copy is there."""
    target = directory / file.filename
    if target.exists() and sha256_of(target) == file.sha256:
        return target
    directory.mkdir(parents=True, exist_ok=True)
    url = index_entry(file)["url"]
    progress(f"downloading {file.filename}")
    partial = target.with_name(target.name + ".part")
    with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as out:
        shutil.copyfileobj(response, out, 1 << 20)
    found = sha256_of(partial)
    if found != file.sha256:
        partial.unlink()
        raise ChecksumError(f"{file.filename}: sha256 {found}, published {file.sha256}")
    partial.replace(target)
    return target


def assembled(final: Path, build) -> Path:
    """``final``, made by ``build(scratch)`` in a scratch directory beside it, then renamed."""
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=final.name + ".", suffix=".partial", dir=final.parent))
    scratch.chmod(0o755)
    try:
        build(scratch)
        scratch.rename(final)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return final


def fetch_flink(tools: Path = TOOLS, progress=print) -> Path:
    """A Flink home: ``lib``, ``opt``, ``plugins`` and ``bin/bash-java-utils.jar`` from the
    libraries sdist; ``bin``'s scripts and ``conf`` from the wheel."""
    libraries = download(FLINK_LIBRARIES, tools / "downloads", progress)
    scripts = download(FLINK_SCRIPTS, tools / "downloads", progress)

    def build(home: Path) -> None:
        progress(f"unpacking Flink {FLINK_VERSION} into {flink_home(tools)}")
        prefix = f"apache-flink-libraries-{FLINK_VERSION}/deps/"
        with tarfile.open(libraries) as tar:
            for member in tar.getmembers():
                if member.name.startswith(prefix) and member.isfile():
                    member.name = member.name[len(prefix) :]
                    tar.extract(member, home, filter="data")
        with zipfile.ZipFile(scripts) as wheel:
            for name in wheel.namelist():
                if name.startswith(("pyflink/bin/", "pyflink/conf/")) and not name.endswith("/"):
                    path = home / name.removeprefix("pyflink/")
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(wheel.read(name))
                    if path.suffix == ".sh" or path.parent.name == "bin" and not path.suffix:
                        path.chmod(0o755)
        (home / "log").mkdir()

    return assembled(flink_home(tools), build)


# Beam's job server: Maven resolves the runner's dependencies, each checked against the
# checksum Maven Central publishes beside it; the launcher names them.

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
# The fat jar: Maven's jar plugin makes the (empty) project jar the shade plugin then fills.
JAR_PLUGIN = "org.apache.maven.plugins:maven-jar-plugin:3.4.1"
SHADE_PLUGIN = "org.apache.maven.plugins:maven-shade-plugin:3.6.0"
# What Beam's own job-server build adds to the runner (runners/flink/job-server/
# flink_job_server.gradle): the job service, slf4j's simple logger as its output and
# commons-logging replaced by its slf4j bridge. Its optional IO connectors are left out.
JOB_SERVER_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.flink-cluster</groupId>
  <artifactId>beam-flink-job-server</artifactId>
  <version>{beam}</version>
  <packaging>{packaging}</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.beam</groupId><artifactId>{runner}</artifactId><version>{beam}</version>
      <exclusions><exclusion><groupId>commons-logging</groupId><artifactId>commons-logging</artifactId></exclusion></exclusions>
    </dependency>
    <dependency>
      <groupId>org.apache.beam</groupId><artifactId>beam-runners-java-job-service</artifactId><version>{beam}</version>
    </dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>1.7.30</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>jcl-over-slf4j</artifactId><version>1.7.30</version></dependency>
  </dependencies>
{build}</project>
"""
# What Beam's Gradle shadowJar does for its job server jar: the services files (Beam's
# registrars: runners, file systems, coders, transforms) merged rather than one kept, the
# job server as the main class, the dependencies' signatures dropped (they would no longer
# match). Zip64 is the shade plugin's as the entries require.
SHADE_BUILD = """  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId><artifactId>maven-shade-plugin</artifactId><version>{shade}</version>
    <configuration>
      <createDependencyReducedPom>false</createDependencyReducedPom>
      <filters><filter><artifact>*:*</artifact><excludes>
        <exclude>META-INF/*.SF</exclude><exclude>META-INF/*.DSA</exclude><exclude>META-INF/*.RSA</exclude>
      </excludes></filter></filters>
      <transformers>
        <transformer implementation="org.apache.maven.plugins.shade.resource.ServicesResourceTransformer"/>
        <transformer implementation="org.apache.maven.plugins.shade.resource.ManifestResourceTransformer">
          <mainClass>{main}</mainClass>
          <manifestEntries><Implementation-Version>{beam}</Implementation-Version></manifestEntries>
        </transformer>
      </transformers>
    </configuration>
  </plugin></plugins></build>
"""


def job_server_pom(shaded: bool = False) -> str:
    """The job server's dependencies as a POM; ``shaded``: a jar project the shade plugin fills."""
    build = SHADE_BUILD.format(shade=SHADE_PLUGIN.rsplit(":", 1)[1], main=JOB_SERVER_MAIN, beam=JOB_SERVER_BEAM_VERSION)
    return JOB_SERVER_POM.format(
        beam=JOB_SERVER_BEAM_VERSION,
        runner=FLINK_RUNNER_ARTIFACT,
        packaging="jar" if shaded else "pom",
        build=build if shaded else "",
    )


def fetch_job_server(tools: Path = TOOLS, progress=print) -> Path:
    """The launcher jar, its dependencies in ``lib/`` beside it."""

    def build(directory: Path) -> None:
        progress(f"resolving Beam {JOB_SERVER_BEAM_VERSION}'s Flink job server with Maven")
        pom = directory / "pom.xml"
        pom.write_text(job_server_pom())
        maven(pom, tools / "m2", f"{DEPENDENCY_PLUGIN}:copy-dependencies", f"-DoutputDirectory={directory / 'lib'}")
        write_launcher(directory / job_server_jar(tools).name, sorted((directory / "lib").glob("*.jar")))

    assembled(job_server_dir(tools), build)
    return job_server_jar(tools)


def fetch_fat_job_server(tools: Path = TOOLS, progress=print) -> Path:
    """The job server as one jar, shaded by Maven from the dependencies ``fetch_job_server``
    resolves (the same local repository, the same strict checksums); kept once whole."""
    target = fat_job_server_jar(tools)
    if target.is_file():
        return target
    progress(f"shading Beam {JOB_SERVER_BEAM_VERSION}'s Flink job server into one jar with Maven")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=target.name + ".", suffix=".partial", dir=target.parent) as scratch:
        pom = Path(scratch) / "pom.xml"
        pom.write_text(job_server_pom(shaded=True))
        maven(pom, tools / "m2", f"{JAR_PLUGIN}:jar", f"{SHADE_PLUGIN}:shade")
        (Path(scratch) / "target" / f"beam-flink-job-server-{JOB_SERVER_BEAM_VERSION}.jar").replace(target)
    return target


def maven(pom: Path, repository: Path, *goals: str) -> None:
    """``mvn`` in batch mode, failing on any checksum that does not match (or is missing)."""
    if shutil.which("mvn") is None:
        raise FetchError("mvn is not installed (Debian's maven package)")
    command = ["mvn", "--batch-mode", "--quiet", "--strict-checksums", f"-Dmaven.repo.local={repository}"]
    process = subprocess.run([*command, "-f", str(pom), *goals], capture_output=True, text=True, check=False)
    if process.returncode != 0:
        error = ChecksumError if "Checksum validation failed" in process.stdout else FetchError
        raise error(f"mvn {' '.join(goals[:1])} failed ({process.returncode}): {process.stdout[-3000:]}")


def manifest_lines(attributes: dict[str, str]) -> bytes:
    """A JAR manifest: each line at most 72 bytes, continued on lines starting with a space."""
    out = b""
    for key, value in attributes.items():
        line = f"{key}: {value}".encode()
        chunks = [line[:72]] + [line[i : i + 71] for i in range(72, len(line), 71)]
        out += b"\r\n ".join(chunks) + b"\r\n"
    return out + b"\r\n"


def write_launcher(path: Path, jars: list[Path], main_class: str = JOB_SERVER_MAIN) -> None:
    """A jar of a manifest only: ``java -jar`` runs ``main_class`` (the job server) with
    ``jars`` (relative to the launcher) as its class path."""
    manifest = manifest_lines(
        {
            "Manifest-Version": "1.0",
            "Main-Class": main_class,
            "Class-Path": " ".join(jar.relative_to(path.parent).as_posix() for jar in jars),
            "Implementation-Title": f"Beam {FLINK_RUNNER_ARTIFACT} job server",
            "Implementation-Version": JOB_SERVER_BEAM_VERSION,
        }
    )
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", manifest)


def launcher_attributes(path: Path) -> dict[str, str]:
    """The launcher's manifest, read back (continuation lines joined)."""
    with zipfile.ZipFile(path) as jar:
        text = jar.read("META-INF/MANIFEST.MF").decode().replace("\r\n ", "")
    return dict(line.split(": ", 1) for line in text.splitlines() if line)
