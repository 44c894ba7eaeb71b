"""Cloud Storage's JSON API (and the XML API's media reads) over a local folder, so a rehearsal's
tasks keep their ``gs://`` URIs: ``gs://B/NAME`` is the file ``<folder>/B/NAME``. It answers what
TensorFlow's GCS file system, google-cloud-storage and Beam's gcsio send, and the OAuth token
endpoint their host also serves.
"""

from __future__ import annotations

import base64
import datetime
import email
import hashlib
import http
import http.server
import io
import ipaddress
import json
import logging
import mimetypes
import os
import re
import stat
import tempfile
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import google_crc32c

MARKER = ".gcs-folder-object"
UPLOADS = ".uploads"
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")
_CHUNK = 1 << 20
_REASONS = {
    400: "invalid",
    404: "notFound",
    409: "conflict",
    412: "conditionNotMet",
    416: "requestedRangeNotSatisfiable",
}
_log = logging.getLogger(__name__)


class _Error(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Body:
    """A request body: at most ``left`` bytes of ``stream``. Whatever a handler leaves is drained."""

    def __init__(self, stream: BinaryIO, length: int) -> None:
        self.stream, self.left = stream, length

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.stream.read(n) if n else b""
        self.left = 0 if n and not data else self.left - len(data)  # 0: the client hung up
        return data

    def chunks(self) -> Iterator[bytes]:
        return iter(lambda: self.read(_CHUNK), b"")

    def drain(self) -> None:
        for _ in self.chunks():
            pass


@dataclass
class _Request:
    method: str
    target: str  # path and query, as sent
    headers: dict[str, str]  # lower-case names
    body: _Body
    base: str  # scheme://host the client used: for Location, selfLink and mediaLink

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.target).query, keep_blank_values=True))


@dataclass
class _Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    file: BinaryIO | None = None  # streamed instead of ``body``: ``length`` bytes from its position
    length: int = 0


def _json(status: int, value: object, headers: dict[str, str] | None = None) -> _Response:
    body = json.dumps(value).encode()
    return _Response(status, body, {"Content-Type": "application/json; charset=UTF-8", **(headers or {})})


def _error(code: int, message: str) -> _Response:
    errors = [{"domain": "global", "reason": _REASONS.get(code, "backendError"), "message": message}]
    return _json(code, {"error": {"code": code, "message": message, "errors": errors}})


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _rfc3339(ns: int) -> str:
    stamp = datetime.datetime.fromtimestamp(ns // 10**9, datetime.UTC)
    return f"{stamp:%Y-%m-%dT%H:%M:%S}.{ns // 10**6 % 1000:03d}Z"


class _Folder:
    """Objects as files: paths, atomic commits, deletes, listings and cached checksums."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.uploads = os.path.join(self.root, UPLOADS)
        os.makedirs(self.uploads, exist_ok=True)
        self._lock = threading.Lock()  # commits and deletes: directories appear and go away under it
        self._hashes: dict[tuple[int, ...], tuple[str, str]] = {}

    def bucket(self, bucket: str) -> str:
        if not _BUCKET.fullmatch(bucket):
            raise _Error(400, f"Invalid bucket name: {bucket!r}")
        return os.path.join(self.root, bucket)

    def path(self, bucket: str, name: str) -> str:
        folder = name.endswith("/")
        parts = (name[:-1] if folder else name).split("/")
        if len(name.encode()) > 1024 or "\0" in name or any(p in ("", ".", "..", MARKER) for p in parts):
            raise _Error(400, f"Object name not supported by the folder layout: {name!r}")
        return os.path.join(self.bucket(bucket), *parts, *([MARKER] if folder else []))

    def open(self, bucket: str, name: str) -> tuple[BinaryIO, os.stat_result]:
        try:
            f = open(self.path(bucket, name), "rb")  # the caller closes it
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise _Error(404, f"No such object: {bucket}/{name}") from None
        return f, os.fstat(f.fileno())

    def check(self, path: str, if_generation_match: str | None, what: str) -> None:
        """``ifGenerationMatch``: 0 means the object must not exist, otherwise its generation."""
        if if_generation_match is None:
            return
        try:
            st = os.stat(path)
            generation = st.st_mtime_ns // 1000 if stat.S_ISREG(st.st_mode) else 0
        except OSError:
            generation = 0
        if str(generation) != if_generation_match.strip():
            raise _Error(412, f"At least one of the pre-conditions you specified did not hold: {what}")

    def temp(self, chunks: Iterable[bytes]) -> str:
        """Writes ``chunks`` to a new file under ``.uploads`` and remembers its checksums."""
        fd, tmp = tempfile.mkstemp(dir=self.uploads, suffix=".tmp")
        md5, crc = hashlib.md5(), google_crc32c.Checksum()
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
                md5.update(chunk)
                crc.update(chunk)
        self._hashes[self._key(os.stat(tmp))] = (_b64(md5.digest()), _b64(crc.digest()))
        return tmp

    def commit(self, tmp: str, bucket: str, name: str, if_generation_match: str | None) -> None:
        """Moves ``tmp`` into place as the object, atomically."""
        dest = self.path(bucket, name)
        try:
            with self._lock:
                self.check(dest, if_generation_match, f"{bucket}/{name}")
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                os.replace(tmp, dest)
        except OSError as e:
            raise _Error(409, f"{bucket}/{name} clashes with another object in the folder layout: {e}") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def delete(self, bucket: str, name: str, if_generation_match: str | None) -> None:
        path, top = self.path(bucket, name), self.bucket(bucket)
        with self._lock:
            self.check(path, if_generation_match, f"{bucket}/{name}")
            try:
                os.unlink(path)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                raise _Error(404, f"No such object: {bucket}/{name}") from None
            parent = os.path.dirname(path)
            while parent.startswith(top + os.sep):  # GCS has no directories: drop the ones left empty
                try:
                    os.rmdir(parent)
                except OSError:
                    break
                parent = os.path.dirname(parent)

    def names(self, bucket: str, prefix: str) -> list[str]:
        """The names of the bucket's objects that start with ``prefix``, in order."""
        top, head = self.bucket(bucket), prefix.rpartition("/")[0]
        parts = head.split("/") if head else []
        if any(p in ("", ".", "..") for p in parts):
            return []
        names = []
        for dirpath, dirs, files in os.walk(os.path.join(top, *parts)):
            rel = os.path.relpath(dirpath, top).replace(os.sep, "/")
            rel = "" if rel == "." else rel + "/"
            dirs[:] = [d for d in dirs if (rel + d + "/").startswith(prefix) or prefix.startswith(rel + d + "/")]
            names += [n for n in (rel if f == MARKER else rel + f for f in files) if n and n.startswith(prefix)]
        return sorted(names)

    def hashes(self, f: BinaryIO, st: os.stat_result) -> tuple[str, str]:
        """Base64 MD5 and CRC32C of an open object, computed once per version."""
        key = self._key(st)
        if key not in self._hashes:
            md5, crc = hashlib.md5(), google_crc32c.Checksum()
            f.seek(0)
            for chunk in iter(lambda: f.read(_CHUNK), b""):
                md5.update(chunk)
                crc.update(chunk)
            f.seek(0)
            if len(self._hashes) > 10_000:
                self._hashes.clear()
            self._hashes[key] = (_b64(md5.digest()), _b64(crc.digest()))
        return self._hashes[key]

    @staticmethod
    def _key(st: os.stat_result) -> tuple[int, ...]:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _resource(base: str, bucket: str, name: str, st: os.stat_result, hashes: tuple[str, str] | None) -> dict:
    generation, stamp, quoted = str(st.st_mtime_ns // 1000), _rfc3339(st.st_mtime_ns), quote(name, safe="")
    resource = {
        "kind": "storage#object",
        "id": f"{bucket}/{name}/{generation}",
        "selfLink": f"{base}/storage/v1/b/{bucket}/o/{quoted}",
        "mediaLink": f"{base}/download/storage/v1/b/{bucket}/o/{quoted}?generation={generation}&alt=media",
        "name": name,
        "bucket": bucket,
        "generation": generation,
        "metageneration": "1",
        "contentType": mimetypes.guess_type(name)[0] or "application/octet-stream",
        "storageClass": "STANDARD",
        "size": str(st.st_size),
        "timeCreated": stamp,
        "updated": stamp,
        "timeStorageClassUpdated": stamp,
        "etag": _b64(generation.encode()),
    }
    if hashes:
        resource["md5Hash"], resource["crc32c"] = hashes
    return resource


def _bucket_resource(base: str, bucket: str) -> dict:
    return {"kind": "storage#bucket", "id": bucket, "name": bucket, "selfLink": f"{base}/storage/v1/b/{bucket}",
            "projectNumber": "0", "metageneration": "1", "location": "US", "locationType": "multi-region",
            "storageClass": "STANDARD", "timeCreated": _rfc3339(0), "updated": _rfc3339(0), "etag": "CAE="}  # fmt: skip


def _range(value: str | None, size: int) -> tuple[int, int] | None:
    """``Range: bytes=a-b``, ``a-`` or ``-n`` as inclusive bounds; None serves the whole object."""
    m = re.fullmatch(r"bytes=(\d*)-(\d*)", (value or "").strip())
    if not m or not (m[1] or m[2]) or size == 0:  # GCS ignores a range on an empty object
        return None
    start = int(m[1]) if m[1] else max(size - int(m[2]), 0)
    end = min(int(m[2]), size - 1) if m[1] and m[2] else size - 1
    if start >= size:
        raise _Error(416, f"Requested range not satisfiable: {value} of {size} bytes")
    return (start, end) if start <= end else None


def _multipart(content_type: str, body: bytes) -> tuple[dict, bytes]:
    """The JSON metadata part and the media part of a multipart/related upload."""
    m = re.search(r'boundary="?([^";]+)"?', content_type)
    if not m:
        raise _Error(400, "multipart upload without a boundary")
    parts = []
    for part in body.split(b"--" + m[1].encode())[1:-1]:
        _, _, content = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        parts.append(content.removesuffix(b"\r\n"))
    if len(parts) != 2:
        raise _Error(400, f"multipart upload with {len(parts)} parts, not 2")
    return json.loads(parts[0] or b"{}"), parts[1]


class _Api:
    """Routes a request to a handler; handlers raise ``_Error`` for GCS-style error answers."""

    _ROUTES = [
        ("POST", r"/token|/oauth2/v[34]/token", "token"),
        ("POST", r"/batch(?:/storage/v1)?", "batch"),
        ("POST", r"/upload/storage/v1/b/([^/]+)/o", "upload"),
        ("PUT", r"/upload/storage/v1/b/([^/]+)/o", "resume"),
        ("GET", r"/download/storage/v1/b/([^/]+)/o/(.+)", "media"),
        ("POST", r"/storage/v1/b/([^/]+)/o/([^/]+)/(rewriteTo|copyTo)/b/([^/]+)/o/(.+)", "copy"),
        ("POST", r"/storage/v1/b/([^/]+)/o/(.+)/compose", "compose"),
        ("GET", r"/storage/v1/b/([^/]+)/o/?", "list"),
        ("GET|PATCH|PUT", r"/storage/v1/b/([^/]+)/o/(.+)", "get"),
        ("DELETE", r"/storage/v1/b/([^/]+)/o/(.+)", "delete"),
        ("GET", r"/storage/v1/b/([^/]+)/?", "bucket"),
        ("GET", r"/([^/]+)/(.+)", "media"),  # the XML API's media URL, TensorFlow's reads
    ]

    def __init__(self, folder: _Folder) -> None:
        self.folder = folder
        self.seen: list[tuple[str, str]] = []
        self._seen_lock = threading.Lock()
        self._finished: dict[str, tuple[str, str]] = {}  # completed resumable sessions

    def dispatch(self, req: _Request) -> _Response:
        with self._seen_lock:
            self.seen.append((req.method, req.target))
        try:
            for methods, pattern, handler in self._ROUTES:
                m = re.fullmatch(pattern, req.path)
                if m and req.method in methods.split("|"):
                    return getattr(self, "_" + handler)(req, *(unquote(g) for g in m.groups()))
            raise _Error(404, f"Not found: {req.method} {req.path}")
        except _Error as e:
            return _error(e.code, str(e))
        except Exception as e:
            _log.exception("storage server failed on %s %s", req.method, req.target)
            return _error(500, f"{type(e).__name__}: {e}")

    def _token(self, req: _Request) -> _Response:
        """An access token for any grant (refresh token, service-account JWT): nothing checks it here."""
        req.body.drain()
        return _json(200, {"access_token": "rehearsal-access-token", "expires_in": 3600, "token_type": "Bearer"})

    def _describe(self, req: _Request, bucket: str, name: str, hashes: bool = True) -> dict:
        f, st = self.folder.open(bucket, name)
        with f:
            return _resource(req.base, bucket, name, st, self.folder.hashes(f, st) if hashes else None)

    def _get(self, req: _Request, bucket: str, name: str) -> _Response:
        if req.query.get("alt") == "media":
            return self._media(req, bucket, name)
        self.folder.check(self.folder.path(bucket, name), req.query.get("ifGenerationMatch"), f"{bucket}/{name}")
        fields = req.query.get("fields")
        return _json(200, self._describe(req, bucket, name, not fields or "md5Hash" in fields or "crc32c" in fields))

    def _media(self, req: _Request, bucket: str, name: str) -> _Response:
        f, st = self.folder.open(bucket, name)
        try:
            md5, crc = self.folder.hashes(f, st)
            generation, size = str(st.st_mtime_ns // 1000), st.st_size
            headers = {
                "Content-Type": mimetypes.guess_type(name)[0] or "application/octet-stream",
                "Accept-Ranges": "bytes",
                "ETag": f'"{md5}"',
                "x-goog-generation": generation,
                "x-goog-metageneration": "1",
                "x-goog-hash": f"crc32c={crc},md5={md5}",
                "x-goog-stored-content-length": str(size),
                "x-goog-stored-content-encoding": "identity",
                "x-goog-storage-class": "STANDARD",
            }
            bounds = _range(req.headers.get("range"), size)
            if bounds is None:
                return _Response(200, headers=headers, file=f, length=size)
            start, end = bounds
            f.seek(start)
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
            return _Response(206, headers=headers, file=f, length=end - start + 1)
        except BaseException:
            f.close()
            raise

    def _list(self, req: _Request, bucket: str) -> _Response:
        q = req.query
        prefix, delimiter = q.get("prefix", ""), q.get("delimiter", "")
        limit = min(int(q.get("maxResults") or 1000), 1000) or 1000
        try:
            after = base64.urlsafe_b64decode(q["pageToken"]).decode() if q.get("pageToken") else None
        except ValueError:
            raise _Error(400, "Invalid pageToken") from None
        entries: list[tuple[str, bool]] = []  # (name or prefix, is a prefix), in order
        token = None
        for name in self.folder.names(bucket, prefix):
            cut = name.find(delimiter, len(prefix)) if delimiter else -1
            key = name[: cut + len(delimiter)] if cut >= 0 else name
            if (after is not None and key <= after) or (entries and entries[-1][0] == key):
                continue  # keys never decrease along sorted names, so this deduplicates prefixes
            if len(entries) == limit:
                token = base64.urlsafe_b64encode(entries[-1][0].encode()).decode()
                break
            entries.append((key, cut >= 0))
        items = []
        for name, is_prefix in entries:
            if not is_prefix:
                try:
                    items.append(_resource(req.base, bucket, name, os.stat(self.folder.path(bucket, name)), None))
                except (OSError, _Error):
                    pass  # deleted meanwhile, or a file the layout cannot name
        result: dict = {"kind": "storage#objects"}
        if items:
            result["items"] = items
        if prefixes := [key for key, is_prefix in entries if is_prefix]:
            result["prefixes"] = prefixes
        if token:
            result["nextPageToken"] = token
        return _json(200, result)

    def _delete(self, req: _Request, bucket: str, name: str) -> _Response:
        self.folder.delete(bucket, name, req.query.get("ifGenerationMatch"))
        return _Response(204)

    def _copy(self, req: _Request, bucket: str, name: str, op: str, bucket2: str, name2: str) -> _Response:
        self.folder.path(bucket2, name2)
        f, _ = self.folder.open(bucket, name)
        with f:
            tmp = self.folder.temp(iter(lambda: f.read(_CHUNK), b""))
        self.folder.commit(tmp, bucket2, name2, req.query.get("ifGenerationMatch"))
        resource = self._describe(req, bucket2, name2)
        if op == "copyTo":
            return _json(200, resource)
        size = resource["size"]
        rewrite = {"kind": "storage#rewriteResponse", "totalBytesRewritten": size, "objectSize": size, "done": True}
        return _json(200, {**rewrite, "resource": resource})

    def _compose(self, req: _Request, bucket: str, name: str) -> _Response:
        text = req.body.read().decode()
        try:
            spec = json.loads(text or "{}")
        except ValueError:  # TensorFlow's GCS_APPEND_MODE=compose sends single-quoted "JSON"
            spec = json.loads(text.replace("'", '"'))
        files = [self.folder.open(bucket, source["name"])[0] for source in spec.get("sourceObjects", [])]
        try:
            tmp = self.folder.temp(chunk for f in files for chunk in iter(lambda f=f: f.read(_CHUNK), b""))
        finally:
            for f in files:
                f.close()
        self.folder.commit(tmp, bucket, name, req.query.get("ifGenerationMatch"))
        return _json(200, self._describe(req, bucket, name))

    def _bucket(self, req: _Request, bucket: str) -> _Response:
        self.folder.bucket(bucket)
        return _json(200, _bucket_resource(req.base, bucket))

    def _upload(self, req: _Request, bucket: str) -> _Response:
        q = req.query
        kind = q.get("uploadType", "media")
        if kind == "resumable":
            return self._start_session(req, bucket)
        if kind == "multipart":
            metadata, data = _multipart(req.headers.get("content-type", ""), req.body.read())
            name, chunks = q.get("name") or metadata.get("name", ""), iter([data])
        else:
            name, chunks = q.get("name", ""), req.body.chunks()
        self.folder.path(bucket, name)
        self.folder.commit(self.folder.temp(chunks), bucket, name, q.get("ifGenerationMatch"))
        return _json(200, self._describe(req, bucket, name))

    def _start_session(self, req: _Request, bucket: str) -> _Response:
        body = req.body.read()
        name = req.query.get("name") or (json.loads(body) if body.strip() else {}).get("name", "")
        self.folder.path(bucket, name)
        session = uuid.uuid4().hex
        with open(self._session_file(session, ".json"), "w") as f:
            json.dump({"bucket": bucket, "name": name, "ifGenerationMatch": req.query.get("ifGenerationMatch")}, f)
        open(self._session_file(session, ".part"), "wb").close()
        location = f"{req.base}/upload/storage/v1/b/{bucket}/o?uploadType=resumable&upload_id={session}"
        return _Response(200, headers={"Location": location, "X-GUploader-UploadID": session})

    def _resume(self, req: _Request, bucket: str) -> _Response:
        """A PUT to a session: ``Content-Range: bytes a-b/total``, ``a-b/*``, ``*/total`` or none at all."""
        session = req.query.get("upload_id", "")
        if session in self._finished:
            return _json(200, self._describe(req, *self._finished[session]))
        try:
            with open(self._session_file(session, ".json")) as f:
                spec = json.load(f)
        except (OSError, ValueError):
            raise _Error(404, f"No such upload session: {session!r}") from None
        part = self._session_file(session, ".part")
        size = os.path.getsize(part)
        header = req.headers.get("content-range", "")
        m = re.fullmatch(r"bytes (?:(\d+)-(\d+)|\*)/(\d+|\*)", header.strip())
        if header and not m:
            raise _Error(400, f"Invalid Content-Range: {header}")
        first = int(m[1]) if m and m[1] else (None if m else 0)
        if first is not None and first <= size:
            with open(part, "r+b") as out:
                out.seek(first)
                out.truncate()
                for chunk in req.body.chunks():
                    out.write(chunk)
                size = out.tell()
        total = size if not m else None if m[3] == "*" else int(m[3])
        if total is not None and size >= total:
            self._finish(session, part, spec)
            return _json(200, self._describe(req, spec["bucket"], spec["name"]))
        return _Response(308, headers={"Range": f"bytes=0-{size - 1}"} if size else {})

    def _finish(self, session: str, part: str, spec: dict) -> None:
        try:
            self.folder.commit(part, spec["bucket"], spec["name"], spec.get("ifGenerationMatch"))
        finally:
            os.unlink(self._session_file(session, ".json"))
        self._finished[session] = (spec["bucket"], spec["name"])

    def _session_file(self, session: str, suffix: str) -> str:
        if not re.fullmatch(r"[0-9a-f]{32}", session):
            raise _Error(404, f"No such upload session: {session!r}")
        return os.path.join(self.folder.uploads, session + suffix)

    def _batch(self, req: _Request) -> _Response:
        """multipart/mixed of ``application/http`` requests, answered in kind (``Content-ID: <response-…>``)."""
        head = f"Content-Type: {req.headers.get('content-type', '')}\r\n\r\n".encode()
        message = email.message_from_bytes(head + req.body.read())
        boundary = "batch_" + uuid.uuid4().hex
        parts = []
        for i, part in enumerate(message.get_payload() if message.is_multipart() else [], 1):
            resp = self.dispatch(self._subrequest(part.get_payload(decode=True), req.base))
            parts.append(_http_part(boundary, part.get("Content-ID", str(i)).strip("<>"), resp))
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        return _Response(200, body, {"Content-Type": f"multipart/mixed; boundary={boundary}"})

    @staticmethod
    def _subrequest(data: bytes, base: str) -> _Request:
        """One ``application/http`` part: request line, headers, blank line, body."""
        m = re.search(rb"\r?\n\r?\n", data)
        head, body = (data[: m.start()], data[m.end() :]) if m else (data, b"")
        lines = head.decode("latin-1").splitlines() or [""]
        method, _, target = lines[0].partition(" ")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        body = body[: int(headers["content-length"])] if "content-length" in headers else body.rstrip(b"\r\n")
        url = urlsplit(target.rsplit(" ", 1)[0])  # drop " HTTP/1.1"
        base = f"{url.scheme}://{url.netloc}" if url.netloc else base
        target = url.path + (f"?{url.query}" if url.query else "")
        return _Request(method, target, headers, _Body(io.BytesIO(body), len(body)), base)


def _http_part(boundary: str, content_id: str, resp: _Response) -> bytes:
    """One answer in a batch: an ``application/http`` part holding a whole HTTP response."""
    body = resp.body
    if resp.file:
        with resp.file:
            body = resp.file.read(resp.length)
    lines = [f"--{boundary}", "Content-Type: application/http", f"Content-ID: <response-{content_id}>", ""]
    lines += [f"HTTP/1.1 {resp.status} {http.HTTPStatus(resp.status).phrase}"]
    lines += [f"{k}: {v}" for k, v in resp.headers.items()] + [f"Content-Length: {len(body)}", "", ""]
    return "\r\n".join(lines).encode() + body + b"\r\n"


def _scheme(host: str) -> str:
    """How a client reached us: plain HTTP to a loopback address, else HTTPS through the proxy."""
    name = urlsplit("//" + host).hostname or ""
    try:
        ipaddress.ip_address(name)
        return "http"
    except ValueError:
        return "http" if name == "localhost" else "https"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every answer carries a Content-Length
    # Headers and body go out in two writes; with Nagle's algorithm the body would wait for
    # the client's delayed ACK of the headers, about 40 ms an answer.
    disable_nagle_algorithm = True

    def _handle(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        body = self._body(headers)
        host = headers.get("host") or "{}:{}".format(*self.server.server_address[:2])
        scheme = headers.get("x-forwarded-proto") or _scheme(host)
        resp = self.server.api.dispatch(_Request(self.command, self.path, headers, body, f"{scheme}://{host}"))
        body.drain()
        self.send_response(resp.status)
        for key, value in resp.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(resp.length if resp.file else len(resp.body)))
        self.end_headers()
        if resp.file:
            with resp.file:
                left = resp.length
                while left and (chunk := resp.file.read(min(left, _CHUNK))):
                    self.wfile.write(chunk)
                    left -= len(chunk)
        else:
            self.wfile.write(resp.body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def _body(self, headers: dict[str, str]) -> _Body:
        if headers.get("transfer-encoding", "").lower() != "chunked":
            return _Body(self.rfile, int(headers.get("content-length") or 0))
        data = bytearray()
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            data += self.rfile.read(size)
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return _Body(io.BytesIO(bytes(data)), len(data))

    def log_message(self, format: str, *args: object) -> None:
        _log.debug("storage: " + format, *args)


class _HttpServer(http.server.ThreadingHTTPServer):
    api: _Api

    def handle_error(self, request: object, client_address: object) -> None:
        _log.debug("storage server: connection from %s failed", client_address, exc_info=True)


class StorageServer:
    """Cloud Storage's JSON API over a folder: gs://B/NAME is <folder>/B/NAME."""

    def __init__(self, folder: str) -> None:
        self._api = _Api(_Folder(folder))
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Binds 127.0.0.1 on a free port, serves in a daemon thread and returns the port."""
        self._httpd = _HttpServer(("127.0.0.1", 0), _Handler)
        self._httpd.api = self._api
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="storage-server", daemon=True)
        self._thread.start()
        return self.port

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join()
            self._httpd = self._thread = None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("StorageServer is not started")
        return self._httpd.server_address[1]

    def requests(self) -> list[tuple[str, str]]:
        """(method, path and query) of every request seen, batch parts included, oldest first."""
        with self._api._seen_lock:
            return list(self._api.seen)
