#!/usr/bin/env python3
"""A TCP transfer whose content is checked end to end: what arrived hashes as what was sent.

  tcp_digest.py serve ADDR PORT            accept one connection, read to EOF, print "BYTES SHA256"
  tcp_digest.py send ADDR PORT BYTES SEED  send BYTES pseudo-random bytes (from SEED), print "BYTES SHA256"

Both sides time out after 60 s, so a stalled transfer fails instead of hanging.
"""
import hashlib
import random
import socket
import sys


def serve(addr, port):
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        s.listen(1)
        s.settimeout(60)
        conn, _ = s.accept()
        conn.settimeout(60)
        digest, total = hashlib.sha256(), 0
        with conn:
            while True:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                digest.update(chunk)
                total += len(chunk)
    print(total, digest.hexdigest())


def send(addr, port, count, seed):
    data = random.Random(seed).randbytes(count)
    with socket.create_connection((addr, port), timeout=60) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)
    print(count, hashlib.sha256(data).hexdigest())


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
