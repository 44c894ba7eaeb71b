"""The local Cloud Storage stand-in, driven by the clients a rehearsal's tasks use: google-cloud-storage,
Beam's gcsio on top of it, TensorFlow's GCS file system's request shapes replayed with http.client, and
TensorFlow itself in a subprocess that reaches the server through the rehearsal's TLS proxy."""

import base64
import hashlib
import http.client
import io
import json
import os
import subprocess
import sys
import threading

import google_crc32c
import pytest
from google.api_core.exceptions import NotFound, PreconditionFailed
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from rehearsal.cloud.storage import MARKER, StorageServer


@pytest.fixture
def folder(tmp_path):
    return tmp_path / "gcs"


@pytest.fixture
def server(folder):
    server = StorageServer(str(folder))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def client(server):
    return storage.Client(
        project="p",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": f"http://127.0.0.1:{server.port}"},
    )


@pytest.fixture
def conn(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    yield conn
    conn.close()


def _call(conn, method, path, body=b"", headers=None):
    """One request on a kept-alive connection, as TensorFlow's libcurl sends it through the proxy."""
    conn.request(method, path, body=body, headers={"Host": "www.googleapis.com", **(headers or {})})
    resp = conn.getresponse()
    return resp.status, resp, resp.read()


def _b64(digest):
    return base64.b64encode(digest).decode()


# google-cloud-storage


def test_small_upload_is_multipart_and_lands_in_the_folder(client, server, folder):
    client.bucket("bkt").blob("dir/a.txt").upload_from_string(b"hello")
    assert (folder / "bkt" / "dir" / "a.txt").read_bytes() == b"hello"
    assert any(m == "POST" and "uploadType=multipart" in p for m, p in server.requests())
    blob = client.bucket("bkt").get_blob("dir/a.txt")
    assert (blob.size, blob.md5_hash) == (5, _b64(hashlib.md5(b"hello").digest()))
    assert blob.crc32c == _b64(google_crc32c.Checksum(b"hello").digest())
    assert blob.generation == (folder / "bkt" / "dir" / "a.txt").stat().st_mtime_ns // 1000


def test_large_or_chunked_uploads_are_resumable(client, server, folder):
    big = os.urandom(9 * 1024 * 1024)  # over the client's 8 MiB multipart limit: one resumable PUT
    client.bucket("bkt").blob("big.bin").upload_from_string(big)
    assert (folder / "bkt" / "big.bin").read_bytes() == big
    data = os.urandom(600 * 1024)
    blob = client.bucket("bkt").blob("chunked.bin")
    blob.chunk_size = 256 * 1024  # with no size known up front: three PUTs, the first two answered 308
    blob.upload_from_file(io.BytesIO(data))
    assert (folder / "bkt" / "chunked.bin").read_bytes() == data
    assert sum(m == "POST" and "uploadType=resumable" in p for m, p in server.requests()) == 2
    assert sum(m == "PUT" for m, _ in server.requests()) == 4
    assert os.listdir(folder / ".uploads") == []


def test_download_whole_and_ranged(client):
    blob = client.bucket("bkt").blob("o")
    blob.upload_from_string(b"0123456789")
    assert blob.download_as_bytes() == b"0123456789"  # checks the md5 the server sends
    assert client.bucket("bkt").blob("o").download_as_bytes(checksum="crc32c") == b"0123456789"
    assert blob.download_as_bytes(start=2, end=5) == b"2345"
    assert blob.download_as_bytes(start=7) == b"789"
    with blob.open("rb") as f:
        assert f.read() == b"0123456789"


def test_list_with_prefix_delimiter_and_pages(client):
    bucket = client.bucket("bkt")
    names = ["a/1", "a/2", "a/sub/3", "a/sub/4", "a/t/5", "b/6", "top"]
    for name in names:
        bucket.blob(name).upload_from_string(name.encode())
    assert [b.name for b in client.list_blobs("bkt")] == names
    listing = client.list_blobs("bkt", prefix="a/", delimiter="/")
    assert [b.name for b in listing] == ["a/1", "a/2"]
    assert listing.prefixes == {"a/sub/", "a/t/"}
    pages = list(client.list_blobs("bkt", page_size=2).pages)
    assert [[b.name for b in page] for page in pages] == [names[0:2], names[2:4], names[4:6], names[6:]]
    assert [b.name for b in client.list_blobs("bkt", max_results=3)] == names[:3]
    page_names = []
    for page in client.list_blobs("bkt", delimiter="/", page_size=1).pages:
        page_names += [b.name for b in page] + sorted(page.prefixes)
    assert page_names == ["a/", "b/", "top"]
    items = list(client.list_blobs("bkt", prefix="a/s"))
    assert [(b.name, b.size) for b in items] == [("a/sub/3", 7), ("a/sub/4", 7)]


def test_rewrite_and_copy(client, folder):
    bucket = client.bucket("bkt")
    src = bucket.blob("src")
    src.upload_from_string(b"payload")
    token, written, total = bucket.blob("x/rewritten").rewrite(src)
    assert (token, written, total) == (None, 7, 7)
    copied = bucket.copy_blob(src, client.bucket("other"), "copied")
    assert copied.size == 7
    assert (folder / "bkt" / "x" / "rewritten").read_bytes() == b"payload"
    assert (folder / "other" / "copied").read_bytes() == b"payload"


def test_compose(client, folder):
    bucket = client.bucket("bkt")
    parts = [bucket.blob("p1"), bucket.blob("p2")]
    for blob, data in zip(parts, [b"ab", b"cd"], strict=True):
        blob.upload_from_string(data)
    bucket.blob("whole").compose(parts)
    assert (folder / "bkt" / "whole").read_bytes() == b"abcd"


def test_delete_and_not_found(client, folder):
    bucket = client.bucket("bkt")
    bucket.blob("d/e/f").upload_from_string(b"x")
    bucket.blob("d/e/f").delete()
    assert not (folder / "bkt" / "d").exists()  # empty directories go with the object
    assert bucket.get_blob("d/e/f") is None
    with pytest.raises(NotFound):
        bucket.blob("d/e/f").download_as_bytes()
    with pytest.raises(NotFound):
        bucket.blob("d/e/f").delete()


def test_batch_delete(client, folder):
    bucket = client.bucket("bkt")
    for i in range(3):
        bucket.blob(f"k/{i}").upload_from_string(b"x")
    with client.batch():
        for i in range(3):
            bucket.blob(f"k/{i}").delete()
    assert list(client.list_blobs("bkt")) == []
    batch = client.batch(raise_exception=False)
    with batch:
        bucket.blob("missing").delete()
    assert [r.status_code for r in batch._responses] == [404]


def test_if_generation_match(client):
    blob = client.bucket("bkt").blob("once")
    blob.upload_from_string(b"1", if_generation_match=0)
    with pytest.raises(PreconditionFailed):
        blob.upload_from_string(b"2", if_generation_match=0)
    generation = client.bucket("bkt").get_blob("once").generation
    blob.upload_from_string(b"3", if_generation_match=generation)
    assert blob.download_as_bytes() == b"3"


def test_unfinished_uploads_and_markers_are_not_objects(client, server, conn, folder):
    bucket = client.bucket("bkt")
    bucket.blob("dir/").upload_from_string(b"")
    assert (folder / "bkt" / "dir" / MARKER).exists()
    status, resp, _ = _call(conn, "POST", "/upload/storage/v1/b/bkt/o?uploadType=resumable&name=dir/half")
    session = resp.getheader("Location").split("googleapis.com", 1)[1]
    assert _call(conn, "PUT", session, b"12345", {"Content-Range": "bytes 0-4/10"})[0] == 308
    assert [b.name for b in client.list_blobs("bkt")] == ["dir/"]
    listing = client.list_blobs("bkt", delimiter="/")
    assert (list(listing), listing.prefixes) == ([], {"dir/"})
    assert [b.name for b in client.list_blobs("bkt", prefix="dir/", delimiter="/")] == ["dir/"]
    assert client.lookup_bucket("bkt").name == "bkt"  # every well-formed bucket name exists


def test_concurrent_readers_see_whole_objects(client):
    blob = client.bucket("bkt").blob("hot")
    versions = [bytes([i]) * 300_000 for i in range(5)]
    blob.upload_from_string(versions[0])
    seen, stop = set(), threading.Event()

    def read():
        while not stop.is_set():
            seen.add(client.bucket("bkt").blob("hot").download_as_bytes())

    reader = threading.Thread(target=read)
    reader.start()
    for data in versions[1:]:
        blob.upload_from_string(data)
    stop.set()
    reader.join()
    assert seen and seen <= set(versions)


# Beam's gcsio


def test_beam_gcsio(client, folder):
    from apache_beam.io.gcp.gcsio import GcsIO

    gcs = GcsIO(storage_client=client)
    with gcs.open("gs://bkt/beam/in.txt", "w") as f:
        f.write(b"line 1\nline 2\n")
    with gcs.open("gs://bkt/beam/in.txt") as f:
        assert f.read() == b"line 1\nline 2\n"
    assert (folder / "bkt" / "beam" / "in.txt").read_bytes() == b"line 1\nline 2\n"
    assert gcs.exists("gs://bkt/beam/in.txt") and not gcs.exists("gs://bkt/beam/nope")
    assert gcs.size("gs://bkt/beam/in.txt") == 14
    gcs.copy("gs://bkt/beam/in.txt", "gs://bkt/beam/out/copy.txt")
    assert gcs.list_prefix("gs://bkt/beam/") == {"gs://bkt/beam/in.txt": 14, "gs://bkt/beam/out/copy.txt": 14}
    assert [name for name, _ in gcs.list_files("gs://bkt/beam/out")] == ["gs://bkt/beam/out/copy.txt"]
    pairs = [("gs://bkt/beam/in.txt", "gs://bkt/beam/out/batch.txt"), ("gs://bkt/beam/gone", "gs://bkt/beam/x")]
    assert [error for *_, error in gcs.copy_batch(pairs)] == [None, 404]
    assert (folder / "bkt" / "beam" / "out" / "batch.txt").read_bytes() == b"line 1\nline 2\n"
    results = gcs.delete_batch(["gs://bkt/beam/in.txt", "gs://bkt/beam/out/copy.txt", "gs://bkt/beam/out/batch.txt"])
    assert [error for _, error in results] == [None, None, None]
    assert gcs.delete_batch(["gs://bkt/beam/gone"]) == [("gs://bkt/beam/gone", None)]  # Beam ignores a 404
    assert gcs.list_prefix("gs://bkt/beam/") == {}


# The request shapes of TensorFlow's gcs_file_system.cc, replayed over one kept-alive connection


def test_tensorflow_resumable_upload_and_status_queries(conn, folder):
    status, resp, _ = _call(
        conn,
        "POST",
        "/upload/storage/v1/b/bkt/o?uploadType=resumable&name=m%2Fw.bin",
        headers={"X-Upload-Content-Length": "10"},
    )
    location = resp.getheader("Location")
    assert status == 200 and location.startswith("https://www.googleapis.com/upload/storage/v1/b/bkt/o?")
    session = location.removeprefix("https://www.googleapis.com")
    status, resp, _ = _call(conn, "PUT", session, b"01234", {"Content-Range": "bytes 0-4/10"})
    assert (status, resp.getheader("Range")) == (308, "bytes=0-4")
    status, resp, _ = _call(conn, "PUT", session, b"", {"Content-Range": "bytes */10"})
    assert (status, resp.getheader("Range")) == (308, "bytes=0-4")
    status, _, body = _call(conn, "PUT", session, b"56789", {"Content-Range": "bytes 5-9/10"})
    assert status == 200 and json.loads(body)["size"] == "10"
    assert _call(conn, "PUT", session, b"", {"Content-Range": "bytes */10"})[0] == 200  # already complete
    assert (folder / "bkt" / "m" / "w.bin").read_bytes() == b"0123456789"

    status, resp, _ = _call(conn, "POST", "/upload/storage/v1/b/bkt/o?uploadType=resumable&name=empty")
    assert _call(conn, "PUT", resp.getheader("Location").removeprefix("https://www.googleapis.com"))[0] == 200
    assert (folder / "bkt" / "empty").read_bytes() == b""


def test_tensorflow_stat_and_ranged_reads(conn, folder):
    (folder / "bkt" / "d").mkdir(parents=True)
    (folder / "bkt" / "d" / "f").write_bytes(b"abcdefgh")
    status, _, body = _call(conn, "GET", "/storage/v1/b/bkt/o/d%2Ff?fields=size%2Cgeneration%2Cupdated")
    meta = json.loads(body)
    assert status == 200 and meta["size"] == "8" and meta["updated"].endswith("Z")
    assert int(meta["generation"]) == (folder / "bkt" / "d" / "f").stat().st_mtime_ns // 1000
    status, resp, body = _call(
        conn, "GET", "/bkt/d%2Ff", headers={"Host": "storage.googleapis.com", "Range": "bytes=2-5"}
    )
    assert (status, body, resp.getheader("Content-Range")) == (206, b"cdef", "bytes 2-5/8")
    assert _call(conn, "GET", "/bkt/d%2Ff", headers={"Range": "bytes=6-99"})[::2] == (206, b"gh")
    assert _call(conn, "GET", "/bkt/d%2Ff", headers={"Range": "bytes=8-99"})[0] == 416
    assert _call(conn, "GET", "/storage/v1/b/bkt/o/d%2Ff?alt=media")[::2] == (200, b"abcdefgh")
    status, _, body = _call(conn, "GET", "/storage/v1/b/bkt/o/d%2Fmissing?fields=size%2Cgeneration%2Cupdated")
    error = json.loads(body)["error"]
    assert (status, error["code"], error["message"]) == (404, 404, "No such object: bkt/d/missing")
    assert error["errors"][0]["reason"] == "notFound"
    assert _call(conn, "GET", "/storage/v1/b/bkt")[0] == 200


def test_tensorflow_directories_listing_rename_and_delete(conn, folder):
    create_dir = "/upload/storage/v1/b/bkt/o?uploadType=media&name=run%2F&ifGenerationMatch=0"
    assert _call(conn, "POST", create_dir)[0] == 200
    assert _call(conn, "POST", create_dir)[0] == 412
    assert (folder / "bkt" / "run" / MARKER).exists()
    is_dir = "/storage/v1/b/bkt/o?fields=items%2Fname%2CnextPageToken&prefix=run%2F&maxResults=1"
    assert [i["name"] for i in json.loads(_call(conn, "GET", is_dir)[2])["items"]] == ["run/"]
    for name in ("run%2Fa", "run%2Fsub%2Fb"):
        assert _call(conn, "POST", f"/upload/storage/v1/b/bkt/o?uploadType=media&name={name}", b"x")[0] == 200
    children = "/storage/v1/b/bkt/o?fields=items%2Fname%2Cprefixes%2CnextPageToken&delimiter=%2F&prefix=run%2F"
    listing = json.loads(_call(conn, "GET", children)[2])
    assert ([i["name"] for i in listing["items"]], listing["prefixes"]) == (["run/", "run/a"], ["run/sub/"])

    status, _, body = _call(conn, "POST", "/storage/v1/b/bkt/o/run%2Fa/rewriteTo/b/bkt/o/run%2Fsub%2Fc")
    assert status == 200 and json.loads(body)["done"] is True
    assert json.loads(body)["resource"]["name"] == "run/sub/c"
    assert _call(conn, "DELETE", "/storage/v1/b/bkt/o/run%2Fa")[0] == 204
    recursive = "/storage/v1/b/bkt/o?fields=items%2Fname%2CnextPageToken&prefix=run%2F"
    assert [i["name"] for i in json.loads(_call(conn, "GET", recursive)[2])["items"]] == [
        "run/",
        "run/sub/b",
        "run/sub/c",
    ]
    for name in ("run%2F", "run%2Fsub%2Fb", "run%2Fsub%2Fc"):
        assert _call(conn, "DELETE", f"/storage/v1/b/bkt/o/{name}")[0] == 204
    assert json.loads(_call(conn, "GET", recursive)[2]) == {"kind": "storage#objects"}
    assert os.listdir(folder / "bkt") == []


def test_bad_names_are_rejected(conn, folder):
    assert _call(conn, "POST", "/upload/storage/v1/b/bkt/o?uploadType=media&name=..%2Fescape", b"x")[0] == 400
    assert _call(conn, "POST", "/upload/storage/v1/b/.uploads/o?uploadType=media&name=x", b"x")[0] == 400
    assert not (folder / "escape").exists()


# TensorFlow itself, unmodified, in a subprocess that reaches the server through the rehearsal's proxy

_TF_SCRIPT = r"""
import json
import tensorflow as tf

g, root, out = tf.io.gfile, "gs://bkt/tf", {}
g.makedirs(root + "/a/b")
with g.GFile(root + "/a/b/x.txt", "w") as f:
    f.write("hello")
with g.GFile(root + "/a/b/big.bin", "wb") as f:
    f.write(bytes(range(256)) * 4096)
with g.GFile(root + "/a/b/x.txt", "rb") as f:
    out["read"] = f.read().decode()
with g.GFile(root + "/a/b/big.bin", "rb") as f:
    f.seek(1000)
    out["big"] = [f.read(3).hex(), len(g.GFile(root + "/a/b/big.bin", "rb").read())]
out["listdir"] = [sorted(g.listdir(root + "/a")), sorted(g.listdir(root + "/a/b"))]
out["glob"] = sorted(g.glob(root + "/a/*/*.txt"))
out["exists"] = [g.exists(root + "/a/b/x.txt"), g.exists(root + "/a"), g.exists(root + "/nope")]
out["isdir"] = [g.isdir(root + "/a"), g.isdir(root + "/a/b/x.txt")]
stat = g.stat(root + "/a/b/x.txt")
out["stat"] = [stat.length, stat.is_directory]
g.rename(root + "/a/b/x.txt", root + "/a/b/y.txt")
g.rename(root + "/a", root + "/c")
with g.GFile(root + "/c/b/y.txt") as f:
    out["renamed"] = f.read()
g.rmtree(root + "/c/b")
out["after_rmtree"] = [g.exists(root + "/c/b"), g.listdir(root + "/c")]
print("RESULT " + json.dumps(out))
"""


def test_tensorflow_gfile_through_the_proxy(server, folder, tmp_path):
    from rehearsal.cloud.certificates import make_certificates
    from rehearsal.cloud.proxy import Proxy, Route

    certificates = make_certificates(str(tmp_path / "tls"))
    proxy = Proxy([Route("*.googleapis.com", http1=server.port)], certificates)
    env = {
        "PATH": os.environ["PATH"],
        "https_proxy": f"http://127.0.0.1:{proxy.start()}",
        "CURL_CA_BUNDLE": certificates.authority,
        "GOOGLE_AUTH_TOKEN_FOR_TESTING": "x",
        "NO_GCE_CHECK": "true",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    try:
        run = subprocess.run([sys.executable, "-c", _TF_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    finally:
        proxy.stop()
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.split("RESULT ", 1)[1])
    assert out == {
        "read": "hello",
        "big": ["e8e9ea", 1024 * 1024],
        "listdir": [["b/"], ["big.bin", "x.txt"]],
        "glob": ["gs://bkt/tf/a/b/x.txt"],
        "exists": [True, True, False],
        "isdir": [True, False],
        "stat": [5, False],
        "renamed": "hello",
        "after_rmtree": [False, []],
    }
    assert (folder / "bkt" / "tf" / "c" / MARKER).exists()
    assert not (folder / "bkt" / "tf" / "a").exists()
    assert any(m == "PUT" for m, _ in server.requests())  # its uploads are resumable sessions
    assert any(p.startswith("/bkt/") for _, p in server.requests())  # and its reads the XML API's media URL
