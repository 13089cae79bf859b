#!/usr/bin/env python3
"""Hostile HTTP clients for netns/tests/metrics.sh: they try to stall `tunnelgate metrics`.

    metrics_clients.py HOST PORT SILENT TRICKLE_INTERVAL NOREAD_REQUESTS WAIT_SECONDS

Opens SILENT connections that send nothing; one that sends a request head one byte every
TRICKLE_INTERVAL seconds (so it never completes within the server's request timeout); and one that
sends NOREAD_REQUESTS pipelined requests and never reads an answer. Prints "ready" once all are open,
then waits WAIT_SECONDS (always the whole time, holding every socket) for the server to close the silent and trickling ones, and prints one
JSON line: how many silent connections the server closed and after how long at most, whether and when
it closed the trickler and how many bytes the trickler had sent by then. The non-reader is only held
open (its close is seen by the server's own socket count, not here). Bounded: every loop ends by
WAIT_SECONDS.
"""
import json
import select
import socket
import sys
import time


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    silent_count, interval = int(sys.argv[3]), float(sys.argv[4])
    noread_requests, wait = int(sys.argv[5]), float(sys.argv[6])

    start = time.monotonic()
    silent = [socket.create_connection((host, port), timeout=5) for _ in range(silent_count)]
    trickler = socket.create_connection((host, port), timeout=5)
    noread = socket.create_connection((host, port), timeout=5)
    noread.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = b"GET /metrics HTTP/1.1\r\nHost: stall\r\n\r\n"
    noread.setblocking(False)
    pipelined = request * noread_requests
    sent = 0
    deadline = start + wait
    # As much as the server's socket takes within a second (it stops reading while it cannot write).
    send_until = time.monotonic() + 1
    while sent < len(pipelined) and time.monotonic() < send_until:
        try:
            sent += noread.send(pipelined[sent:])
        except BlockingIOError:
            select.select([], [noread], [], 0.05)
    print("ready", flush=True)

    closed_at = {}
    head = b"GET /metrics HTTP/1.1\r\nHost: trickle\r\nX-Padding: " + b"x" * 200 + b"\r\n\r\n"
    trickled = 0
    trickler_closed = None
    next_byte = time.monotonic()
    for s in silent + [trickler]:
        s.setblocking(False)
    while time.monotonic() < deadline:
        open_silent = [s for s in silent if s.fileno() not in closed_at]
        watch = open_silent + ([trickler] if trickler_closed is None else [])
        # Held until the deadline even once all are closed: the non-reader stays open meanwhile.
        readable, _, _ = select.select(watch, [], [], 0.05) if watch else ([], [], time.sleep(0.05))
        now = time.monotonic()
        for s in readable:
            try:
                data = s.recv(4096)
            except (ConnectionResetError, OSError):
                data = b""
            if data:
                continue  # an answer (e.g. an error status) before the close
            if s is trickler:
                trickler_closed = now - start
            else:
                closed_at[s.fileno()] = now - start
        if trickler_closed is None and now >= next_byte and trickled < len(head):
            try:
                trickler.send(head[trickled:trickled + 1])
                trickled += 1
            except OSError:
                trickler_closed = now - start
            next_byte = now + interval

    print(json.dumps({
        "silent": silent_count,
        "silent_closed": len(closed_at),
        "silent_max_seconds": round(max(closed_at.values()), 2) if closed_at else None,
        "trickle_closed_seconds": round(trickler_closed, 2) if trickler_closed is not None else None,
        "trickle_bytes": trickled,
        "trickle_head_bytes": len(head),
        "noread_sent_bytes": sent,
    }), flush=True)
    # Held until here so that the server, not this process, closes them.
    for s in silent + [trickler, noread]:
        s.close()


if __name__ == "__main__":
    main()
