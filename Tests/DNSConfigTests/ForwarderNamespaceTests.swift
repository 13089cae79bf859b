import Glibc
import LinuxSystem
import TunnelgateSettings
import XCTest
@testable import DNSConfig

/// Runs `body` on a new thread that first enters a new, empty network
/// namespace (its `lo` is down until the body brings it up). Requires root;
/// without it the test fails, it is not skipped. Foundation's Process is not
/// used in there: it needs a loopback socket pair before `lo` is up.
func inPrivateNetworkNamespace(_ body: @escaping @Sendable () throws -> Void,
                               file: StaticString = #filePath, line: UInt = #line) {
    final class Outcome: @unchecked Sendable { // written by the worker before join() returns
        var error: Error?
    }
    let outcome = Outcome()
    do {
        let thread = try SystemThread.spawn {
            do {
                try ProcessControl.enterNewNetworkNamespace()
                try body()
            } catch {
                outcome.error = error
            }
        }
        thread.join()
    } catch {
        outcome.error = error
    }
    if let error = outcome.error { XCTFail("\(error)", file: file, line: line) }
}

/// A child process the test started, ended (SIGTERM) and reaped when the test is done.
final class Child {
    let pid: Int32
    init(_ path: String, _ arguments: [String]) throws {
        pid = try ProcessControl.spawn(path, [path] + arguments)
    }
    /// True while the child runs (a child that has ended is reaped here).
    var isRunning: Bool {
        do { return try ProcessControl.wait(for: pid, block: false) == nil } catch { return false }
    }
    func stop() {
        try? ProcessControl.signal(pid, SIGTERM)
        _ = try? ProcessControl.wait(for: pid)
    }
}

/// The forwarder with real DNS servers: in a private network namespace, two
/// dnsmasq processes answer every name, 127.0.0.2 with 10.2.2.2 (the
/// "tunnel's" server) and 127.0.0.3 with 10.3.3.3 (the server resolv.conf
/// listed before). The configurator applies split DNS for corp.example
/// against a temporary root whose resolv.conf names 127.0.0.3, and its
/// forwarder serves on 127.0.0.153:53.
///
///   test client ──▶ 127.0.0.153:53 forwarder ──┬─ *.corp.example ─▶ 127.0.0.2:53 dnsmasq → 10.2.2.2
///                    (UDP and TCP)             └─ everything else ▶ 127.0.0.3:53 dnsmasq → 10.3.3.3
final class ForwarderNamespaceTests: XCTestCase {
    enum Failure: Error { case setup(String) }

    static func run(_ executable: String, _ arguments: [String]) throws {
        let pid = try ProcessControl.spawn(executable, [executable] + arguments)
        let termination = try ProcessControl.wait(for: pid)
        guard termination == .exited(0) else { throw Failure.setup("\(executable) \(arguments): \(String(describing: termination))") }
    }

    /// Starts dnsmasq on `address`:53 answering every name with `answer`
    /// (and whatever `extra` options say), and waits until it answers.
    static func startDnsmasq(on address: String, answering answer: String, extra: [String] = []) throws -> Child {
        let child = try Child("/usr/sbin/dnsmasq", [
            "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--bind-interfaces",
            "--listen-address=\(address)", "--port=53", "--address=/#/\(answer)", "--user=root", "--group=root",
            "--pid-file=", "--log-facility=/dev/null"] + extra)
        let bytes = address.split(separator: ".").compactMap { UInt8($0) }
        var running = true
        let ready = try eventually(5) {
            running = child.isRunning
            guard running else { return true }
            return try udpExchange(query("probe.invalid"), with: .ipv4(bytes, port: 53), timeout: 0.1) != nil
        }
        guard ready, running else {
            child.stop()
            throw Failure.setup("dnsmasq on \(address) did not start answering within 5 s (running: \(running))")
        }
        return child
    }

    func testSplitDNSWithRealServers() throws {
        inPrivateNetworkNamespace {
            let myNamespace = try FileSystem.status("/proc/thread-self/ns/net", followingSymbolicLinks: true)
            try Self.run("/usr/sbin/ip", ["link", "set", "lo", "up"])
            let tunnelServer = try Self.startDnsmasq(on: "127.0.0.2", answering: "10.2.2.2")
            defer { tunnelServer.stop() }
            let fallbackServer = try Self.startDnsmasq(on: "127.0.0.3", answering: "10.3.3.3")
            defer { fallbackServer.stop() }
            // The servers run in this test's namespace, not the host's.
            let theirs = try FileSystem.status("/proc/\(tunnelServer.pid)/ns/net", followingSymbolicLinks: true)
            XCTAssertEqual(theirs?.inode, myNamespace?.inode)

            let root = try TemporaryRoot()
            try root.write("/etc/resolv.conf", "nameserver 127.0.0.3\nsearch home.lan\n")
            let before = try root.snapshot()
            let settings = DNSSettings(servers: [IPAddress("127.0.0.2")!], matchDomains: ["corp.example"])
            let applied = try DNSConfigurator(paths: root.paths, backend: .resolvConf)
                .apply(settings: settings, interfaceName: "lo", interfaceIndex: 1,
                       stateDirectory: root.stateDirectory, tunnelName: "tg0")
            let forwarder = try XCTUnwrap(applied.forwarder)
            XCTAssertEqual(forwarder.listenAddress, .ipv4([127, 0, 0, 153], port: 53))
            let written = try XCTUnwrap(try root.read("/etc/resolv.conf"))
            XCTAssertTrue(written.hasSuffix("nameserver 127.0.0.153\nsearch corp.example home.lan\n"), written)
            try forwarder.start()

            let server = SocketAddress.ipv4([127, 0, 0, 153], port: 53)
            let udp: [(String, String)] = [("host.corp.example", "10.2.2.2"), ("CORP.EXAMPLE", "10.2.2.2"),
                                           ("www.example.org", "10.3.3.3"), ("notcorp.example", "10.3.3.3")]
            for (index, (name, expected)) in udp.enumerated() {
                let id = UInt16(0x7700 + index)
                let reply = try XCTUnwrap(try udpExchange(query(name, id: id), with: server), "UDP \(name)")
                XCTAssertEqual(firstAddress(in: reply)?.address, expected, "UDP \(name)")
                XCTAssertEqual(firstAddress(in: reply)?.id, id)
            }
            let answers = try tcpExchange([query("db.corp.example", id: 1), query("example.net", id: 2)], with: server)
            let byID = Dictionary(uniqueKeysWithValues: answers.compactMap(firstAddress).map { ($0.id, $0.address) })
            XCTAssertEqual(byID, [1: "10.2.2.2", 2: "10.3.3.3"], "TCP")

            waitForAnswers(forwarder, 6)
            let stats = forwarder.statistics
            XCTAssertEqual(stats.forwardedToTunnel, 3)
            XCTAssertEqual(stats.forwardedToFallback, 3)
            XCTAssertEqual(stats.answered, 6)
            XCTAssertEqual(stats.malformed + stats.timedOut + stats.upstreamErrors + stats.overloaded, 0, "\(stats)")

            try forwarder.stop()
            try DNSConfigurator.restore(stateDirectory: root.stateDirectory, tunnelName: "tg0")
            XCTAssertEqual(try root.snapshot(), before)
            // Nothing listens on 127.0.0.153 any more.
            XCTAssertNil(try udpExchange(query("host.corp.example"), with: server, timeout: 0.3))
        }
    }

    // MARK: Answers are checked, against an attacker on the wire

    /// An on-path attacker: it sniffs `lo` (AF_PACKET) for queries to the
    /// server's port 53 and answers each at once with raw IP datagrams
    /// (IP_HDRINCL, any source it likes) carrying the forged address: a wrong
    /// name, type, class and id from the server's address and port, the
    /// right answer from the server's address but port 5353, from another
    /// address, and to another of the host's addresses. Each sent forgery is
    /// a line in the log; "ready" comes first.
    static let spoofer = #"""
        import socket, struct, sys
        server, forged, other_source, other_destination, log_path = sys.argv[1:6]

        def checksum(data):
            if len(data) % 2: data += b"\0"
            total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
            while total >> 16: total = (total & 0xffff) + (total >> 16)
            return ~total & 0xffff

        def datagram(src, sport, dst, dport, payload):
            length = 8 + len(payload)
            pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 17, length)
            udp = struct.pack("!HHHH", sport, dport, length, 0) + payload
            udp = udp[:6] + struct.pack("!H", checksum(pseudo + udp) or 0xffff) + udp[8:]
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + length, 0, 0, 64, 17, 0,
                             socket.inet_aton(src), socket.inet_aton(dst))
            return ip + udp

        def answer(qid, name, qtype, qclass):
            return (struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0) + name + struct.pack("!HH", qtype, qclass)
                    + b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(forged))

        sniffer = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
        sniffer.bind(("lo", 0x0800))
        raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        log = open(log_path, "a", buffering=1)
        log.write("ready\n")
        seen = set()
        while True:
            packet, link = sniffer.recvfrom(65535)
            if link[2] != socket.PACKET_HOST or packet[9] != 17:
                continue  # lo shows each packet going out and coming in: the second copy only, UDP only
            ihl = (packet[0] & 0x0f) * 4
            client, destination = socket.inet_ntoa(packet[12:16]), socket.inet_ntoa(packet[16:20])
            sport, dport = struct.unpack("!HH", packet[ihl:ihl + 4])
            dns = packet[ihl + 8:]
            if destination != server or dport != 53 or len(dns) < 17 or dns[2] & 0x80:
                continue
            qid = struct.unpack("!H", dns[:2])[0]
            end = 12
            while dns[end] != 0:
                end += 1 + dns[end]
            name = dns[12:end + 1]
            qtype, qclass = struct.unpack("!HH", dns[end + 1:end + 5])
            if (sport, qid) in seen:
                continue
            seen.add((sport, qid))
            right = answer(qid, name, qtype, qclass)
            forgeries = [
                ("wrong-name", server, 53, client, answer(qid, b"\x06forged\x07example\x00", qtype, qclass)),
                ("wrong-type", server, 53, client, answer(qid, name, 28 if qtype == 1 else 1, qclass)),
                ("wrong-class", server, 53, client, answer(qid, name, qtype, 3)),
                ("wrong-id", server, 53, client, answer(qid ^ 0xffff, name, qtype, qclass)),
                ("wrong-port", server, 5353, client, right),
                ("wrong-address", other_source, 53, client, right),
                ("wrong-destination", server, 53, other_destination, right),
            ]
            for label, src, port, dst, payload in forgeries:
                raw.sendto(datagram(src, port, dst, sport, payload), (dst, 0))
                log.write("sent %s %d %d\n" % (label, sport, qid))
        """#

    /// The forged answers race dnsmasq's real one and arrive first: dnsmasq
    /// is stopped (SIGSTOP) while the forwarder's query reaches it and the
    /// spoofer, and continued once the forwarder has dropped every forgery.
    ///
    ///   client ──▶ 127.0.0.153 forwarder ──▶ 127.0.0.2:53 dnsmasq (stopped, then continued) → 10.2.2.2
    ///                         ▲
    ///   spoofer (sniffs lo, raw IP) ── forged answers → 10.66.6.6
    func testForgedAnswersRacingARealServerNeverReachTheClient() throws {
        inPrivateNetworkNamespace {
            try Self.run("/usr/sbin/ip", ["link", "set", "lo", "up"])
            let server = try Self.startDnsmasq(on: "127.0.0.2", answering: "10.2.2.2")
            var stopped = false
            defer {
                if stopped { try? ProcessControl.signal(server.pid, SIGCONT) }
                server.stop()
            }
            let root = try TemporaryRoot()
            try root.write("/spoofer.py", Self.spoofer)
            let log = root.path + "/spoofer.log"
            let spoofer = try Child("/usr/bin/python3", [root.path + "/spoofer.py", "127.0.0.2", "10.66.6.6",
                                                         "127.0.0.9", "127.0.0.5", log])
            defer { spoofer.stop() }
            func logLines() throws -> [String] {
                (try FileSystem.read(log)).map { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } ?? []
            }
            guard try eventually(10, { try logLines().contains("ready") || !spoofer.isRunning }), spoofer.isRunning else {
                throw Failure.setup("the spoofer did not start: \(try logLines())")
            }

            let forwarder = SplitDNSForwarder(configuration: .init(
                listenAddress: .ipv4([127, 0, 0, 153], port: 53), policy: SplitDNSPolicy(matchDomains: ["corp.example"]),
                tunnelServers: [.ipv4([127, 0, 0, 2], port: 53)], fallbackServers: [.ipv4([127, 0, 0, 3], port: 53)],
                attemptTimeout: 10))
            try forwarder.start()
            defer { try? forwarder.stop() }
            let client = try FileDescriptor.socket(family: AF_INET, type: .datagram, nonBlocking: true)
            defer { client.close() }

            let rounds = 3
            for round in 1...rounds {
                let id = UInt16(0x5500 + round)
                try ProcessControl.signal(server.pid, SIGSTOP)
                stopped = true
                _ = try query("host\(round).corp.example", id: id).withUnsafeBytes {
                    try client.send($0, to: .ipv4([127, 0, 0, 153], port: 53))
                }
                // All seven forgeries went out, and the forwarder saw and dropped the six that reach its socket
                // (the kernel drops the one to 127.0.0.5: the socket is bound to 127.0.0.1).
                let sentAll = try eventually(5) { try logLines().filter { $0.hasPrefix("sent ") }.count == 7 * round }
                XCTAssertTrue(sentAll, "round \(round): \((try? logLines()) ?? [])")
                XCTAssertTrue(eventually(5) {
                    let s = forwarder.statistics
                    return s.answersWithWrongQuestion == 3 * round && s.answersWithWrongID == round
                        && s.answersFromWrongSource == 2 * round
                }, "round \(round): \(forwarder.statistics)")
                XCTAssertFalse(try waitFor(client, .readable, seconds: 0), "round \(round): nothing reached the client yet")

                try ProcessControl.signal(server.pid, SIGCONT)
                stopped = false
                XCTAssertTrue(try waitFor(client, .readable, seconds: 5), "round \(round): the real answer arrives")
                var buffer = [UInt8](repeating: 0, count: 4096)
                let received = try XCTUnwrap(try buffer.withUnsafeMutableBytes { try client.receive(into: $0) })
                let reply = Array(buffer[0..<received.count])
                XCTAssertEqual(firstAddress(in: reply)?.address, "10.2.2.2", "round \(round): the first answer is dnsmasq's")
                XCTAssertEqual(firstAddress(in: reply)?.id, id)
            }
            waitForAnswers(forwarder, UInt64(rounds))
            let stats = forwarder.statistics
            XCTAssertEqual(stats.answered, rounds, "\(stats)")
            XCTAssertEqual(stats.malformedAnswers + stats.upstreamErrors + stats.timedOut, 0, "\(stats)")
        }
    }

    /// dnsmasq truncates (TC = 1) every UDP answer over 512 bytes, EDNS or
    /// not (--edns-packet-max=512), and answers fully over TCP: the forwarder
    /// fetches the whole answer over TCP and gives each client what it takes.
    ///
    ///   client (UDP, EDNS 4096 / plain; TCP) ──▶ forwarder ──UDP, then TCP──▶ 127.0.0.2:53 dnsmasq
    func testTruncatedAnswersFromDnsmasqAreFetchedOverTCP() throws {
        inPrivateNetworkNamespace {
            try Self.run("/usr/sbin/ip", ["link", "set", "lo", "up"])
            let text = String(repeating: "x", count: 200)
            let strings = Array(repeating: text, count: 5).joined(separator: ",") // five character-strings
            let server = try Self.startDnsmasq(on: "127.0.0.2", answering: "10.2.2.2",
                                               extra: ["--txt-record=big.corp.example,\(strings)", "--edns-packet-max=512"])
            defer { server.stop() }
            let direct = SocketAddress.ipv4([127, 0, 0, 2], port: 53)
            let txt: UInt16 = 16
            let name = DNSName("big.corp.example")!

            // Control: asked directly, dnsmasq truncates over UDP even for an EDNS client, and answers in full over TCP.
            let cutByServer = try DNSMessage(parsing: try XCTUnwrap(
                try udpExchange(ednsQuery("big.corp.example", type: txt, payload: 4096), with: direct)))
            XCTAssertTrue(cutByServer.isTruncated)
            XCTAssertEqual(cutByServer.answers, [])
            let whole = try tcpExchange([query("big.corp.example", type: txt)], with: direct)
            XCTAssertEqual(try whole.first.map { try DNSMessage(parsing: $0).answers.first?.data.count }, 5 * 201)

            let forwarder = SplitDNSForwarder(configuration: .init(
                listenAddress: .ipv4([127, 0, 0, 153], port: 53), policy: SplitDNSPolicy(matchDomains: ["corp.example"]),
                tunnelServers: [direct], fallbackServers: [direct]))
            try forwarder.start()
            defer { try? forwarder.stop() }
            let listen = SocketAddress.ipv4([127, 0, 0, 153], port: 53)

            // An EDNS client that takes 4096 bytes gets the whole TXT record over UDP.
            let edns = try XCTUnwrap(try udpExchange(ednsQuery("big.corp.example", id: 0x6601, type: txt, payload: 4096),
                                                     with: listen))
            XCTAssertGreaterThan(edns.count, 512)
            let full = try DNSMessage(parsing: edns)
            XCTAssertFalse(full.isTruncated)
            XCTAssertEqual(full.id, 0x6601)
            XCTAssertEqual(full.questions, [DNSQuestion(name: name, type: txt)])
            XCTAssertEqual(full.answers.map(\.type), [txt])
            let expected = Array(repeating: [200] + Array(text.utf8), count: 5).flatMap { $0 }
            XCTAssertEqual(full.answers.first?.data.count, expected.count)
            XCTAssertTrue(full.answers.first?.data == expected, "the TXT record's five strings, byte for byte")

            // A client without EDNS takes 512: TC, the question, nothing else; it asks again over TCP.
            let plain = try XCTUnwrap(try udpExchange(query("big.corp.example", id: 0x6602, type: txt), with: listen))
            XCTAssertLessThanOrEqual(plain.count, 512)
            let cut = try DNSMessage(parsing: plain)
            XCTAssertTrue(cut.isTruncated)
            XCTAssertEqual(cut.id, 0x6602)
            XCTAssertEqual(cut.questions, [DNSQuestion(name: name, type: txt)])
            XCTAssertEqual(cut.answers + cut.authorities + cut.additionals, [])
            let again = try tcpExchange([query("big.corp.example", id: 0x6603, type: txt)], with: listen)
            XCTAssertEqual(try again.first.map { try DNSMessage(parsing: $0).answers.first?.data.count }, 5 * 201)

            waitForAnswers(forwarder, 3)
            let stats = forwarder.statistics
            XCTAssertEqual(stats.retriedOverTCP, 2, "\(stats)")
            XCTAssertEqual(stats.truncatedForClient, 1, "\(stats)")
            XCTAssertEqual(stats.answered, 3, "\(stats)")
            XCTAssertEqual(stats.malformedAnswers + stats.upstreamErrors + stats.timedOut, 0, "\(stats)")
        }
    }
}
