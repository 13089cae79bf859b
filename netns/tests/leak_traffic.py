#!/usr/bin/env python3
"""Traffic for the leak suite (netns/tests/leaks.sh, leaks-runtime.sh; netns/lib.sh tg_leak_*).

  probe [--rounds N] [--pause P] [--stop-file F] [--progress F] [--max-seconds S] [--uid U]...
        [--device DEV]... [--source ADDR]... [--routed-only] [--udp-port P]... [--udp-from ADDR:P]...
        TARGET...
      Every way out we know, per round, for each uid (the process forks and drops to that uid: root is
      0, 65534 is nobody) and each TARGET address (IPv4 or IPv6, fe80::…%IFACE too): TCP connects to
      ports 8080, 443, 53 and 853, UDP datagrams to 51820 and 8080, a DNS query to 53, an ICMP echo
      request (a ping socket, as ping(8) uses unprivileged); and an mDNS query to 224.0.0.251 and
      ff02::fb. Each of them through the routing table, then forced onto every DEV
      (SO_BINDTODEVICE, as `ping -I eth0`), then bound to every source ADDR of the target's family (an
      address of a physical interface); with --routed-only only through the routing table. Nothing
      waits for an answer: a connect() that returns EINPROGRESS has sent its SYN. Stops after N rounds
      (default 1), when the stop file exists (checked between rounds) or after S seconds (default 60),
      whichever comes first; rounds are P seconds apart (default 0.02). --udp-port adds UDP datagrams
      to port P (a carrier's own port, from a socket that is not the carrier's); --udp-from sends every
      UDP datagram once more from a socket bound to ADDR:P (a carrier's source port on another local
      address), routed. After each round the progress
      file holds the number of rounds done; at the end one JSON line on stdout says how many attempts
      were made and how each one ended (sent, or the errno).
  listen PORT --max-seconds S
      A TCP server on [::]:PORT (IPv4 too): for each connection that sends a line within a second, it
      answers "seen ADDRESS" with the peer's address as it saw it, and closes.
  connect ADDR PORT [--uid U] [--timeout S]
      Connects (as uid U), sends a line, prints the server's answer (the address it saw us come from).
  sniff IFNAME --ready F --stop-file F [--max-seconds S]
      Counts what the kernel transmits on IFNAME (an AF_PACKET socket on every interface, so it can be
      started before IFNAME exists): one line per packet on stdout ("ipv6 icmpv6 133 fe80::… -> ff02::2"),
      flushed as it goes. Writes F (--ready) once it captures.
  order IFNAME TABLE --ready F [--max-seconds S]
      Which came first, the interface IFNAME or the nftables table TABLE (inet)? Listens to nf_tables'
      notifications (NFNLGRP_NFTABLES) and, in a tight loop, looks IFNAME up: when IFNAME exists and,
      after that, no NFT_MSG_NEWTABLE for TABLE has arrived yet, the interface was first ("interface
      first"); when the table's notification arrives while IFNAME was never seen, the table was ("table
      first"). Prints one of them (or "neither" after S seconds) and exits.
  hold-udp PORT --ready F [--max-seconds S]
      Holds UDP PORT on 0.0.0.0 and [::] (another program's socket on a WireGuard ListenPort).
Every loop is bounded in count and time.
"""
import argparse, errno, ipaddress, json, os, select, socket, struct, sys, time

SO_BINDTODEVICE = getattr(socket, "SO_BINDTODEVICE", 25)
PACKET_OUTGOING = 4


def family_of(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def dns_query(ident):
    # One question, "leak-probe.example. A", recursion desired.
    header = struct.pack("!HHHHHH", ident & 0xFFFF, 0x0100, 1, 0, 0, 0)
    name = b"".join(bytes([len(p)]) + p for p in (b"leak-probe", b"example")) + b"\0"
    return header + name + struct.pack("!HH", 1, 1)


def one_attempt(kind, port, target, device, source, seq):
    """Makes one attempt; returns "sent" or the errno's name."""
    fam = family_of(target)
    if kind == "tcp":
        s = socket.socket(fam, socket.SOCK_STREAM)
    elif kind in ("udp", "dns"):
        s = socket.socket(fam, socket.SOCK_DGRAM)
    else:  # icmp: a ping socket (net.ipv4.ping_group_range must hold the gid)
        s = socket.socket(fam, socket.SOCK_DGRAM, socket.IPPROTO_ICMPV6 if fam == socket.AF_INET6 else socket.IPPROTO_ICMP)
    try:
        if device:
            s.setsockopt(socket.SOL_SOCKET, SO_BINDTODEVICE, device.encode())
        if source:
            s.bind(source if isinstance(source, tuple) else (source, 0))
        if "%" in target:  # a scoped IPv6 address: fe80::1%eth0
            host, scope = target.split("%", 1)
            dest = (host, port, 0, socket.if_nametoindex(scope))
        else:
            dest = (target, port)
        if kind == "tcp":
            s.setblocking(False)
            rc = s.connect_ex(dest)
            return "sent" if rc in (0, errno.EINPROGRESS) else errno.errorcode.get(rc, str(rc))
        if kind == "udp":
            s.sendto(b"leak-probe %d" % seq, dest)
        elif kind == "dns":
            s.sendto(dns_query(seq), dest)
        else:
            echo_type = 128 if fam == socket.AF_INET6 else 8
            s.sendto(struct.pack("!BBHHH", echo_type, 0, 0, 0, seq & 0xFFFF) + b"leak-probe", dest[:1] + (0,) + dest[2:])
        return "sent"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()


PROBES = [("tcp", 8080), ("tcp", 443), ("tcp", 53), ("tcp", 853), ("udp", 51820), ("udp", 8080), ("dns", 53),
          ("icmp", 0)]
# Link-local multicast that hosts send on their own (mDNS), once per way out and round.
MULTICAST = [("224.0.0.251", None), ("ff02::fb", "eth0")]


def split_hostport(spec):
    """ "10.0.0.1:5400" or "[fd00::1]:5400" as (host, port)."""
    host, port = spec.rsplit(":", 1)
    return host.strip("[]"), int(port)


def probe_round(targets, devices, sources, seq, udp_ports=(), udp_from=()):
    results = {}
    paths = [(None, None)] + [(d, None) for d in devices] + [(None, s) for s in sources]
    probes = PROBES + [("udp", p) for p in udp_ports]
    for target in targets:
        for device, source in paths:
            if source and family_of(source) != family_of(target):
                continue
            for kind, port in probes:
                r = one_attempt(kind, port, target, device, source, seq)
                results[r] = results.get(r, 0) + 1
        # From a fixed source port (a carrier's own, on another local address), to every UDP port.
        for spec in udp_from:
            host, sport = split_hostport(spec)
            if family_of(host) != family_of(target) or "%" in target:
                continue
            for kind, port in probes:
                if kind == "udp":
                    r = one_attempt(kind, port, target, None, (host, sport), seq)
                    results[r] = results.get(r, 0) + 1
    for device, source in paths:
        for group, scope in MULTICAST:
            if source and family_of(source) != family_of(group):
                continue
            # An IPv6 link-local group needs an interface: the forced one, else eth0.
            target = "%s%%%s" % (group, device or scope) if scope else group
            r = one_attempt("dns", 5353, target, device, source, seq)
            results[r] = results.get(r, 0) + 1
    return results


def drop_to(uid):
    if uid != 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def probe(args):
    deadline = time.monotonic() + args.max_seconds
    uids = args.uid or [0]
    totals = {}
    rounds = 0
    while rounds < args.rounds and time.monotonic() < deadline:
        if args.stop_file and os.path.exists(args.stop_file):
            break
        for uid in uids:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                try:
                    drop_to(uid)
                    out = probe_round(args.targets, [] if args.routed_only else args.device or [],
                                      [] if args.routed_only else args.source or [], rounds,
                                      args.udp_port or [], args.udp_from or [])
                except Exception as e:  # reported, never hidden: the shell checks the summary
                    out = {"exception: %s" % e: 1}
                os.write(w, json.dumps(out).encode())
                os._exit(0)
            os.close(w)
            data = b""
            while True:
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                data += chunk
            os.close(r)
            os.waitpid(pid, 0)
            for k, v in json.loads(data or b"{}").items():
                key = "uid %d: %s" % (uid, k)
                totals[key] = totals.get(key, 0) + v
        rounds += 1
        if args.progress:
            with open(args.progress + ".tmp", "w") as f:
                f.write("%d\n" % rounds)
            os.replace(args.progress + ".tmp", args.progress)
        if rounds < args.rounds:
            time.sleep(args.pause)  # pacing between the rounds of a bounded load loop
    print(json.dumps({"rounds": rounds, "attempts": sum(totals.values()), "results": totals}, sort_keys=True))


def normalise(addr):
    ip = ipaddress.ip_address(addr.split("%")[0])
    if ip.version == 6 and ip.ipv4_mapped:
        return str(ip.ipv4_mapped)
    return str(ip)


def listen(args):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", args.port))
    s.listen(64)
    deadline = time.monotonic() + args.max_seconds
    while time.monotonic() < deadline:
        r, _, _ = select.select([s], [], [], 0.5)
        if not r:
            continue
        c, peer = s.accept()
        c.settimeout(1.0)
        try:
            if c.recv(256):
                c.sendall(("seen %s\n" % normalise(peer[0])).encode())
        except OSError:
            pass
        c.close()


def connect(args):
    drop_to(args.uid)
    s = socket.socket(family_of(args.addr), socket.SOCK_STREAM)
    s.settimeout(args.timeout)
    try:
        s.connect((args.addr, args.port))
        s.sendall(b"hello\n")
        answer = s.recv(256).decode().strip()
    except OSError as e:
        print("failed: %s" % e)
        sys.exit(1)
    local = normalise(s.getsockname()[0])
    print("%s (local address %s)" % (answer, local))


def describe(proto, payload):
    try:
        if proto == 0x86DD:
            nxt, src, dst = payload[6], payload[8:24], payload[24:40]
            off = 40
            while nxt in (0, 43, 60) and off + 2 <= len(payload):  # hop-by-hop (MLD has one), routing, dest opts
                nxt, off = payload[off], off + 8 * (payload[off + 1] + 1)
            what = "icmpv6 %d" % payload[off] if nxt == 58 else "proto %d" % nxt
            return "ipv6 %s %s -> %s" % (what, socket.inet_ntop(socket.AF_INET6, src), socket.inet_ntop(socket.AF_INET6, dst))
        if proto == 0x0800:
            p = payload[9]
            what = "icmp %d" % payload[(payload[0] & 15) * 4] if p == 1 else "proto %d" % p
            return "ipv4 %s %s -> %s" % (what, socket.inet_ntoa(payload[12:16]), socket.inet_ntoa(payload[16:20]))
    except (IndexError, ValueError):
        pass
    return "ethertype 0x%04x, %d bytes" % (proto, len(payload))


def sniff(args):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0003))
    with open(args.ready, "w") as f:
        f.write("capturing\n")
    deadline = time.monotonic() + args.max_seconds
    while time.monotonic() < deadline and not os.path.exists(args.stop_file):
        r, _, _ = select.select([s], [], [], 0.1)
        if not r:
            continue
        data, addr = s.recvfrom(65535)
        ifname, proto, pkttype = addr[0], addr[1], addr[2]
        if ifname == args.ifname and pkttype == PACKET_OUTGOING:
            print(describe(proto, data), flush=True)


NETLINK_NETFILTER, NFNLGRP_NFTABLES, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP = 12, 7, 270, 1
NFT_MSG_NEWTABLE, NFNL_SUBSYS_NFTABLES, NFTA_TABLE_NAME = 0, 10, 1


def new_tables(sock):
    """The names of the tables in every NFT_MSG_NEWTABLE queued on sock."""
    names = []
    while True:
        try:
            data = sock.recv(65536, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return names
        off = 0
        while off + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, off)
            if length < 16:
                break
            if kind == (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE:
                a = off + 16 + 4  # nlmsghdr, nfgenmsg
                while a + 4 <= off + length:
                    alen, atype = struct.unpack_from("=HH", data, a)
                    if alen < 4:
                        break
                    if atype & 0x3FFF == NFTA_TABLE_NAME:
                        names.append(data[a + 4:a + alen].split(b"\0")[0].decode())
                    a += (alen + 3) & ~3
            off += (length + 3) & ~3


def order(args):
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.bind((0, 0))
    sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, NFNLGRP_NFTABLES)
    with open(args.ready, "w") as f:
        f.write("listening\n")
    deadline = time.monotonic() + args.max_seconds
    while time.monotonic() < deadline:
        try:
            socket.if_nametoindex(args.ifname)
            seen = True
        except OSError:
            seen = False
        # Drained after the lookup: a notification that is not here yet was sent after it.
        if args.table in new_tables(sock):
            print("table first" if not seen else "neither proven (both within one look)")
            return
        if seen:
            print("interface first")
            return
        time.sleep(0.0002)
    print("neither")


def hold_udp(args):
    socks = []
    for fam, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        u = socket.socket(fam, socket.SOCK_DGRAM)
        if fam == socket.AF_INET6:
            u.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        u.bind((host, args.port))
        socks.append(u)
    with open(args.ready, "w") as f:
        f.write("holding\n")
    deadline = time.monotonic() + args.max_seconds
    while time.monotonic() < deadline:
        select.select(socks, [], [], 0.5)
        for u in socks:
            try:
                u.recv(65535, socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("probe")
    a.add_argument("--rounds", type=int, default=1)
    a.add_argument("--stop-file")
    a.add_argument("--progress")
    a.add_argument("--max-seconds", type=float, default=60)
    a.add_argument("--pause", type=float, default=0.02)
    a.add_argument("--uid", type=int, action="append")
    a.add_argument("--device", action="append")
    a.add_argument("--source", action="append")
    a.add_argument("--routed-only", action="store_true")
    a.add_argument("--udp-port", type=int, action="append")
    a.add_argument("--udp-from", action="append")
    a.add_argument("targets", nargs="+")
    a.set_defaults(func=probe)
    a = sub.add_parser("listen")
    a.add_argument("port", type=int)
    a.add_argument("--max-seconds", type=float, default=240)
    a.set_defaults(func=listen)
    a = sub.add_parser("connect")
    a.add_argument("addr")
    a.add_argument("port", type=int)
    a.add_argument("--uid", type=int, default=0)
    a.add_argument("--timeout", type=float, default=3)
    a.set_defaults(func=connect)
    a = sub.add_parser("sniff")
    a.add_argument("ifname")
    a.add_argument("--ready", required=True)
    a.add_argument("--stop-file", required=True)
    a.add_argument("--max-seconds", type=float, default=30)
    a.set_defaults(func=sniff)
    a = sub.add_parser("order")
    a.add_argument("ifname")
    a.add_argument("table")
    a.add_argument("--ready", required=True)
    a.add_argument("--max-seconds", type=float, default=20)
    a.set_defaults(func=order)
    a = sub.add_parser("hold-udp")
    a.add_argument("port", type=int)
    a.add_argument("--ready", required=True)
    a.add_argument("--max-seconds", type=float, default=60)
    a.set_defaults(func=hold_udp)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
