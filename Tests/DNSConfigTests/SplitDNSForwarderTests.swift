import Glibc
import LinuxSystem
import XCTest
@testable import DNSConfig

/// The forwarder against test responders on 127.0.0.1, on ports the kernel
/// picks: no root, no port 53, nothing outside loopback.
final class SplitDNSForwarderTests: XCTestCase {
    let tunnelAnswer: [UInt8] = [10, 2, 2, 2]
    let fallbackAnswer: [UInt8] = [10, 3, 3, 3]

    func makeForwarder(tunnel: [SocketAddress], fallback: [SocketAddress], attemptTimeout: Double = 2,
                       maximumInFlight: Int = 256) -> SplitDNSForwarder {
        SplitDNSForwarder(configuration: .init(
            listenAddress: .ipv4([127, 0, 0, 1], port: 0),
            policy: SplitDNSPolicy(matchDomains: ["corp.example"]),
            tunnelServers: tunnel, fallbackServers: fallback,
            attemptTimeout: attemptTimeout, maximumInFlight: maximumInFlight))
    }

    func testUDPQueriesGoWhereTheirNameBelongs() throws {
        let tunnel = try TestResponder(answering: tunnelAnswer)
        let fallback = try TestResponder(answering: fallbackAnswer)
        defer { tunnel.stop(); fallback.stop() }
        let forwarder = makeForwarder(tunnel: [tunnel.address], fallback: [fallback.address])
        try forwarder.start()
        defer { try? forwarder.stop() }

        let cases: [(String, String)] = [
            ("host.corp.example", "10.2.2.2"), ("CORP.Example", "10.2.2.2"), ("a.b.corp.example.", "10.2.2.2"),
            ("www.example.org", "10.3.3.3"), ("notcorp.example", "10.3.3.3"), ("corp.example.org", "10.3.3.3"),
        ]
        for (index, (name, expected)) in cases.enumerated() {
            let id = UInt16(0x4000 + index)
            let reply = try XCTUnwrap(try udpExchange(query(name, id: id), with: forwarder.listenAddress), name)
            let parsed = try XCTUnwrap(firstAddress(in: reply), name)
            XCTAssertEqual(parsed.address, expected, name)
            XCTAssertEqual(parsed.id, id, "the client's id comes back")
        }
        waitForAnswers(forwarder, 6)
        let stats = forwarder.statistics
        XCTAssertEqual(stats.received, 6)
        XCTAssertEqual(stats.forwardedToTunnel, 3)
        XCTAssertEqual(stats.forwardedToFallback, 3)
        XCTAssertEqual(stats.answered, 6)
        XCTAssertEqual(tunnel.served, 3)
        XCTAssertEqual(fallback.served, 3)
    }

    func testTCPQueriesAreRelayedOverTCPWithLengthPrefixes() throws {
        let tunnel = try TestResponder(answering: tunnelAnswer)
        let fallback = try TestResponder(answering: fallbackAnswer)
        defer { tunnel.stop(); fallback.stop() }
        let forwarder = makeForwarder(tunnel: [tunnel.address], fallback: [fallback.address])
        try forwarder.start()
        defer { try? forwarder.stop() }

        let answers = try tcpExchange([query("db.corp.example", id: 1), query("example.net", id: 2),
                                       query("x.corp.example", id: 3)], with: forwarder.listenAddress)
        let byID = Dictionary(uniqueKeysWithValues: answers.compactMap(firstAddress).map { ($0.id, $0.address) })
        XCTAssertEqual(byID, [1: "10.2.2.2", 2: "10.3.3.3", 3: "10.2.2.2"])
        waitForAnswers(forwarder, 3)
        XCTAssertEqual(forwarder.statistics.answered, 3)
    }

    func testMalformedQueriesAreDroppedAndCounted() throws {
        let tunnel = try TestResponder(answering: tunnelAnswer)
        let fallback = try TestResponder(answering: fallbackAnswer)
        defer { tunnel.stop(); fallback.stop() }
        let forwarder = makeForwarder(tunnel: [tunnel.address], fallback: [fallback.address])
        try forwarder.start()
        defer { try? forwarder.stop() }

        var response = query("a.corp.example")
        response[2] |= 0x80
        let bad: [[UInt8]] = [
            [1, 2, 3],                                                           // shorter than a header
            response,                                                            // QR = 1
            [0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1],        // pointer loop in the question
            [0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 63, 0x61],                      // label past the end
        ]
        for message in bad {
            XCTAssertNil(try udpExchange(message, with: forwarder.listenAddress, timeout: 0.3))
        }
        // A TCP frame of length zero is no message: counted, and the connection closed.
        XCTAssertEqual(try tcpExchange([[]], with: forwarder.listenAddress, timeout: 1), [])
        XCTAssertTrue(eventually(2) { forwarder.statistics.malformed == 5 }, "\(forwarder.statistics)")
        XCTAssertEqual(tunnel.served + fallback.served, 0, "nothing malformed is relayed")
        // Still serving.
        let reply = try XCTUnwrap(try udpExchange(query("ok.corp.example"), with: forwarder.listenAddress))
        XCTAssertEqual(firstAddress(in: reply)?.address, "10.2.2.2")
        XCTAssertNil(forwarder.failureReason)
    }

    func testASilentServerIsSkippedAfterItsTimeout() throws {
        let silent = try TestResponder(answering: tunnelAnswer, silent: true)
        let tunnel = try TestResponder(answering: tunnelAnswer)
        defer { silent.stop(); tunnel.stop() }
        let forwarder = makeForwarder(tunnel: [silent.address, tunnel.address], fallback: [silent.address],
                                      attemptTimeout: 0.2)
        try forwarder.start()
        defer { try? forwarder.stop() }

        let started = ProcessControl.monotonicSeconds()
        let reply = try XCTUnwrap(try udpExchange(query("a.corp.example"), with: forwarder.listenAddress))
        XCTAssertEqual(firstAddress(in: reply)?.address, "10.2.2.2")
        XCTAssertGreaterThanOrEqual(ProcessControl.monotonicSeconds() - started, 0.2)
        XCTAssertEqual(silent.served, 1)

        // Only silent servers: dropped after the last try, and counted.
        XCTAssertNil(try udpExchange(query("www.example.org"), with: forwarder.listenAddress, timeout: 0.6))
        XCTAssertTrue(eventually(2) { forwarder.statistics.timedOut == 1 }, "\(forwarder.statistics)")
    }

    func testARefusingServerIsSkippedAtOnce() throws {
        // A UDP port nobody listens on: the kernel answers ICMP port unreachable, recv says ECONNREFUSED.
        let closed = try FileDescriptor.socket(family: AF_INET, type: .datagram, nonBlocking: true)
        try closed.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        let closedAddress = try XCTUnwrap(try closed.localAddress())
        closed.close()
        let tunnel = try TestResponder(answering: tunnelAnswer)
        defer { tunnel.stop() }
        let forwarder = makeForwarder(tunnel: [closedAddress, tunnel.address], fallback: [tunnel.address],
                                      attemptTimeout: 5)
        try forwarder.start()
        defer { try? forwarder.stop() }
        let started = ProcessControl.monotonicSeconds()
        let reply = try XCTUnwrap(try udpExchange(query("a.corp.example"), with: forwarder.listenAddress))
        XCTAssertEqual(firstAddress(in: reply)?.address, "10.2.2.2")
        XCTAssertLessThan(ProcessControl.monotonicSeconds() - started, 2, "no waiting for the attempt timeout")
        XCTAssertEqual(forwarder.statistics.upstreamErrors, 1)
    }

    func testInFlightQueriesAreCapped() throws {
        let silent = try TestResponder(answering: tunnelAnswer, silent: true)
        defer { silent.stop() }
        let forwarder = makeForwarder(tunnel: [silent.address], fallback: [silent.address], attemptTimeout: 5,
                                      maximumInFlight: 2)
        try forwarder.start()
        defer { try? forwarder.stop() }
        let client = try FileDescriptor.socket(family: AF_INET, type: .datagram, nonBlocking: true)
        defer { client.close() }
        for id in 0..<5 {
            _ = try query("q\(id).example", id: UInt16(id)).withUnsafeBytes { try client.send($0, to: forwarder.listenAddress) }
        }
        XCTAssertTrue(eventually(2) { forwarder.statistics.received == 5 }, "\(forwarder.statistics)")
        XCTAssertEqual(forwarder.statistics.overloaded, 3)
        XCTAssertTrue(eventually(2) { silent.served == 2 })
    }

    func testLifecycleRefusesIllegalTransitions() throws {
        let forwarder = makeForwarder(tunnel: [.ipv4([127, 0, 0, 1], port: 9)], fallback: [])
        XCTAssertThrowsError(try forwarder.stop()) {
            XCTAssertEqual("\($0)", "stop is not possible while the forwarder is idle")
        }
        try forwarder.start()
        XCTAssertTrue(forwarder.isRunning)
        XCTAssertThrowsError(try forwarder.start()) {
            XCTAssertEqual("\($0)", "start is not possible while the forwarder is running")
        }
        try forwarder.stop()
        XCTAssertFalse(forwarder.isRunning)
        XCTAssertThrowsError(try forwarder.start())
        XCTAssertThrowsError(try forwarder.stop())
    }

    func testStopClosesTheListeningSockets() throws {
        let forwarder = makeForwarder(tunnel: [.ipv4([127, 0, 0, 1], port: 9)], fallback: [])
        try forwarder.start()
        let address = forwarder.listenAddress
        try forwarder.stop()
        // The address is free again: binding it succeeds.
        let again = try FileDescriptor.socket(family: AF_INET, type: .datagram, nonBlocking: true)
        defer { again.close() }
        XCTAssertNoThrow(try again.bind(to: address))
    }
}
