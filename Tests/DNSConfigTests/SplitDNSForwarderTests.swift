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
        let silent = try TestResponder(answering: tunnelAnswer, behaviour: .silent)
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

    func testARefusingIPv6ServerIsSkippedAtOnce() throws {
        // The upstream socket is not connected: without IPV6_RECVERR it would never hear the port unreachable.
        let closed = try FileDescriptor.socket(family: AF_INET6, type: .datagram, nonBlocking: true)
        try closed.bind(to: .ipv6([UInt8](repeating: 0, count: 15) + [1], port: 0))
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

    // MARK: Answers are checked

    func testForgedUDPAnswersAreDroppedCountedAndTheRealOneRelayed() throws {
        // Before each real answer the server's twin sends, with 10.6.6.6: a wrong id, name, type and class
        // from the server's address and port, a query, the right answer from another port and from another
        // address, and the right answer to another of the host's addresses.
        let forger = try TestResponder(answering: tunnelAnswer, behaviour: .forge(forged: [10, 6, 6, 6]))
        let fallback = try TestResponder(answering: fallbackAnswer)
        defer { forger.stop(); fallback.stop() }
        let forwarder = makeForwarder(tunnel: [forger.address], fallback: [fallback.address])
        try forwarder.start()
        defer { try? forwarder.stop() }

        let rounds = 3
        for round in 0..<rounds {
            let id = UInt16(0x6100 + round)
            let reply = try XCTUnwrap(try udpExchange(query("host\(round).corp.example", id: id), with: forwarder.listenAddress))
            XCTAssertEqual(firstAddress(in: reply)?.address, "10.2.2.2", "the first datagram the client gets is the real answer")
            XCTAssertEqual(firstAddress(in: reply)?.id, id)
        }
        waitForAnswers(forwarder, UInt64(rounds))
        let stats = forwarder.statistics
        let sent = TestResponder.udpForgeries
        XCTAssertEqual(stats.answersWithWrongID, rounds * sent.wrongID, "\(stats)")
        XCTAssertEqual(stats.answersWithWrongQuestion, rounds * sent.wrongQuestion, "\(stats)")
        XCTAssertEqual(stats.malformedAnswers, rounds * sent.malformed, "\(stats)")
        XCTAssertEqual(stats.answersFromWrongSource, rounds * sent.wrongSource, "\(stats)")
        XCTAssertEqual(stats.answered, rounds)
        XCTAssertEqual(stats.upstreamErrors + stats.timedOut, 0, "no forgery ended an exchange: \(stats)")
        XCTAssertEqual(forger.served, rounds, "one try per query")
        XCTAssertEqual(fallback.served, 0)
    }

    func testForgedTCPFramesAreSkippedUntilTheRealAnswer() throws {
        let forger = try TestResponder(answering: tunnelAnswer, behaviour: .forge(forged: [10, 6, 6, 6]))
        let fallback = try TestResponder(answering: fallbackAnswer)
        defer { forger.stop(); fallback.stop() }
        let forwarder = makeForwarder(tunnel: [forger.address], fallback: [fallback.address])
        try forwarder.start()
        defer { try? forwarder.stop() }

        let answers = try tcpExchange([query("db.corp.example", id: 7), query("x.corp.example", id: 8)],
                                      with: forwarder.listenAddress)
        let byID = Dictionary(uniqueKeysWithValues: answers.compactMap(firstAddress).map { ($0.id, $0.address) })
        XCTAssertEqual(byID, [7: "10.2.2.2", 8: "10.2.2.2"])
        waitForAnswers(forwarder, 2)
        let stats = forwarder.statistics
        XCTAssertEqual(stats.answersWithWrongID, 2 * TestResponder.tcpForgeries.wrongID, "\(stats)")
        XCTAssertEqual(stats.answersWithWrongQuestion, 2 * TestResponder.tcpForgeries.wrongQuestion, "\(stats)")
        XCTAssertEqual(stats.upstreamErrors + stats.timedOut, 0, "\(stats)")
        XCTAssertEqual(fallback.served, 0)
    }

    func testEveryUpstreamTryHasItsOwnRandomIDAndSourcePort() throws {
        let tunnel = try TestResponder(answering: tunnelAnswer)
        defer { tunnel.stop() }
        let forwarder = makeForwarder(tunnel: [tunnel.address], fallback: [tunnel.address])
        try forwarder.start()
        defer { try? forwarder.stop() }
        let queries = 16
        for i in 0..<queries {
            // The same client id every time: the upstream id is not the client's.
            XCTAssertNotNil(try udpExchange(query("q\(i).corp.example", id: 0x1234), with: forwarder.listenAddress))
        }
        let seen = tunnel.seen
        XCTAssertEqual(seen.count, queries)
        // 16 draws from ~28000 ports and from 65536 ids: two collisions at most is all chance allows.
        XCTAssertGreaterThanOrEqual(Set(seen.map(\.sourcePort)).count, queries - 2, "\(seen.map(\.sourcePort))")
        XCTAssertGreaterThanOrEqual(Set(seen.map(\.id)).count, queries - 2, "\(seen.map(\.id))")
        XCTAssertLessThanOrEqual(seen.filter { $0.id == 0x1234 }.count, 1)
        let ports = seen.map(\.sourcePort)
        XCTAssertLessThan(zip(ports, ports.dropFirst()).filter { $1 &- $0 == 1 }.count, 3, "ports are not handed out in sequence: \(ports)")
    }

    // MARK: Truncation

    func testATruncatedUDPAnswerIsAskedAgainOverTCPOfTheSameServer() throws {
        let truncating = try TestResponder(answering: tunnelAnswer, behaviour: .truncateOverUDP)
        let other = try TestResponder(answering: [10, 4, 4, 4])
        defer { truncating.stop(); other.stop() }
        let forwarder = makeForwarder(tunnel: [truncating.address, other.address], fallback: [other.address])
        try forwarder.start()
        defer { try? forwarder.stop() }

        let reply = try XCTUnwrap(try udpExchange(query("a.corp.example", id: 0x7171), with: forwarder.listenAddress))
        XCTAssertEqual(firstAddress(in: reply)?.address, "10.2.2.2", "the TCP answer reached the UDP client")
        XCTAssertEqual(firstAddress(in: reply)?.id, 0x7171)
        XCTAssertEqual(reply[2] & 0x02, 0, "TC is clear: the client has the whole answer")
        XCTAssertEqual(truncating.seen.map(\.overTCP), [false, true], "UDP, then TCP to the same server")
        XCTAssertEqual(other.served, 0)
        waitForAnswers(forwarder, 1)
        XCTAssertEqual(forwarder.statistics.retriedOverTCP, 1)
        XCTAssertEqual(forwarder.statistics.truncatedForClient, 0)
    }

    func testAnAnswerLargerThanTheClientTakesIsTruncatedAsAServerWould() throws {
        // 60 A records: 12 + 22 + 60 × 16 = 994 bytes, more than the 512 a client without EDNS takes.
        let truncating = try TestResponder(answering: [10, 2, 2, 1], records: 60, behaviour: .truncateOverUDP)
        defer { truncating.stop() }
        let forwarder = makeForwarder(tunnel: [truncating.address], fallback: [truncating.address])
        try forwarder.start()
        defer { try? forwarder.stop() }
        let name = DNSName("big.corp.example")!

        let plain = try XCTUnwrap(try udpExchange(query("big.corp.example", id: 0x7272), with: forwarder.listenAddress))
        XCTAssertLessThanOrEqual(plain.count, 512)
        let cut = try DNSMessage(parsing: plain)
        XCTAssertTrue(cut.isTruncated, "TC set: the client asks again over TCP")
        XCTAssertEqual(cut.id, 0x7272)
        XCTAssertEqual(cut.questions, [DNSQuestion(name: name, type: 1)])
        XCTAssertEqual(cut.answers + cut.authorities + cut.additionals, [], "no partial answer")

        // A client that advertises 4096 bytes takes all of it over UDP.
        let edns = try XCTUnwrap(try udpExchange(ednsQuery("big.corp.example", id: 0x7373, payload: 4096),
                                                 with: forwarder.listenAddress))
        XCTAssertEqual(allAddresses(in: edns)?.count, 60)
        XCTAssertEqual(allAddresses(in: edns)?.first, "10.2.2.1")
        XCTAssertEqual(edns[2] & 0x02, 0)
        XCTAssertEqual(try DNSMessage(parsing: edns).id, 0x7373)

        // Over TCP, all of it too.
        let overTCP = try tcpExchange([query("big.corp.example", id: 0x7474)], with: forwarder.listenAddress)
        XCTAssertEqual(overTCP.count, 1)
        XCTAssertEqual(overTCP.first.flatMap(allAddresses)?.count, 60)

        waitForAnswers(forwarder, 3)
        XCTAssertEqual(truncating.seen.map(\.overTCP), [false, true, false, true, true])
        XCTAssertEqual(forwarder.statistics.retriedOverTCP, 2)
        XCTAssertEqual(forwarder.statistics.truncatedForClient, 1)
    }

    func testInFlightQueriesAreCapped() throws {
        let silent = try TestResponder(answering: tunnelAnswer, behaviour: .silent)
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
