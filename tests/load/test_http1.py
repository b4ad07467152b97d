"""The streaming client's HTTP/1.1 framing, split across reads every way (load/http1.py)."""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import given
from hypothesis import strategies as st

from specbench.load import http1

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunked(payloads: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + b"0\r\n\r\n"


def _feed(raw: bytes, cuts: list[int]) -> tuple[http1.Connection, http1.Response]:
    loop = asyncio.new_event_loop()
    try:
        conn = http1.Connection()
        response = http1.Response(loop.create_future())
        conn.response = response
        edges = [0, *sorted(set(c % (len(raw) + 1) for c in cuts)), len(raw)]
        for a, b in itertools.pairwise(edges):
            if b > a:
                conn.data_received(raw[a:b])
        return conn, response
    finally:
        loop.close()


@given(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=6),
       st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_the_body_and_its_end_come_through_whatever_the_reads(payloads: list[bytes],
                                                              cuts: list[int]) -> None:
    conn, response = _feed(HEAD + _chunked(payloads), cuts)
    assert response.done.done() and response.done.exception() is None
    assert b"".join(response.pieces) == b"".join(payloads)
    assert response.status == 200 and conn.reusable


@given(st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_a_stream_cut_short_is_not_done(cuts: list[int]) -> None:
    raw = HEAD + _chunked([b"data: 1\n\n", b"data: 2\n\n"])
    _, response = _feed(raw[:-5], cuts)
    assert not response.done.done()


def test_a_content_length_body_and_connection_close() -> None:
    raw = b"HTTP/1.1 500 Oops\r\nContent-Length: 5\r\nConnection: close\r\n\r\nerror"
    conn, response = _feed(raw, [20, 60])
    assert response.done.done() and response.status == 500
    assert b"".join(response.pieces) == b"error" and not conn.reusable


def test_bad_framing_is_a_truncated_stream() -> None:
    _, response = _feed(HEAD + b"zz\r\nhello\r\n", [])
    assert isinstance(response.done.exception(), http1.Truncated)
