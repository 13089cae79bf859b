import Glibc
import LinuxSystem
import XCTest
@testable import DNSConfig

// MARK: Temporary roots and snapshots

/// A temporary directory standing in for "/" (and a state directory beside
/// it), removed at the end of the test.
final class TemporaryRoot {
    let path: String
    let stateDirectory: String

    init() throws {
        var template = Array("/tmp/tunnelgate-dns-test.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SystemCallError("mkdtemp", .current) }
        path = String(cString: made)
        stateDirectory = path + "/state"
        for directory in ["/etc", "/run", "/state"] {
            try FileSystem.makeDirectory(path + directory, mode: 0o755)
        }
    }

    var paths: DNSPaths { DNSPaths(root: path, networkNamespace: path + "/proc-thread-ns") }

    func write(_ relative: String, _ text: String, mode: mode_t = 0o644) throws {
        let fd = try FileDescriptor.open(path + relative, O_WRONLY | O_CREAT | O_TRUNC, mode: mode)
        defer { fd.close() }
        try fd.writeAll(Array(text.utf8))
        try fd.setPermissions(mode)
    }

    func read(_ relative: String) throws -> String? {
        try FileSystem.read(path + relative).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Every file under the root, with its type, mode, owner and exact bytes (or link target).
    func snapshot(excludingState: Bool = false) throws -> [String: String] {
        var out: [String: String] = [:]
        func walk(_ relative: String) throws {
            for name in FileSystem.list(path + relative).sorted() {
                let child = relative + "/" + name
                if excludingState && child == "/state" { continue }
                guard let status = try FileSystem.status(path + child) else { continue }
                let head = "\(status.kind) \(String(status.permissions, radix: 8)) \(status.owner):\(status.group)"
                switch status.kind {
                case .regular:
                    out[child] = head + " " + DNSJournal.hex(try FileSystem.read(path + child) ?? [])
                case .symbolicLink:
                    out[child] = head + " -> " + String(decoding: try FileSystem.symbolicLinkTarget(path + child), as: UTF8.self)
                case .directory:
                    out[child] = head
                    try walk(child)
                case .other:
                    out[child] = head
                }
            }
        }
        try walk("")
        return out
    }

    deinit { Self.removeTree(path) }

    /// Removes `path` and everything below it (no process: tests run in namespaces without loopback).
    static func removeTree(_ path: String) {
        if (try? FileSystem.status(path))??.kind == .directory {
            for name in FileSystem.list(path) { removeTree(path + "/" + name) }
            _ = try? FileSystem.removeEmptyDirectory(path)
        } else {
            _ = try? FileSystem.removeFile(path)
        }
    }
}

// MARK: DNS messages

/// A query for `name` (A, IN) with `id`, built as RFC 1035 §4.1 lays it out.
func query(_ name: String, id: UInt16 = 0x1234, type: UInt16 = 1) -> [UInt8] {
    DNSQuery(id: id, name: DNSName(name)!, type: type).encoded
}

/// The first A record's address in an answer, and the answer's id.
func firstAddress(in answer: [UInt8]) -> (id: UInt16, address: String)? {
    guard answer.count >= 12, answer[2] & 0x80 != 0 else { return nil }
    let answers = Int(answer[6]) << 8 | Int(answer[7])
    guard answers > 0 else { return nil }
    var offset = 12
    func skipName() -> Bool {
        while offset < answer.count {
            let length = Int(answer[offset])
            if length & 0xc0 == 0xc0 { offset += 2; return true }
            offset += 1 + length
            if length == 0 { return true }
        }
        return false
    }
    guard skipName() else { return nil }
    offset += 4 // QTYPE, QCLASS
    guard skipName(), offset + 10 <= answer.count else { return nil }
    let type = Int(answer[offset]) << 8 | Int(answer[offset + 1])
    let length = Int(answer[offset + 8]) << 8 | Int(answer[offset + 9])
    guard type == 1, length == 4, offset + 14 <= answer.count else { return nil }
    let address = answer[(offset + 10)..<(offset + 14)].map(String.init).joined(separator: ".")
    return (UInt16(answer[0]) << 8 | UInt16(answer[1]), address)
}

/// An answer to `query` with `records` A records, the first `address`, the
/// next ones counting up its last byte; their owner a pointer to the question.
func answer(to query: [UInt8], address: [UInt8], records: Int = 1) -> [UInt8]? {
    guard let parsed = try? DNSQuery(parsing: query) else { return nil }
    var out = parsed.encoded
    out[0] = query[0]
    out[1] = query[1]
    out[2] = 0x81 // QR, RD
    out[3] = 0x80 // RA
    out[6] = UInt8(records >> 8)
    out[7] = UInt8(records & 0xff) // ANCOUNT
    for i in 0..<records {
        out += [0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4] + address.dropLast() + [address[3] &+ UInt8(truncatingIfNeeded: i)]
    }
    return out
}

/// A query for `name` (A, IN) with an EDNS OPT record advertising `payload` bytes (RFC 6891 §6.1.2).
func ednsQuery(_ name: String, id: UInt16 = 0x1234, type: UInt16 = 1, payload: UInt16) -> [UInt8] {
    var message = query(name, id: id, type: type)
    message[11] = 1 // ARCOUNT
    message += [0, 0, 41, UInt8(payload >> 8), UInt8(payload & 0xff), 0, 0, 0, 0, 0, 0]
    return message
}

/// Every A record's address in an answer, in order (nil when it does not parse).
func allAddresses(in answer: [UInt8]) -> [String]? {
    guard let message = try? DNSMessage(parsing: answer) else { return nil }
    return message.answers.filter { $0.type == 1 && $0.data.count == 4 }.map { $0.data.map(String.init).joined(separator: ".") }
}

// MARK: Clients

enum ClientError: Error { case timeout(String) }

/// Waits up to `seconds` for `events` on `fd`.
func waitFor(_ fd: FileDescriptor, _ events: PollSet.Events, seconds: Double) throws -> Bool {
    var set = PollSet()
    set.add(fd, events)
    return try set.wait(timeoutMilliseconds: Int32(seconds * 1000)) > 0
}

/// Sends a datagram to `server` and returns the first datagram that comes back, nil after `timeout`.
func udpExchange(_ message: [UInt8], with server: SocketAddress, timeout: Double = 3) throws -> [UInt8]? {
    let socket = try FileDescriptor.socket(family: server.family, type: .datagram, nonBlocking: true)
    defer { socket.close() }
    _ = try message.withUnsafeBytes { try socket.send($0, to: server) }
    guard try waitFor(socket, .readable, seconds: timeout) else { return nil }
    var buffer = [UInt8](repeating: 0, count: 65536)
    let received = try buffer.withUnsafeMutableBytes { try socket.receive(into: $0) }
    return received.map { Array(buffer[0..<$0.count]) }
}

/// Sends length-prefixed `messages` over one TCP connection and reads as many answers back.
func tcpExchange(_ messages: [[UInt8]], with server: SocketAddress, timeout: Double = 3) throws -> [[UInt8]] {
    let socket = try FileDescriptor.socket(family: server.family, type: .stream, nonBlocking: true)
    defer { socket.close() }
    if !(try socket.connect(to: server)) {
        guard try waitFor(socket, .writable, seconds: timeout) else { throw ClientError.timeout("connect") }
        if let error = try socket.pendingError() { throw SystemCallError("connect", error) }
    }
    var out: [UInt8] = []
    for m in messages { out += [UInt8(m.count >> 8), UInt8(m.count & 0xff)] + m }
    var offset = 0
    while offset < out.count {
        guard try waitFor(socket, .writable, seconds: timeout) else { throw ClientError.timeout("send") }
        offset += try out.withUnsafeBytes { try socket.send(UnsafeRawBufferPointer(rebasing: $0[offset...])) } ?? 0
    }
    var inbound: [UInt8] = []
    var answers: [[UInt8]] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    let deadline = ProcessControl.monotonicSeconds() + timeout
    while answers.count < messages.count {
        let left = deadline - ProcessControl.monotonicSeconds()
        guard left > 0, try waitFor(socket, .readable, seconds: left) else { throw ClientError.timeout("answer") }
        guard let received = try buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }) else { continue }
        guard received.count > 0 else { break }
        inbound += buffer[0..<received.count]
        while inbound.count >= 2, inbound.count >= 2 + (Int(inbound[0]) << 8 | Int(inbound[1])) {
            let length = Int(inbound[0]) << 8 | Int(inbound[1])
            answers.append(Array(inbound[2..<(2 + length)]))
            inbound.removeFirst(2 + length)
        }
    }
    return answers
}

/// Polls `condition` every 10 ms for up to `seconds`.
func eventually(_ seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ProcessControl.monotonicSeconds() + seconds
    while true {
        if try condition() { return true }
        if ProcessControl.monotonicSeconds() > deadline { return false }
        ProcessControl.sleep(seconds: 0.01)
    }
}


/// The forwarder counts an answer after sending it, so a client can hold the
/// reply before the count moves: wait (bounded) for the count to catch up.
func waitForAnswers(_ forwarder: SplitDNSForwarder, _ count: UInt64, timeout: Double = 2) {
    let deadline = ProcessControl.monotonicSeconds() + timeout
    while forwarder.statistics.answered < count, ProcessControl.monotonicSeconds() < deadline {
        ProcessControl.sleep(seconds: 0.001)
    }
}
