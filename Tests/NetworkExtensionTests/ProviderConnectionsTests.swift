import Foundation
import Glibc
import LinuxSystem
@testable import NetworkExtension
import Synchronization
import XCTest

/// A provider's own connections: endpoint parsing, key-value observing's delivery, the carrier
/// resolver's pure parts (DNS messages, resolv.conf, /etc/hosts, /etc/services), and NWTCPConnection and
/// NWUDPSession over real loopback sockets.
final class ProviderConnectionsTests: XCTestCase {
    // MARK: Endpoints

    func testHostEndpointsParse() throws {
        XCTAssertEqual(try ParsedEndpoint.parse(NWHostEndpoint(hostname: "VPN.Example.com.", port: "443")),
                       ParsedEndpoint(host: .name("vpn.example.com"), port: 443))
        XCTAssertEqual(try ParsedEndpoint.parse(NWHostEndpoint(hostname: "198.18.0.10", port: "51820")),
                       ParsedEndpoint(host: .address("198.18.0.10"), port: 51820))
        XCTAssertEqual(try ParsedEndpoint.parse(NWHostEndpoint(hostname: "[2001:db8::1]", port: "1")),
                       ParsedEndpoint(host: .address("2001:db8::1"), port: 1))
        XCTAssertEqual(try ParsedEndpoint.parse(NWHostEndpoint(hostname: "::ffff:198.18.0.1", port: "65535")).host,
                       .address("::ffff:198.18.0.1"))
        XCTAssertEqual(try ParsedEndpoint.parse(NWHostEndpoint(hostname: "_srv.example", port: "https"), services: { $0 == "https" ? 443 : nil }),
                       ParsedEndpoint(host: .name("_srv.example"), port: 443))
        XCTAssertEqual(try ParsedEndpoint.parse(NWHostEndpoint(hostname: "0.0.0.0", port: "0"), allowZeroPort: true).port, 0)
        XCTAssertEqual(NWHostEndpoint(hostname: "2001:db8::1", port: "443").description, "[2001:db8::1]:443")
        XCTAssertEqual(NWHostEndpoint(hostname: "vpn.test", port: "443").description, "vpn.test:443")
        XCTAssertEqual(NWHostEndpoint(hostname: "a", port: "1"), NWHostEndpoint(hostname: "a", port: "1"))
        XCTAssertNotEqual(NWHostEndpoint(hostname: "a", port: "1"), NWHostEndpoint(hostname: "a", port: "2"))
    }

    func testBadEndpointsAreRefusedByName() {
        func problem(_ host: String, _ port: String, zero: Bool = false) -> TunnelgateEndpointProblem? {
            do { _ = try ParsedEndpoint.parse(NWHostEndpoint(hostname: host, port: port), allowZeroPort: zero); return nil } catch { return error }
        }
        XCTAssertEqual(problem("", "443"), .invalidHostname(""))
        XCTAssertEqual(problem("a..b", "443"), .invalidHostname("a..b"))
        XCTAssertEqual(problem("-a.example", "443"), .invalidHostname("-a.example"))
        XCTAssertEqual(problem(String(repeating: "a", count: 64) + ".example", "443"), .invalidHostname(String(repeating: "a", count: 64) + ".example"))
        XCTAssertEqual(problem("vpn example", "443"), .invalidHostname("vpn example"))
        XCTAssertEqual(problem("1.2.3", "443"), .invalidHostname("1.2.3"))
        XCTAssertEqual(problem("300.1.1.1", "443"), .invalidHostname("300.1.1.1"))
        XCTAssertEqual(problem("2001:db8::1::2", "443"), .invalidHostname("2001:db8::1::2"))
        XCTAssertEqual(problem("vpn.test", ""), .invalidPort(""))
        XCTAssertEqual(problem("vpn.test", "65536"), .invalidPort("65536"))
        XCTAssertEqual(problem("vpn.test", "-1"), .invalidPort("-1"))
        XCTAssertEqual(problem("vpn.test", "nosuchservice"), .invalidPort("nosuchservice"))
        XCTAssertEqual(problem("vpn.test", "0"), .zeroPort("vpn.test:0"))
        XCTAssertNil(problem("vpn.test", "0", zero: true))
        XCTAssertTrue(problem("vpn.test", "65536")!.description.contains("'65536'"))

        let bonjour = NWBonjourServiceEndpoint(name: "office", type: "_vpn._udp", domain: "local.")
        XCTAssertThrowsError(try ParsedEndpoint.parse(bonjour)) { error in
            XCTAssertEqual(error as? TunnelgateEndpointProblem, .bonjourUnavailable("office._vpn._udp.local."))
            XCTAssertTrue("\(error)".contains("Bonjour service endpoints cannot be resolved on Linux"))
        }
    }

    func testIPv6Text() {
        XCTAssertEqual(IPv6Text.bytes("::1"), [UInt8](repeating: 0, count: 15) + [1])
        XCTAssertEqual(IPv6Text.bytes("2001:db8::"), [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 12))
        XCTAssertEqual(IPv6Text.bytes("::ffff:1.2.3.4")?.suffix(6), [0xff, 0xff, 1, 2, 3, 4])
        XCTAssertNil(IPv6Text.bytes("1:2:3:4:5:6:7"))
        XCTAssertNil(IPv6Text.bytes("1:2:3:4:5:6:7:8:9"))
        XCTAssertNil(IPv6Text.bytes("12345::"))
    }

    // MARK: Key-value observing

    /// An observer as a provider is one: it overrides NEProvider's observeValue.
    final class Heard: Sendable {
        let lines = Mutex<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line) } }
        func take() -> [String] { lines.withLock { l in defer { l = [] }; return l } }
    }

    final class Recorder: NEPacketTunnelProvider, @unchecked Sendable {
        let name: String
        let heard: Heard
        init(_ name: String, into heard: Heard) { self.name = name; self.heard = heard; super.init() }
        override func observeValue(forKeyPath keyPath: String?, of object: Any?, change: [NSKeyValueChangeKey: Any]?,
                                   context: UnsafeMutableRawPointer?) {
            func text(_ key: NSKeyValueChangeKey) -> String { (change?[key] as? NSNumber).map { "\($0.intValue)" } ?? "-" }
            let prior = (change?[.notificationIsPriorKey] as? NSNumber)?.boolValue == true ? " prior" : ""
            let ctx = context.map { "\($0.load(as: Int.self))" } ?? "nil"
            heard.append("\(name) \(keyPath ?? "?") kind \(text(.kindKey)) old \(text(.oldKey)) new \(text(.newKey))\(prior) ctx \(ctx)")
        }
    }

    func testKeyValueDeliveryOrder() {
        let heard = Heard()
        let registry = KeyValueObservers(keyPaths: ["state", "isViable"])
        let subject = NSObject()
        let a = Recorder("a", into: heard), b = Recorder("b", into: heard)
        let contextA = UnsafeMutableRawPointer.allocate(byteCount: 8, alignment: 8)
        contextA.storeBytes(of: 7, as: Int.self)
        defer { contextA.deallocate() }
        registry.add(a, keyPath: "state", options: [.initial, .new, .old], context: contextA, of: subject) { NSNumber(value: 1) }
        XCTAssertEqual(heard.take(), ["a state kind 1 old - new 1 ctx 7"], ".initial: at once, from addObserver, the current value as new, no old")
        registry.add(b, keyPath: "state", options: [.prior, .old, .new], context: nil, of: subject) { NSNumber(value: 1) }
        registry.add(b, keyPath: "isViable", options: [], context: nil, of: subject) { NSNumber(value: false) }
        _ = heard.take()
        registry.change("state", of: subject, old: NSNumber(value: 1), new: NSNumber(value: 3))
        XCTAssertEqual(heard.take(), [
            "b state kind 1 old 1 new - prior ctx nil",
            "a state kind 1 old 1 new 3 ctx 7",
            "b state kind 1 old 1 new 3 ctx nil",
        ], "prior notifications first, then the change to each observer in the order they registered")
        _ = heard.take()
        registry.change("isViable", of: subject, old: NSNumber(value: false), new: NSNumber(value: true))
        XCTAssertEqual(heard.take(), ["b isViable kind 1 old - new - ctx nil"], "no options: the kind only; other keys' observers hear nothing")

        _ = heard.take()
        registry.remove(a, keyPath: "state", context: nil, matchingContext: false)
        registry.remove(b, keyPath: "state", context: contextA, matchingContext: true)  // another context: stays
        registry.change("state", of: subject, old: NSNumber(value: 3), new: NSNumber(value: 4))
        XCTAssertEqual(heard.take(), ["b state kind 1 old 3 new - prior ctx nil", "b state kind 1 old 3 new 4 ctx nil"])
        XCTAssertTrue(registry.isObserved("state"))

        // A key these objects do not notify: accepted, and silent (no .initial either).
        _ = heard.take()
        registry.add(a, keyPath: "endpoint", options: [.initial, .new], context: nil, of: subject) { NSNumber(value: 0) }
        registry.change("state", of: subject, old: NSNumber(value: 4), new: NSNumber(value: 5))
        XCTAssertEqual(heard.take(), ["b state kind 1 old 4 new - prior ctx nil", "b state kind 1 old 4 new 5 ctx nil"])

        // An observer that went away is not called (iOS does not retain observers).
        var gone: Recorder? = Recorder("gone", into: heard)
        registry.add(gone!, keyPath: "isViable", options: [.new], context: nil, of: subject) { NSNumber(value: true) }
        gone = nil
        _ = heard.take()
        registry.change("isViable", of: subject, old: NSNumber(value: true), new: NSNumber(value: false))
        XCTAssertEqual(heard.take(), ["b isViable kind 1 old - new - ctx nil"])
    }

    func testObservingOptionsAndKeysAreApples() {
        XCTAssertEqual(NSKeyValueObservingOptions.new.rawValue, 1)
        XCTAssertEqual(NSKeyValueObservingOptions.old.rawValue, 2)
        XCTAssertEqual(NSKeyValueObservingOptions.initial.rawValue, 4)
        XCTAssertEqual(NSKeyValueObservingOptions.prior.rawValue, 8)
        XCTAssertEqual(NSKeyValueChangeKey.newKey.rawValue, "new")
        XCTAssertEqual(NSKeyValueChangeKey.oldKey.rawValue, "old")
        XCTAssertEqual(NSKeyValueChangeKey.kindKey.rawValue, "kind")
        XCTAssertEqual(NSKeyValueChangeKey.notificationIsPriorKey.rawValue, "notificationIsPrior")
        XCTAssertEqual(NWTCPConnectionState.connected.rawValue, 3)
        XCTAssertEqual(NWTCPConnectionState.cancelled.rawValue, 5)
        XCTAssertEqual(NWUDPSessionState.ready.rawValue, 3)
        XCTAssertEqual(NWUDPSessionState.failed.rawValue, 4)
        XCTAssertEqual(NWTLSParameters().minimumSSLProtocolVersion, 8, "TLS 1.2 at least by default, as on iOS")
        XCTAssertEqual(NWTLSParameters.openSSLVersion(8), 0x0303)
        XCTAssertEqual(NWTLSParameters.openSSLVersion(10), 0x0304)
        XCTAssertNil(NWTLSParameters.openSSLVersion(2), "SSL 3 has no TLS version")
    }

    // MARK: The carrier resolver's pure parts

    func testDNSQueryBytes() {
        XCTAssertEqual(DNSMessage.query(id: 0xbeef, name: "vpn.test", type: DNSMessage.a),
                       [0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
                        3, 0x76, 0x70, 0x6e, 4, 0x74, 0x65, 0x73, 0x74, 0, 0, 1, 0, 1])
    }

    func testDNSRepliesAreRead() {
        // vpn.test: a CNAME to edge.test (compressed), then edge.test's A record, as a server answers.
        let question: [UInt8] = [3, 0x76, 0x70, 0x6e, 4, 0x74, 0x65, 0x73, 0x74, 0, 0, 1, 0, 1]
        let cname: [UInt8] = [0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 7, 4, 0x65, 0x64, 0x67, 0x65, 0xc0, 16]
        let a: [UInt8] = [0xc0, 38, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 198, 18, 0, 10]
        let reply: [UInt8] = [0x12, 0x34, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0] + question + cname + a
        XCTAssertEqual(try DNSMessage.addresses(in: reply, id: 0x1234, type: DNSMessage.a).get(), [[198, 18, 0, 10]])
        XCTAssertEqual(try DNSMessage.addresses(in: reply, id: 0x1234, type: DNSMessage.aaaa).get(), [], "no AAAA record: none")
        XCTAssertEqual(DNSMessage.addresses(in: reply, id: 0x4321, type: DNSMessage.a), .failure(.init(description: "a reply to another query")))
        var nx = reply
        nx[3] = 0x83
        XCTAssertEqual(try DNSMessage.addresses(in: nx, id: 0x1234, type: DNSMessage.a).get(), [], "NXDOMAIN: no address")
        var refused = reply
        refused[3] = 0x85
        XCTAssertEqual(DNSMessage.addresses(in: refused, id: 0x1234, type: DNSMessage.a), .failure(.init(description: "the server refused the query (REFUSED)")))
        var truncated = reply
        truncated[2] |= 0x02
        XCTAssertEqual(DNSMessage.addresses(in: truncated, id: 0x1234, type: DNSMessage.a), .failure(.init(description: "a truncated reply (TCP is not tried)")))
        XCTAssertEqual(DNSMessage.addresses(in: Array(reply.dropLast(3)), id: 0x1234, type: DNSMessage.a), .failure(.init(description: "an answer longer than the reply")))
        XCTAssertNil(DNSMessage.skipName([3, 0x61, 0x62], from: 0), "a name that runs off the message")
    }

    func testResolvConfHostsAndServices() {
        let conf = "# the LAN's\nsearch example.com\nnameserver 198.18.0.20\nnameserver  2001:db8::53\nnameserver not-an-address\nnameserver 10.0.0.1\nnameserver 10.0.0.2\n"
        XCTAssertEqual(CarrierResolver.nameservers(inResolvConf: conf),
                       [.ipv4([198, 18, 0, 20], port: 53), .ipv6(IPv6Text.bytes("2001:db8::53")!, port: 53), .ipv4([10, 0, 0, 1], port: 53)],
                       "nameserver lines only, addresses only, at most three")
        let hosts = "127.0.0.1 localhost\n198.18.0.10 vpn.test vpn # the server\n2001:db8::10 VPN.test\n#198.18.0.99 vpn.test\n"
        XCTAssertEqual(CarrierResolver.hostsAddresses(of: "vpn.test", inHosts: hosts), ["198.18.0.10", "2001:db8::10"])
        XCTAssertEqual(CarrierResolver.hostsAddresses(of: "server", inHosts: hosts), [], "a comment is no name")
        let services = "https\t\t443/tcp\t\t\t\t# http protocol over TLS/SSL\nhttps\t\t443/udp\nopenvpn 1194/tcp\nopenvpn 1194/udp\ndomain 53/udp nameserver\n"
        XCTAssertEqual(ServiceNames.port(of: "https", protocol: "tcp", inServices: services), 443)
        XCTAssertEqual(ServiceNames.port(of: "nameserver", protocol: "udp", inServices: services), 53, "an alias")
        XCTAssertNil(ServiceNames.port(of: "nameserver", protocol: "tcp", inServices: services))
        XCTAssertNil(ServiceNames.port(of: "http", protocol: "tcp", inServices: services))
    }

    // MARK: Real sockets on loopback

    /// A provider-style observer of a connection's state, keeping what it heard in order.
    final class StateLog: NEPacketTunnelProvider, @unchecked Sendable {
        let states = Mutex<[Int]>([])
        override func observeValue(forKeyPath keyPath: String?, of object: Any?, change: [NSKeyValueChangeKey: Any]?,
                                   context: UnsafeMutableRawPointer?) {
            if keyPath == "state", let n = change?[.newKey] as? NSNumber { states.withLock { $0.append(n.intValue) } }
        }
    }

    private func waitUntil(_ what: String, _ seconds: Double = 10, _ condition: () -> Bool) {
        let deadline = ProcessControl.monotonicSeconds() + seconds
        while !condition() {
            if ProcessControl.monotonicSeconds() > deadline { XCTFail("timed out waiting for \(what)"); return }
            ProcessControl.sleep(seconds: 0.01)
        }
    }

    func testTCPConnectionOverLoopback() throws {
        let listener = try FileDescriptor.listenTCP(at: .ipv4([127, 0, 0, 1], port: 0))
        defer { listener.close() }
        let port = try XCTUnwrap(listener.localAddress()?.port)
        let connection = NEPacketTunnelProvider().createTCPConnection(to: NWHostEndpoint(hostname: "127.0.0.1", port: "\(port)"),
                                                                       enableTLS: false, tlsParameters: nil, delegate: nil)
        let log = StateLog()
        connection.addObserver(log, forKeyPath: "state", options: [.initial, .new], context: nil)
        var server: FileDescriptor?
        waitUntil("the connection to be accepted") { server = try? listener.accept(); return server != nil }
        let peer = try XCTUnwrap(server)
        defer { peer.close() }
        waitUntil("connected") { connection.state == .connected }
        XCTAssertTrue(connection.isViable)
        XCTAssertFalse(connection.hasBetterPath)
        XCTAssertEqual((connection.remoteAddress as? NWHostEndpoint)?.port, "\(port)")
        XCTAssertEqual((connection.remoteAddress as? NWHostEndpoint)?.hostname, "127.0.0.1")
        XCTAssertNotNil(connection.localAddress)

        let written = Mutex<[String]>([])
        connection.write(Data("ping".utf8)) { error in written.withLock { $0.append(error.map { "\($0)" } ?? "ok") } }
        var buffer = [UInt8](repeating: 0, count: 16)
        var got = 0
        waitUntil("the server reads ping") { got += ((try? peer.read(into: &buffer)) ?? nil) ?? 0; return got >= 4 }
        XCTAssertEqual(Array(buffer[0..<4]), Array("ping".utf8))
        waitUntil("the write's completion") { written.withLock { $0 } == ["ok"] }

        // readLength(4) waits for all four bytes, sent in two parts; the next read gets the rest.
        let reads = Mutex<[String]>([])
        connection.readLength(4) { data, error in reads.withLock { $0.append(data.map { String(decoding: $0, as: UTF8.self) } ?? "nil \(String(describing: error))") } }
        connection.readMinimumLength(1, maximumLength: 100) { data, _ in reads.withLock { $0.append(data.map { String(decoding: $0, as: UTF8.self) } ?? "nil") } }
        try peer.writeAll(Array("po".utf8))
        ProcessControl.sleep(seconds: 0.05)
        XCTAssertEqual(reads.withLock { $0 }, [], "two bytes of four: readLength(4) still waits")
        try peer.writeAll(Array("ngXYZ".utf8))
        waitUntil("both reads") { reads.withLock { $0.count } == 2 }
        XCTAssertEqual(reads.withLock { $0 }, ["pong", "XYZ"])

        // A read that waits when cancel comes fails with ECANCELED; the state is cancelled.
        let last = Mutex<NSError?>(nil)
        connection.readLength(10) { _, error in last.withLock { $0 = error as NSError? } }
        connection.cancel()
        waitUntil("cancelled") { connection.state == .cancelled && last.withLock { $0 } != nil }
        XCTAssertEqual(last.withLock { $0 }?.domain, NSPOSIXErrorDomain)
        XCTAssertEqual(last.withLock { $0 }?.code, Int(Errno.canceled.rawValue))
        XCTAssertFalse(connection.isViable)
        waitUntil("the observer heard cancelled") { log.states.withLock { $0.last } == 5 }
        // A loopback connection may be connected before addObserver returns; then .initial says so.
        XCTAssertTrue([[1, 3, 5], [3, 5]].contains(log.states.withLock { $0 }),
                      "initial connecting, connected, cancelled, in order, each once: \(log.states.withLock { $0 })")
    }

    func testTCPConnectionRefusedAndBadEndpoint() throws {
        // A port nobody listens on: bound, never listening.
        let closed = try FileDescriptor.socket(family: SocketAddress.ipv4([127, 0, 0, 1], port: 0).family, type: .stream, nonBlocking: true)
        defer { closed.close() }
        try closed.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        let port = try XCTUnwrap(closed.localAddress()?.port)
        let provider = NEPacketTunnelProvider()
        let refused = provider.createTCPConnection(to: NWHostEndpoint(hostname: "127.0.0.1", port: "\(port)"), enableTLS: true,
                                                   tlsParameters: nil, delegate: nil)
        waitUntil("disconnected") { refused.state == .disconnected }
        let e = try XCTUnwrap(refused.error as NSError?)
        XCTAssertTrue(e.localizedDescription.contains("Connection refused"), e.localizedDescription)
        XCTAssertNil(refused.remoteAddress)

        let bad = provider.createTCPConnection(to: NWHostEndpoint(hostname: "vpn..test", port: "443"), enableTLS: false,
                                               tlsParameters: nil, delegate: nil)
        waitUntil("disconnected") { bad.state == .disconnected }
        XCTAssertTrue((bad.error as NSError?)?.localizedDescription.contains("invalid host name 'vpn..test'") == true)
        let bonjour = provider.createUDPSession(to: NWBonjourServiceEndpoint(name: "o", type: "_vpn._udp", domain: "local."), from: nil)
        waitUntil("failed") { bonjour.state == .failed }
        let writes = Mutex<String?>(nil)
        bonjour.writeDatagram(Data([1])) { error in writes.withLock { $0 = error?.localizedDescription ?? "ok" } }
        waitUntil("the refused write") { writes.withLock { $0 } != nil }
        XCTAssertTrue(writes.withLock { $0 }!.contains("Bonjour"), writes.withLock { $0 }!)
    }

    func testUDPSessionOverLoopback() throws {
        let server = try FileDescriptor.socket(family: SocketAddress.ipv4([127, 0, 0, 1], port: 0).family, type: .datagram, nonBlocking: true)
        defer { server.close() }
        try server.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        let port = try XCTUnwrap(server.localAddress()?.port)
        let session = NEPacketTunnelProvider().createUDPSession(to: NWHostEndpoint(hostname: "127.0.0.1", port: "\(port)"), from: nil)
        let states = Mutex<[NWUDPSessionState]>([])
        let observation = session.observe(\.state, options: [.initial, .new]) { _, change in
            if let s = change.newValue { states.withLock { $0.append(s) } }
        }
        let received = Mutex<[[String]]>([])
        session.setReadHandler({ datagrams, _ in
            received.withLock { $0.append((datagrams ?? []).map { String(decoding: $0, as: UTF8.self) }) }
        }, maxDatagrams: 2)
        let done = Mutex<String?>(nil)
        // Written before ready: they wait for it.
        session.writeMultipleDatagrams([Data("a".utf8), Data("b".utf8), Data("c".utf8)]) { error in done.withLock { $0 = error.map { "\($0)" } ?? "ok" } }
        waitUntil("the writes' completion") { done.withLock { $0 } != nil }
        XCTAssertEqual(done.withLock { $0 }, "ok")
        var got: [String] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        var from: SocketAddress?
        waitUntil("three datagrams at the server") {
            while let r = try? buffer.withUnsafeMutableBytes({ b in try server.receive(into: b) }) {
                got.append(String(decoding: buffer[0..<r.count], as: UTF8.self))
                from = r.from
            }
            return got.count == 3
        }
        XCTAssertEqual(got, ["a", "b", "c"], "in order")
        XCTAssertEqual(session.state, .ready)
        XCTAssertEqual((session.resolvedEndpoint as? NWHostEndpoint)?.port, "\(port)")
        for reply in ["1", "2", "3"] {
            _ = try reply.utf8.withContiguousStorageIfAvailable { b in try server.send(UnsafeRawBufferPointer(b), to: from!) }
        }
        waitUntil("three replies") { received.withLock { $0.joined().count } == 3 }
        XCTAssertEqual(Array(received.withLock { $0 }.joined()), ["1", "2", "3"])
        XCTAssertTrue(received.withLock { $0 }.allSatisfy { $0.count <= 2 }, "at most maxDatagrams a call")
        // init(upgradeFor:): a fresh session to the same endpoint (Linux has no better path).
        let upgraded = NWUDPSession(upgradeFor: session)
        XCTAssertEqual(upgraded.endpoint, session.endpoint)
        waitUntil("the upgraded session ready") { upgraded.state == .ready }
        upgraded.cancel()
        session.cancel()
        waitUntil("cancelled") { session.state == .cancelled }
        XCTAssertEqual(states.withLock { $0 }, [.preparing, .ready, .cancelled])
        observation.invalidate()
    }

    /// CPU seconds this process used so far (CLOCK_PROCESS_CPUTIME_ID).
    private func cpuSeconds() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    func testUDPSessionToAClosedPortDoesNotSpin() throws {
        // A port nobody is bound to: each datagram earns an ICMP port unreachable, which the socket
        // holds as a pending error (POLLERR) while no read handler is set.
        let probe = try FileDescriptor.socket(family: SocketAddress.ipv4([127, 0, 0, 1], port: 0).family, type: .datagram, nonBlocking: true)
        try probe.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        let port = try XCTUnwrap(probe.localAddress()?.port)
        probe.close()
        let session = NEPacketTunnelProvider().createUDPSession(to: NWHostEndpoint(hostname: "127.0.0.1", port: "\(port)"), from: nil)
        let written = Mutex<Int>(0)
        for _ in 0..<3 { session.writeDatagram(Data([1])) { _ in written.withLock { $0 += 1 } } }
        waitUntil("three writes") { written.withLock { $0 } == 3 }
        let before = cpuSeconds()
        ProcessControl.sleep(seconds: 0.3)
        let used = cpuSeconds() - before
        XCTAssertLessThan(used, 0.1, "the session's thread sleeps while the pending error is there (used \(used) s of CPU in 0.3 s)")
        XCTAssertEqual(session.state, .ready, "an ICMP error is no failure")
        session.cancel()
        waitUntil("cancelled") { session.state == .cancelled }
    }

    func testPeerCloseWhileNobodyReads() throws {
        let listener = try FileDescriptor.listenTCP(at: .ipv4([127, 0, 0, 1], port: 0))
        defer { listener.close() }
        let port = try XCTUnwrap(listener.localAddress()?.port)
        let connection = NEPacketTunnelProvider().createTCPConnection(to: NWHostEndpoint(hostname: "127.0.0.1", port: "\(port)"),
                                                                       enableTLS: false, tlsParameters: nil, delegate: nil)
        var server: FileDescriptor?
        waitUntil("accepted") { server = try? listener.accept(); return server != nil }
        waitUntil("connected") { connection.state == .connected }
        // The server says goodbye and closes, fully (the client closes its end too: then the socket hangs up).
        try XCTUnwrap(server).writeAll(Array("bye".utf8))
        server?.close()
        connection.writeClose()
        let before = cpuSeconds()
        ProcessControl.sleep(seconds: 0.3)
        XCTAssertLessThan(cpuSeconds() - before, 0.1, "no spinning on the hung-up socket")
        let reads = Mutex<[String]>([])
        connection.readMinimumLength(1, maximumLength: 10) { d, e in reads.withLock { $0.append(d.map { String(decoding: $0, as: UTF8.self) } ?? "nil \(e == nil ? "no error" : "error")") } }
        connection.readLength(1) { d, e in reads.withLock { $0.append(d.map { String(decoding: $0, as: UTF8.self) } ?? "nil \(e == nil ? "no error" : "error")") } }
        waitUntil("both reads") { reads.withLock { $0.count } == 2 }
        XCTAssertEqual(reads.withLock { $0 }, ["bye", "nil no error"], "what the peer sent before closing, then the end")
        waitUntil("disconnected") { connection.state == .disconnected }
        XCTAssertNil(connection.error, "a clean close is no error")
    }

    func testCarrierResolverQueriesARealServer() throws {
        // A DNS server on loopback: vpn.test has an A record; AAAA and other names are NXDOMAIN.
        let server = try FileDescriptor.socket(family: SocketAddress.ipv4([127, 0, 0, 1], port: 0).family, type: .datagram, nonBlocking: true)
        defer { server.close() }
        try server.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        let address = try XCTUnwrap(server.localAddress())
        let stop = Atomic<Bool>(false)
        let asked = Mutex<[String]>([])
        let thread = try SystemThread.spawn {
            var buffer = [UInt8](repeating: 0, count: 512)
            while !stop.load(ordering: .relaxed) {
                guard let (n, from) = try? buffer.withUnsafeMutableBytes({ b in try server.receive(into: b) }), let from else {
                    ProcessControl.sleep(seconds: 0.005)
                    continue
                }
                var q = Array(buffer[0..<n])
                let end = DNSMessage.skipName(q, from: 12)! + 4
                q = Array(q[0..<end])
                let type = UInt16(q[end - 4]) << 8 | UInt16(q[end - 3])
                let name = String(decoding: q[13..<(end - 5)].map { $0 < 32 ? UInt8(ascii: ".") : $0 }, as: UTF8.self)
                asked.withLock { $0.append("\(name) \(type)") }
                q[2] = 0x81
                if name == "vpn.test" && type == DNSMessage.a {
                    q[3] = 0x80
                    q[7] = 1
                    q += [0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 198, 18, 0, 10]
                } else {
                    q[3] = 0x83
                }
                _ = try? q.withUnsafeBytes { b in try server.send(b, to: from) }
            }
        }
        defer { stop.store(true, ordering: .relaxed); thread.join() }
        XCTAssertEqual(try CarrierResolver.query("vpn.test", server: address, timeoutMilliseconds: 2000), [.ipv4([198, 18, 0, 10], port: 0)])
        XCTAssertEqual(try CarrierResolver.query("nothing.test", server: address, timeoutMilliseconds: 2000), [], "NXDOMAIN for both: no address")
        XCTAssertEqual(Set(asked.withLock { $0 }), ["vpn.test 1", "vpn.test 28", "nothing.test 1", "nothing.test 28"])
        // A server that does not answer: the timeout, named.
        let silent = try FileDescriptor.socket(family: address.family, type: .datagram, nonBlocking: true)
        defer { silent.close() }
        try silent.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        XCTAssertThrowsError(try CarrierResolver.query("vpn.test", server: try XCTUnwrap(silent.localAddress()), timeoutMilliseconds: 200)) {
            XCTAssertEqual(($0 as? CarrierResolver.Failure)?.description, "no answer within 200 ms")
        }
    }
}
