#!/usr/bin/env python3
"""A client of a tunnel's control socket for netns/tests/control.sh (one request per connection, a line
each way). Prints what it observed, one fact per line, for the scenario to check.

  control_client.py PATH request LINE            the reply line
  control_client.py PATH idle N LINE             N connections that send nothing, then LINE on another:
                                                 the reply, then which idle ones the server closed
  control_client.py PATH as-uid UID LINE         connect as UID (after setuid): the reply, or the error.
                                                 The way to the socket is opened as root (O_PATH), so
                                                 that only the socket's own mode and the server's
                                                 credential check decide, not the owner-only directories
  control_client.py PATH listen                  listen on PATH (a live socket that is not Tunnelgate's)
                                                 until stdin closes; prints "listening" once bound
"""
import ctypes
import os
import socket
import sys


def request(path, line):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # A blocking connect waits while the listen backlog is full; with a timeout set, an AF_UNIX connect
    # would fail with EAGAIN instead.
    s.connect(path)
    s.settimeout(10)
    try:
        s.sendall(line.encode() + b"\n")
    except BrokenPipeError:
        pass  # answered and closed before the request was read (a refusal): the answer is still there
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return data.decode().rstrip("\n")


def is_closed(s):
    """True when the server closed the connection (EOF), False while it is open and silent."""
    try:
        return s.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def main():
    path, mode = sys.argv[1], sys.argv[2]
    if mode == "request":
        print(request(path, sys.argv[3]))
    elif mode == "idle":
        count, line = int(sys.argv[3]), sys.argv[4]
        idle = []
        for _ in range(count):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            idle.append(s)
        print(request(path, line))
        closed = [str(i) for i, s in enumerate(idle) if is_closed(s)]
        print("closed: " + (" ".join(closed) if closed else "none"))
    elif mode == "as-uid":
        uid, line = int(sys.argv[3]), sys.argv[4]
        way = os.open(path, os.O_PATH)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        # setuid made the process non-dumpable, which hides /proc/self/fd from it: undo that.
        ctypes.CDLL(None, use_errno=True).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
        try:
            print(request("/proc/self/fd/%d" % way, line))
        except OSError as e:
            print("error: " + (e.strerror or str(e)))
    elif mode == "listen":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.listen(8)
        print("listening", flush=True)
        sys.stdin.read()
        s.close()
        os.unlink(path)
    else:
        sys.exit("unknown mode " + mode)


main()
