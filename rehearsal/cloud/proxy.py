"""The HTTPS proxy a rehearsed task's unmodified Google clients go through (``https_proxy``): it
terminates TLS for the stand-in hosts with the rehearsal's own certificate and pipes the decrypted
HTTP/1.1 or HTTP/2 (by ALPN) to the stand-in for that host; it refuses and records everything else.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import logging
import ssl
import threading
from collections.abc import Sequence

from rehearsal.cloud.certificates import Certificates

LOOPBACK = "127.0.0.1"
_HEAD_LIMIT = 64 * 1024
# How long a stand-in may take to answer after its client stopped sending.
_LINGER_SECONDS = 30


@dataclasses.dataclass(frozen=True)
class Route:
    """Where one host's decrypted traffic goes: ``http1`` and ``h2`` are local ports (None:
    that protocol is not offered for the host)."""

    host: str  # an fnmatch pattern: "storage.googleapis.com", "*-aiplatform.googleapis.com"
    http1: int | None = None
    h2: int | None = None


@dataclasses.dataclass(frozen=True)
class Connection:
    host: str
    port: int
    protocol: str  # "http/1.1", "h2", or "" when refused before TLS
    outcome: str  # "forwarded to 127.0.0.1:N" or "refused: why"

    @property
    def refused(self) -> bool:
        return self.outcome.startswith("refused")


class Proxy:
    def __init__(self, routes: Sequence[Route], certificates: Certificates) -> None:
        self._routes = tuple(routes)
        self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._tls.load_cert_chain(certificates.certificate, certificates.key)
        # HTTP/1.1 first: a client that speaks both (curl) gets the REST server; gRPC offers h2 only.
        self._tls.set_alpn_protocols(["http/1.1", "h2"])
        self._connections: list[Connection] = []
        self._handlers: set[asyncio.Task] = set()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._thread: threading.Thread | None = None
        self.port = 0

    def start(self, also: Sequence[tuple[str, int]] = ()) -> int:
        """Listens on 127.0.0.1 at a free port, and at each (address, port) of ``also``, serving
        in a daemon thread; returns the loopback port."""
        started, failed = threading.Event(), []
        self._loop = asyncio.new_event_loop()

        async def serve() -> None:
            try:
                for address, port in ((LOOPBACK, 0), *also):
                    self._servers.append(await asyncio.start_server(self._handle, address, port, limit=_HEAD_LIMIT))
                self.port = self._servers[0].sockets[0].getsockname()[1]
            except OSError as err:
                failed.append(err)
            started.set()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="rehearsal-proxy", daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the rehearsal's proxy did not start within 10 s")
        if failed:
            raise RuntimeError(f"the rehearsal's proxy cannot listen at {also}: {failed[0]}")
        return self.port

    def stop(self) -> None:
        if not self._loop:
            return

        async def close() -> None:
            for server in self._servers:
                server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread:
            self._thread.join(10)
        self._loop = None

    def connections(self) -> list[Connection]:
        with self._lock:
            return list(self._connections)

    def _record(self, connection: Connection) -> None:
        with self._lock:
            self._connections.append(connection)
        logging.debug("proxy: %s", connection)

    def route(self, host: str) -> Route | None:
        return next((r for r in self._routes if fnmatch.fnmatchcase(host.lower(), r.host)), None)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # The event loop keeps only weak references to tasks: hold this connection's until it ends.
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            await self._connect(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ssl.SSLError) as err:
            logging.debug("proxy: connection ended: %s", err)
        finally:
            writer.close()
            self._handlers.discard(task)

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        method, target, *_ = head.split("\r\n", 1)[0].split(" ")
        if method != "CONNECT":
            host = target.split("/")[2] if "://" in target else target
            return await self._refuse(writer, host, 80, f"a plain {method} {target}: only HTTPS stand-ins exist")
        host, _, port_text = target.rpartition(":")
        port = int(port_text) if port_text.isdigit() else 0
        route = self.route(host)
        if route is None or port != 443:
            return await self._refuse(writer, host, port, "no stand-in answers for this host and port")
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await writer.start_tls(self._tls)
        protocol = writer.get_extra_info("ssl_object").selected_alpn_protocol() or "http/1.1"
        backend = route.h2 if protocol == "h2" else route.http1
        if backend is None:
            return self._record(Connection(host, port, protocol, f"refused: no {protocol} stand-in for {host}"))
        upstream_reader, upstream_writer = await asyncio.open_connection(LOOPBACK, backend)
        self._record(Connection(host, port, protocol, f"forwarded to {LOOPBACK}:{backend}"))
        sending = asyncio.ensure_future(_pipe(reader, upstream_writer))
        receiving = asyncio.ensure_future(_pipe(upstream_reader, writer))
        try:
            done, _ = await asyncio.wait({sending, receiving}, return_when=asyncio.FIRST_COMPLETED)
            if receiving not in done:  # the client is done sending: let the stand-in finish its answer
                await asyncio.wait({receiving}, timeout=_LINGER_SECONDS)
        finally:
            sending.cancel()
            receiving.cancel()
            upstream_writer.close()

    async def _refuse(self, writer: asyncio.StreamWriter, host: str, port: int, why: str) -> None:
        self._record(Connection(host, port, "", f"refused: {why}"))
        body = f"The rehearsal's proxy refused {host}:{port}: {why}.\n".encode()
        writer.write(
            b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        if sink.can_write_eof():
            try:
                sink.write_eof()
            except (OSError, RuntimeError):
                pass
