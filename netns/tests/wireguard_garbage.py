#!/usr/bin/env python3
"""Hostile traffic for the WireGuard scenario (netns/tests/wireguard.sh), sent from the router.

  garbage HOST PORT           300 datagrams WireGuard must drop as malformed: random bytes, and
                              handshake/cookie messages truncated or oversized.
  replay HOST PORT IFACE      captures one transport packet on IFACE going to HOST:PORT and sends it
                              again three times (prints "capturing" once it listens).
  flood HOST PORT PUBHEX      2,000 handshake initiations with a valid MAC1 for the public key (the rest
                              random), then counts the cookie replies that come back.
Every loop is bounded; nothing waits more than a few seconds.
"""
import hashlib, os, random, select, socket, struct, sys, time

def garbage(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rng = random.Random(7)
    sent = 0
    for _ in range(100):   # random bytes whose reserved bytes are not zero
        n = rng.randint(1, 200)
        data = bytearray(rng.getrandbits(8) for _ in range(n))
        if n >= 4 and data[1:4] == b"\0\0\0":
            data[1] = 1
        s.sendto(bytes(data), (host, port)); sent += 1
    for _ in range(50):    # truncated: an initiation cut short, a transport shorter than its header + tag
        s.sendto(b"\x01\0\0\0" + os.urandom(rng.randint(0, 140)), (host, port)); sent += 1
        s.sendto(b"\x04\0\0\0" + os.urandom(rng.randint(0, 27)), (host, port)); sent += 1
    for size in [149, 200, 1500, 9000] * 25:  # oversized handshake messages
        t = rng.choice([1, 2, 3])
        s.sendto(bytes([t, 0, 0, 0]) + os.urandom(size - 4), (host, port)); sent += 1
    print(f"{sent} sent")

def replay(host, port, iface):
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
    raw.bind((iface, 0))
    print("capturing", flush=True)
    deadline = time.time() + 5
    while time.time() < deadline:
        r, _, _ = select.select([raw], [], [], 0.5)
        if not r:
            continue
        frame = raw.recv(65535)
        if len(frame) < 14 + 20 + 8 or frame[12:14] != b"\x08\x00":
            continue
        ip = frame[14:]
        ihl = (ip[0] & 15) * 4
        if ip[9] != 17 or socket.inet_ntoa(ip[16:20]) != host:
            continue
        udp = ip[ihl:]
        dport = struct.unpack("!H", udp[2:4])[0]
        payload = udp[8:]
        if dport == port and len(payload) >= 32 and payload[0] == 4:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for _ in range(3):
                s.sendto(payload, (host, port))
            print("replayed 3")
            return
    print("no transport packet seen")
    sys.exit(1)

def flood(host, port, pubhex):
    pub = bytes.fromhex(pubhex)
    mac1_key = hashlib.blake2s(b"mac1----" + pub).digest()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    cookies = 0
    def drain():
        nonlocal cookies
        while True:
            try:
                data = s.recv(2048)
            except BlockingIOError:
                return
            if len(data) == 64 and data[0] == 3:
                cookies += 1
    for i in range(2000):
        body = b"\x01\0\0\0" + struct.pack("<I", i + 1) + os.urandom(108)
        mac1 = hashlib.blake2s(body, key=mac1_key, digest_size=16).digest()
        msg = body + mac1 + bytes(16)
        try:
            s.sendto(msg, (host, port))
        except BlockingIOError:
            pass
        if i % 100 == 0:
            drain()
    deadline = time.time() + 1.5
    while time.time() < deadline:
        select.select([s], [], [], 0.2)
        drain()
    print(f"{cookies} cookie replies")

mode = sys.argv[1]
if mode == "garbage":
    garbage(sys.argv[2], int(sys.argv[3]))
elif mode == "replay":
    replay(sys.argv[2], int(sys.argv[3]), sys.argv[4])
elif mode == "flood":
    flood(sys.argv[2], int(sys.argv[3]), sys.argv[4])
else:
    sys.exit(f"unknown mode {mode}")
