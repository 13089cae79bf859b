import Glibc
import LinuxSystem
import Synchronization
@testable import DNSConfig

/// A tiny DNS server for tests: on 127.0.0.1 (a port the kernel picks), UDP
/// and TCP, it answers every query with `records` A records, the first
/// `address` (the next ones count up its last byte). What else it does is
/// its `Behaviour`. Runs on its own thread until `stop()`.
final class TestResponder: Sendable {
    enum Behaviour: Sendable {
        /// Answers.
        case answer
        /// Reads queries and never answers.
        case silent
        /// Before each real answer, sends forged ones that carry `forged`
        /// (see `forgeries`): over UDP with a wrong id, name, type, class, with
        /// QR = 0, from another port, from another address and to another
        /// address; over TCP with a wrong id and a wrong name.
        case forge(forged: [UInt8])
        /// Over UDP, answers with TC = 1 and no records; over TCP, answers in full.
        case truncateOverUDP
    }

    /// One query the responder read.
    struct Seen: Sendable, Hashable {
        var overTCP: Bool
        var sourcePort: UInt16
        var id: UInt16
    }

    /// What `.forge` sends over UDP per query, and over TCP: how the forwarder should count them.
    static let udpForgeries = (wrongID: 1, wrongQuestion: 3, malformed: 1, wrongSource: 2)
    static let tcpForgeries = (wrongID: 1, wrongQuestion: 1)
    /// The other local address `.forge` sends from, and to.
    static let otherAddress: [UInt8] = [127, 0, 0, 5]

    let address: SocketAddress
    private let wake: FileDescriptor
    private let thread: SystemThread
    private let log: SharedLog

    init(answering answerAddress: [UInt8], records: Int = 1, behaviour: Behaviour = .answer) throws {
        let udp = try FileDescriptor.socket(family: AF_INET, type: .datagram, nonBlocking: true)
        try udp.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        let bound = try udp.localAddress()!
        let tcp = try FileDescriptor.socket(family: AF_INET, type: .stream, nonBlocking: true)
        try tcp.bind(to: bound)
        try tcp.listen(backlog: 8)
        // The forger's other sockets: another port on this address, and another address.
        let otherPort = try FileDescriptor.socket(family: AF_INET, type: .datagram, nonBlocking: true)
        try otherPort.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        let otherHost = try FileDescriptor.socket(family: AF_INET, type: .datagram, nonBlocking: true)
        try otherHost.bind(to: .ipv4(Self.otherAddress, port: bound.port))
        address = bound
        let pipe = try FileDescriptor.pipe()
        wake = pipe.write
        let log = SharedLog()
        self.log = log
        let server = Server(udp: udp, tcp: tcp, otherPort: otherPort, otherHost: otherHost, address: answerAddress,
                            records: records, behaviour: behaviour, log: log)
        thread = try SystemThread.spawn { server.serve(wake: pipe.read) }
    }

    /// Queries received (UDP datagrams and TCP frames), answered or not.
    var served: Int { log.seen.withLock { $0.count } }
    /// Every query received, in order.
    var seen: [Seen] { log.seen.withLock { $0 } }

    func stop() {
        _ = [UInt8(1)].withUnsafeBytes { try? wake.write($0) }
        thread.join()
        wake.close()
    }

    private struct Server: Sendable {
        let udp: FileDescriptor, tcp: FileDescriptor, otherPort: FileDescriptor, otherHost: FileDescriptor
        let address: [UInt8]
        let records: Int
        let behaviour: Behaviour
        let log: SharedLog

        func serve(wake: FileDescriptor) {
            defer { [udp, tcp, otherPort, otherHost, wake].forEach { $0.close() } }
            var buffer = [UInt8](repeating: 0, count: 65536)
            var connections: [FileDescriptor: [UInt8]] = [:]
            defer { connections.keys.forEach { $0.close() } }
            while true {
                var set = PollSet()
                set.add(wake, .readable)
                set.add(udp, .readable)
                set.add(tcp, .readable)
                let open = Array(connections.keys)
                for c in open { set.add(c, .readable) }
                guard (try? set.wait(timeoutMilliseconds: -1)) != nil else { return }
                if !set.events(at: 0).isEmpty { return }
                if !set.events(at: 1).isEmpty,
                   let received = try? buffer.withUnsafeMutableBytes({ try udp.receive(into: $0) }), let from = received.from {
                    let message = Array(buffer[0..<received.count])
                    record(message, overTCP: false, from: from)
                    for (socket, destination, datagram) in replies(toDatagram: message, from: from) {
                        _ = datagram.withUnsafeBytes { try? socket.send($0, to: destination) }
                    }
                }
                if !set.events(at: 2).isEmpty, let c = try? tcp.accept() { connections[c] = [] }
                for (i, c) in open.enumerated() where !set.events(at: 3 + i).isEmpty {
                    guard let received = try? buffer.withUnsafeMutableBytes({ try c.receive(into: $0) }), received.count > 0 else {
                        c.close(); connections[c] = nil; continue
                    }
                    var inbound = connections[c]! + buffer[0..<received.count]
                    while inbound.count >= 2, inbound.count >= 2 + (Int(inbound[0]) << 8 | Int(inbound[1])) {
                        let length = Int(inbound[0]) << 8 | Int(inbound[1])
                        let message = Array(inbound[2..<(2 + length)])
                        inbound.removeFirst(2 + length)
                        record(message, overTCP: true, from: nil)
                        var framed: [UInt8] = []
                        for reply in replies(toFrame: message) { framed += [UInt8(reply.count >> 8), UInt8(reply.count & 0xff)] + reply }
                        var offset = 0
                        while offset < framed.count, let sent = try? framed.withUnsafeBytes({ try c.send(UnsafeRawBufferPointer(rebasing: $0[offset...])) }) {
                            offset += sent
                        }
                    }
                    connections[c] = inbound
                }
            }
        }

        private func record(_ message: [UInt8], overTCP: Bool, from: SocketAddress?) {
            guard message.count >= 2 else { return }
            var port: UInt16 = 0
            if case .ipv4(_, let p)? = from { port = p }
            log.seen.withLock { $0.append(Seen(overTCP: overTCP, sourcePort: port, id: UInt16(message[0]) << 8 | UInt16(message[1]))) }
        }

        /// The datagrams to send for a UDP query: (from which socket, to where, what), in order.
        private func replies(toDatagram message: [UInt8], from: SocketAddress) -> [(FileDescriptor, SocketAddress, [UInt8])] {
            guard let real = DNSConfigTests.answer(to: message, address: address, records: records) else { return [] }
            switch behaviour {
            case .answer:
                return [(udp, from, real)]
            case .silent:
                return []
            case .truncateOverUDP:
                var cut = DNSConfigTests.answer(to: message, address: address, records: 0)!
                cut[2] |= 0x02 // TC
                return [(udp, from, cut)]
            case .forge(let forged):
                guard let q = try? DNSQuery(parsing: message), case .ipv4(_, let port) = from else { return [] }
                let fake = DNSConfigTests.answer(to: message, address: forged)!
                var notAResponse = fake
                notAResponse[2] &= 0x7f
                var forgeries: [(FileDescriptor, SocketAddress, [UInt8])] = [
                    (udp, from, forgedAnswer(q, id: q.id ^ 0xffff, forged: forged)),
                    (udp, from, forgedAnswer(q, name: DNSName("forged.example")!, forged: forged)),
                    (udp, from, forgedAnswer(q, type: q.type == 28 ? 1 : 28, forged: forged)),
                    (udp, from, forgedAnswer(q, questionClass: 3, forged: forged)),
                    (udp, from, notAResponse),
                    (otherPort, from, fake),
                    (otherHost, from, fake),
                ]
                // Right in every byte, from the right source, but to another of the host's addresses.
                forgeries.append((udp, .ipv4(TestResponder.otherAddress, port: port), fake))
                return forgeries + [(udp, from, real)]
            }
        }

        /// The frames to send for a TCP query, in order.
        private func replies(toFrame message: [UInt8]) -> [[UInt8]] {
            guard let real = DNSConfigTests.answer(to: message, address: address, records: records) else { return [] }
            switch behaviour {
            case .answer, .truncateOverUDP: return [real]
            case .silent: return []
            case .forge(let forged):
                guard let q = try? DNSQuery(parsing: message) else { return [] }
                return [forgedAnswer(q, id: q.id ^ 0xffff, forged: forged),
                        forgedAnswer(q, name: DNSName("forged.example")!, forged: forged), real]
            }
        }

        /// An answer to `query` with one thing changed, carrying `forged`.
        private func forgedAnswer(_ query: DNSQuery, id: UInt16? = nil, name: DNSName? = nil, type: UInt16? = nil,
                                  questionClass: UInt16? = nil, forged: [UInt8]) -> [UInt8] {
            let other = DNSQuery(id: id ?? query.id, name: name ?? query.name, type: type ?? query.type,
                                 questionClass: questionClass ?? query.questionClass)
            return DNSConfigTests.answer(to: other.encoded, address: forged)!
        }
    }
}

/// What the responder's thread saw, shared with the test.
final class SharedLog: Sendable {
    let seen = Mutex<[TestResponder.Seen]>([])
}

extension SocketAddress {
    /// The port of an IPv4 or IPv6 address (0 for a path).
    var port: UInt16 {
        switch self {
        case .ipv4(_, let port), .ipv6(_, let port, _): port
        case .unix: 0
        }
    }
}
