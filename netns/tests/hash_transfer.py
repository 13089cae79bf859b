#!/usr/bin/env python3
"""One TCP transfer whose bytes are compared by SHA-256, for the netns scenarios.

  hash_transfer.py receive ADDR PORT   accept one connection (30 s at most), print "SHA256 BYTES"
  hash_transfer.py send ADDR PORT FILE connect, send FILE, close
"""
import hashlib
import socket
import sys


def family(address):
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def receive(address, port):
    listener = socket.socket(family(address), socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((address, port))
    listener.listen(1)
    listener.settimeout(30)
    connection, _ = listener.accept()
    connection.settimeout(30)
    digest, count = hashlib.sha256(), 0
    while True:
        chunk = connection.recv(1 << 20)
        if not chunk:
            break
        digest.update(chunk)
        count += len(chunk)
    print(digest.hexdigest(), count)


def send(address, port, path):
    with socket.create_connection((address, port), timeout=30) as connection, open(path, "rb") as source:
        connection.sendfile(source)
        connection.shutdown(socket.SHUT_WR)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "receive":
        receive(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 5 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(__doc__)
