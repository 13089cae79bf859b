#!/usr/bin/env python3
"""Floods a WireGuard interface with handshake initiations whose MAC1 is valid (so each passes the
first check and costs the receiver work) from many source addresses, as Scripts/bench-handshake-flood.sh
uses it.

  handshake_flood.py PUBKEY-BASE64 HOST PORT SECONDS SOURCE... [--max N] [--rate PER-SECOND]

Round-robin over the SOURCE addresses (each bound to its own socket), at PER-SECOND (default: as fast
as it can), for SECONDS or N initiations, whichever comes first. The rest of each initiation is random: the receiver cannot
tell before its Diffie-Hellman (or, under load, its MAC2 check) that no peer sent it. Prints one JSON
line: {"sent": N, "seconds": S, "sources": K}.
MAC1 = BLAKE2s-128 keyed with BLAKE2s-256("mac1----" || receiver's public key), over the first 116
bytes (WireGuard whitepaper, section 5.4.4).
"""
import base64
import hashlib
import json
import os
import socket
import sys
import time


def main():
    args = sys.argv[1:]
    limit, rate = 10_000_000, 0.0
    if "--max" in args:
        i = args.index("--max")
        limit = int(args[i + 1])
        del args[i:i + 2]
    if "--rate" in args:
        i = args.index("--rate")
        rate = float(args[i + 1])
        del args[i:i + 2]
    pub = base64.b64decode(args[0])
    host, port, seconds = args[1], int(args[2]), float(args[3])
    sources = args[4:]
    key = hashlib.blake2s(b"mac1----" + pub).digest()
    socks = []
    for s in sources:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((s, 0))
        sock.setblocking(False)
        socks.append(sock)
    sent = 0
    start = time.monotonic()
    deadline = start + seconds
    pool = os.urandom(1 << 16)
    while sent < limit:
        if sent % 64 == 0:
            now = time.monotonic()
            if now >= deadline:
                break
            if rate > 0 and sent > (now - start) * rate:
                time.sleep(min(0.01, sent / rate - (now - start)))
                continue
        off = (sent * 113) % ((1 << 16) - 112)
        body = b"\x01\x00\x00\x00" + pool[off:off + 112]
        msg = body + hashlib.blake2s(body, key=key, digest_size=16).digest() + bytes(16)
        try:
            socks[sent % len(socks)].sendto(msg, (host, port))
        except BlockingIOError:
            pass
        sent += 1
    print(json.dumps({"sent": sent, "seconds": round(time.monotonic() - start, 3), "sources": len(socks)}))


if __name__ == "__main__":
    main()
