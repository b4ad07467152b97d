"""A minimal HTTP/1.1 client for the load generator's streams: one keep-alive connection per user.

The measured hot path is one network read of one stream chunk. Through aiohttp that read is
a transport callback, a stream-reader buffer, a future and a task wake-up; here it is one
``data_received`` call that notes the arrival time, strips the chunked framing and appends the
body bytes. The user's coroutine sleeps until the whole response has arrived
(lab/notes/benchmarks.md, ``client_cost.py``, has the CPU per token this costs).

What it speaks: ``POST`` with a ready-made body; responses with ``Transfer-Encoding: chunked``
(what SGLang's and the simulator's streams use), ``Content-Length``, or a body that ends when
the connection closes; ``Connection: close`` is honoured. No redirects, no compression (no
``Accept-Encoding`` is sent), no proxies. TLS goes through asyncio's own transport.

Failures map to the runner's error classes: a connection that cannot be made is
:class:`ConnectFailed`; one lost before the response's head is :class:`Disconnected`; one lost
inside the body, or framing that is not HTTP, is :class:`Truncated`.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from urllib.parse import urlsplit

# asyncio's socket transport reads with recv(256 KiB). Above glibc's mmap threshold (128 KiB)
# every read then costs mmap + mremap + munmap and a page fault, more than the rest of the hot
# path (lab/notes/benchmarks.md); stream chunks are far smaller, so reads of 64 KiB lose nothing.
READ_SIZE = 64 * 1024
_HEAD_MAX_BYTES = 64 * 1024


class ConnectFailed(OSError):
    """No connection could be made."""


class Disconnected(ConnectionError):
    """The connection was lost before the response's head arrived."""


class Truncated(ConnectionError):
    """The connection was lost inside the body, or the response is not valid HTTP/1.1."""


class Endpoint:
    """Where requests go, and each prompt's request bytes (head and body) encoded once."""

    def __init__(self, base_url: str, path: str, headers: dict[str, str]) -> None:
        url = urlsplit(base_url.rstrip("/") + path)
        self.host = url.hostname or "127.0.0.1"
        self.tls = url.scheme == "https"
        self.port = url.port or (443 if self.tls else 80)
        self.ssl_context = ssl.create_default_context() if self.tls else None
        host = f"[{self.host}]" if ":" in self.host else self.host
        lines = [f"POST {url.path or '/'} HTTP/1.1", f"Host: {host}:{self.port}",
                 "Accept: */*", *(f"{k}: {v}" for k, v in headers.items())]
        self._head = "\r\n".join(lines).encode("latin-1")

    def request(self, body: bytes) -> bytes:
        return self._head + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body


class Response:
    """One response as it arrives: body pieces and their arrival times, the status."""

    __slots__ = ("content_type", "done", "pieces", "status", "times")

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done
        self.status = 0
        self.content_type = ""  # lower case, parameters kept; "" when the head has none
        self.times: list[float] = []
        self.pieces: list[bytes] = []


class Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self, read_delay_s: float = 0.0) -> None:
        self.transport: asyncio.Transport | None = None
        self.response: Response | None = None
        self.read_delay_s = read_delay_s  # a planted slow client (tests only)
        self.reusable = False
        self._head = b""
        self._in_body = False
        self._chunked = False
        self._until_close = False
        self._close_after = False
        self._left = 0  # body bytes left (Content-Length) or in the current chunk
        self._skip = 0  # bytes of a chunk's trailing CRLF still to skip
        self._line = b""  # a chunk-size line split across reads
        self._trailer = False  # after the zero-size chunk

    # -- asyncio callbacks --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if getattr(transport, "max_size", 0) > READ_SIZE:
            transport.max_size = READ_SIZE  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        t = time.monotonic()
        response = self.response
        if response is None:  # bytes nobody asked for: this connection cannot be trusted
            self.reusable = False
            if self.transport is not None:
                self.transport.abort()
            return
        if self.read_delay_s:
            _burn_cpu(self.read_delay_s)
        try:
            if not self._in_body:
                data = self._read_head(data)
                if not self._in_body:
                    return
            body = self._read_chunked(data) if self._chunked else self._read_plain(data)
        except (ValueError, Truncated) as exc:
            self._fail(Truncated(f"not a valid HTTP/1.1 response: {exc}"))
            return
        if body:
            response.times.append(t)
            response.pieces.append(body)
        if self._left == 0 and not self._until_close and (not self._chunked or self._complete()):
            self._finish()

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        if self.response is None:
            return
        if self._in_body and self._until_close:
            self._finish()
        elif self._in_body:
            self._fail(Truncated("the connection closed inside the response body"))
        else:
            self._fail(Disconnected(str(exc) if exc else "server disconnected"))

    # -- one request --------------------------------------------------------------------
    def start(self, request: bytes, response: Response) -> None:
        assert self.transport is not None
        self.response = response
        self.reusable = False
        self._head, self._in_body, self._trailer = b"", False, False
        self._left = self._skip = 0
        self._line = b""
        self.transport.write(request)

    def abort(self) -> None:
        self.reusable = False
        self.response = None
        if self.transport is not None:
            self.transport.abort()

    # -- parsing ------------------------------------------------------------------------
    def _read_head(self, data: bytes) -> bytes:
        buf = self._head + data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > _HEAD_MAX_BYTES:
                raise ValueError("response head too long")
            self._head = buf
            return b""
        lines = buf[:end].decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/1."):
            raise ValueError(f"status line {lines[0][:80]!r}")
        assert self.response is not None
        self.response.status = int(rest[:3])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        self.response.content_type = headers.get("content-type", "")
        self._chunked = "chunked" in headers.get("transfer-encoding", "")
        connection = headers.get("connection", "")
        self._close_after = "close" in connection or (version == "HTTP/1.0"
                                                      and "keep-alive" not in connection)
        self._until_close = False
        if not self._chunked:
            if "content-length" in headers:
                self._left = int(headers["content-length"])
            elif self.response.status in (204, 304) or 100 <= self.response.status < 200:
                self._left = 0
            else:
                self._until_close = True
        self._in_body = True
        return buf[end + 4:]

    def _read_plain(self, data: bytes) -> bytes:
        if self._until_close:
            return data
        if len(data) > self._left:
            raise ValueError("more bytes than Content-Length")
        self._left -= len(data)
        return data

    def _read_chunked(self, data: bytes) -> bytes:
        """Strip the chunk framing from one read; returns the body bytes it carried."""
        left = self._left
        n = len(data)
        if left and n <= left:  # the common case: the read lies inside one chunk's data
            self._left = left - n
            if self._left == 0:
                self._skip = 2
            return data
        if not left and not self._skip and not self._line and not self._trailer:
            # The other common case: the read is exactly one whole chunk.
            eol = data.find(b"\r\n")
            if 0 < eol < 9:
                end = eol + 2 + int(data[:eol], 16)
                if end + 2 == n and end > eol + 2 and data.endswith(b"\r\n"):
                    return data[eol + 2:end]
        pieces = []
        pos = 0
        if self._line:
            data, self._line = self._line + data, b""
            n = len(data)
        while pos < n:
            if self._left:
                end = min(n, pos + self._left)
                pieces.append(data[pos:end])
                self._left -= end - pos
                pos = end
                if self._left == 0:
                    self._skip = 2
            elif self._skip:
                take = min(self._skip, n - pos)
                if data[pos:pos + take] != b"\r\n"[2 - self._skip:2 - self._skip + take]:
                    raise ValueError("chunk data not followed by CRLF")
                self._skip -= take
                pos += take
            elif self._trailer:
                self._line = data[pos:]  # trailer lines, kept until the blank line
                break
            else:
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    self._line = data[pos:]
                    break
                size = int(data[pos:eol].split(b";", 1)[0].strip(), 16)
                pos = eol + 2
                if size == 0:
                    self._trailer = True
                    self._line = data[pos:]
                    break
                self._left = size
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _complete(self) -> bool:
        if not self._trailer:
            return False
        line = self._line
        if line.startswith(b"\r\n"):
            extra = len(line) > 2
        elif b"\r\n\r\n" in line:
            extra = not line.endswith(b"\r\n\r\n") or line.count(b"\r\n\r\n") > 1
        else:
            return False
        if extra:
            raise ValueError("bytes after the last chunk")
        return True

    def _finish(self) -> None:
        response, self.response = self.response, None
        self.reusable = not self._close_after and not self._until_close
        if not self.reusable and self.transport is not None:
            self.transport.close()
        if response is not None and not response.done.done():
            response.done.set_result(None)

    def _fail(self, exc: Exception) -> None:
        response, self.response = self.response, None
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()
        if response is not None and not response.done.done():
            response.done.set_exception(exc)


async def connect(endpoint: Endpoint, read_delay_s: float = 0.0) -> Connection:
    """A new connection; raises :class:`ConnectFailed` when none can be made."""
    loop = asyncio.get_running_loop()
    try:
        _, conn = await loop.create_connection(
            lambda: Connection(read_delay_s), endpoint.host, endpoint.port,
            ssl=endpoint.ssl_context)
    except OSError as exc:
        raise ConnectFailed(exc.errno, f"cannot connect to {endpoint.host}:{endpoint.port}: "
                            f"{exc.strerror or exc}") from exc
    return conn


def _burn_cpu(seconds: float) -> None:
    """Busy-wait (not sleep): a planted slow client must cost CPU like a slow parser would."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
