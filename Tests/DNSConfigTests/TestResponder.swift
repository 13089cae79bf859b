import Glibc
import LinuxSystem
import Synchronization
@testable import DNSConfig

/// A tiny DNS server for tests: on 127.0.0.1 (a port the kernel picks), UDP
/// and TCP, it answers every query with one A record, `address`, or, when
/// `silent`, reads queries and never answers. Runs on its own thread until `stop()`.
final class TestResponder: Sendable {
    let address: SocketAddress
    private let wake: FileDescriptor
    private let thread: SystemThread

    init(answering answerAddress: [UInt8], silent: Bool = false) throws {
        let udp = try FileDescriptor.socket(family: AF_INET, type: .datagram, nonBlocking: true)
        try udp.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        let bound = try udp.localAddress()!
        let tcp = try FileDescriptor.socket(family: AF_INET, type: .stream, nonBlocking: true)
        try tcp.bind(to: bound)
        try tcp.listen(backlog: 8)
        address = bound
        let pipe = try FileDescriptor.pipe()
        wake = pipe.write
        let counter = SharedCounter()
        thread = try SystemThread.spawn {
            Self.serve(udp: udp, tcp: tcp, wake: pipe.read, answer: answerAddress, silent: silent, counter: counter)
        }
        counterBox = counter
    }

    private let counterBox: SharedCounter
    /// Queries received (UDP datagrams and TCP frames), answered or not.
    var served: Int { counterBox.value.load(ordering: .relaxed) }

    func stop() {
        _ = [UInt8(1)].withUnsafeBytes { try? wake.write($0) }
        thread.join()
        wake.close()
    }

    private static func serve(udp: FileDescriptor, tcp: FileDescriptor, wake: FileDescriptor, answer address: [UInt8],
                              silent: Bool, counter: SharedCounter) {
        defer { udp.close(); tcp.close(); wake.close() }
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
                counter.value.add(1, ordering: .relaxed)
                if !silent, let reply = DNSConfigTests.answer(to: Array(buffer[0..<received.count]), address: address) {
                    _ = reply.withUnsafeBytes { try? udp.send($0, to: from) }
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
                    counter.value.add(1, ordering: .relaxed)
                    if !silent, let reply = DNSConfigTests.answer(to: message, address: address) {
                        let framed = [UInt8(reply.count >> 8), UInt8(reply.count & 0xff)] + reply
                        _ = framed.withUnsafeBytes { try? c.send($0) }
                    }
                }
                connections[c] = inbound
            }
        }
    }
}

/// An atomic counter shared by the responder's thread and the test.
final class SharedCounter: Sendable {
    let value = Atomic<Int>(0)
}
