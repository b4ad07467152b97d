"""The least CPU a Python client can spend per stream chunk on this machine.

A sender process writes SSE-sized chunks (about 110 bytes, chunked framing included) over
``--streams`` TCP loopback connections at ``--rate`` chunks per second, the way a server at
c = streams does; the receiver is the bare minimum of a client that times every chunk: one
epoll set, one ``recv`` and one ``time.monotonic()`` per ready socket, nothing parsed. Its CPU
per read (user and system, from ``os.times``) is the floor under ``client_cost.py``'s specbench
column: a client that reads each chunk when it arrives cannot go below it in Python.

Usage::

    python benchmarks/recv_floor.py                       # 250 streams, 15,000 chunks/s, 3 runs
    python benchmarks/recv_floor.py --streams 64 --rate 8000
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import select
import socket
import statistics
import time

CHUNK = b"64\r\ndata: " + b"x" * 90 + b"\n\n\r\n"


def _send(port: int, streams: int, rate: float, duration_s: float, ready: mp.Event) -> None:
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(streams)]
    for conn in conns:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ready.set()
    period_s = streams / rate  # one chunk to every stream per "step", like a decode batch
    t = time.monotonic()
    end = t + duration_s + 1.0
    while t < end:
        for conn in conns:
            conn.send(CHUNK)
        t += period_s
        time.sleep(max(0.0, t - time.monotonic()))


def run_once(streams: int, rate: float, duration_s: float) -> tuple[float, float, float]:
    """(reads per second, user us per read, system us per read)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(streams)
    ready = mp.Event()
    sender = mp.Process(target=_send,
                        args=(server.getsockname()[1], streams, rate, duration_s, ready))
    sender.start()
    socks = {}
    epoll = select.epoll()
    for _ in range(streams):
        sock = server.accept()[0]
        sock.setblocking(False)
        epoll.register(sock.fileno(), select.EPOLLIN)
        socks[sock.fileno()] = sock
    ready.wait()
    times: list[float] = []
    t0 = os.times()
    end = time.monotonic() + duration_s
    while time.monotonic() < end:
        for fd, _ in epoll.poll(0.1):
            socks[fd].recv(65536)
            times.append(time.monotonic())
    t1 = os.times()
    sender.join()
    for sock in socks.values():
        sock.close()
    server.close()
    n = max(len(times), 1)
    return (n / duration_s, (t1.user - t0.user) / n * 1e6, (t1.system - t0.system) / n * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=250)
    parser.add_argument("--rate", type=float, default=15000.0, help="chunks per second, all")
    parser.add_argument("--duration-s", type=float, default=6.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = [run_once(args.streams, args.rate, args.duration_s) for _ in range(args.runs)]
    user = statistics.median(r[1] for r in runs)
    system = statistics.median(r[2] for r in runs)
    print(f"bare epoll + recv receiver, {args.streams} TCP loopback streams, "
          f"{statistics.median(r[0] for r in runs):,.0f} reads/s (medians of {args.runs}; "
          f"{os.cpu_count()} cpus)")
    print(f"  user {user:.2f} us/read   system {system:.2f} us/read   total {user + system:.2f}")


if __name__ == "__main__":
    main()
