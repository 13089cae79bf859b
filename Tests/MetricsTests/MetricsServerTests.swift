import LinuxSystem
@testable import Metrics
import XCTest

/// The server on real sockets, on loopback: answers, keep-alive, and clients that send nothing or too
/// much, with short limits so the timeouts show within a test.
final class MetricsServerTests: XCTestCase {
    /// The server on a thread of its own, stopped (through its stop pipe) and joined at tearDown.
    final class Running: @unchecked Sendable {
        // @unchecked: the server is touched only by its thread until join; the test reads it after.
        let server: MetricsServer
        let stop: (read: FileDescriptor, write: FileDescriptor)
        var thread: SystemThread?

        init(_ limits: MetricsServer.Limits) throws {
            server = try MetricsServer(listen: .ipv4([127, 0, 0, 1], port: 0), limits: limits)
            stop = try FileDescriptor.pipe()
            thread = try SystemThread.spawn { [self] in
                try? server.run(stop: stop.read) { counters in "test_requests_total \(counters.requests)\n" }
            }
        }

        var port: UInt16 {
            if case .ipv4(_, let port) = server.address { return port }
            return 0
        }

        func finish() {
            _ = try? stop.write.writeAll([1])
            thread?.join()
            stop.read.close()
            stop.write.close()
        }
    }

    var running: Running?
    override func tearDown() { running?.finish() }

    func start(_ configure: (inout MetricsServer.Limits) -> Void = { _ in }) throws -> Running {
        var limits = MetricsServer.Limits()
        configure(&limits)
        let r = try Running(limits)
        running = r
        return r
    }

    func connect(_ r: Running) throws -> FileDescriptor {
        let fd = try FileDescriptor.socket(family: SocketAddress.ipv4([127, 0, 0, 1], port: 0).family, type: .stream, nonBlocking: false)
        try fd.connect(to: .ipv4([127, 0, 0, 1], port: r.port))
        return fd
    }

    /// Reads until `complete` says the bytes are whole, the peer closes, or `timeout` passes.
    func read(_ fd: FileDescriptor, timeout: Int32 = 2000, until complete: (String) -> Bool = { _ in false }) throws -> (text: String, closed: Bool) {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while try Poll.readable(fd, timeoutMilliseconds: timeout) {
            let n = try buffer.withUnsafeMutableBytes { b throws(SystemCallError) in try fd.read(into: b) } ?? 0
            if n == 0 { return (String(decoding: bytes, as: UTF8.self), true) }
            bytes += buffer[0..<n]
            if complete(String(decoding: bytes, as: UTF8.self)) { break }
        }
        return (String(decoding: bytes, as: UTF8.self), false)
    }

    func send(_ fd: FileDescriptor, _ text: String) throws { try fd.writeAll(Array(text.utf8)) }

    /// One whole answer: the head and as many body bytes as its Content-Length says.
    static func whole(_ text: String) -> Bool {
        guard let end = text.range(of: "\r\n\r\n") else { return false }
        let length = text[..<end.lowerBound].split(separator: "\r\n")
            .first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        return text.utf8.count - text[..<end.upperBound].utf8.count >= length
    }

    func testMetricsAreAnsweredAndTheConnectionStaysOpen() throws {
        let r = try start()
        let fd = try connect(r)
        defer { fd.close() }
        try send(fd, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        let first = try read(fd, until: Self.whole)
        XCTAssertTrue(first.text.hasPrefix("HTTP/1.1 200 OK\r\n"), first.text)
        XCTAssertTrue(first.text.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"))
        XCTAssertTrue(first.text.hasSuffix("\r\n\r\ntest_requests_total 1\n"), first.text)
        XCTAssertFalse(first.closed)
        // HEAD on the same connection: the same head, no body.
        try send(fd, "HEAD /metrics HTTP/1.1\r\n\r\n")
        let second = try read(fd, until: { $0.hasSuffix("\r\n\r\n") })
        XCTAssertTrue(second.text.hasPrefix("HTTP/1.1 200 OK\r\n"), second.text)
        XCTAssertTrue(second.text.hasSuffix("\r\n\r\n"), "no body after a HEAD: \(second.text)")
    }

    func testOtherPathsMethodsAndBadRequests() throws {
        let r = try start()
        func answer(_ request: String) throws -> (text: String, closed: Bool) {
            let fd = try connect(r)
            defer { fd.close() }
            try send(fd, request)
            return try read(fd)
        }
        XCTAssertTrue(try answer("GET /nothing HTTP/1.1\r\nConnection: close\r\n\r\n").text.hasPrefix("HTTP/1.1 404 "))
        let post = try answer("POST /metrics HTTP/1.1\r\nConnection: close\r\n\r\n").text
        XCTAssertTrue(post.hasPrefix("HTTP/1.1 405 ") && post.contains("\r\nAllow: GET, HEAD\r\n"), post)
        let bad = try answer("GARBAGE\r\n\r\n")
        XCTAssertTrue(bad.text.hasPrefix("HTTP/1.1 400 ") && bad.closed, "a bad request is answered and closed: \(bad)")
        let huge = try answer("GET /metrics HTTP/1.1\r\nX: " + String(repeating: "a", count: 9000))
        XCTAssertTrue(huge.text.hasPrefix("HTTP/1.1 431 ") && huge.closed, huge.text)
        let old = try answer("GET /metrics HTTP/1.0\r\n\r\n")
        XCTAssertTrue(old.closed && old.text.contains("\r\nConnection: close\r\n"), "HTTP/1.0 without keep-alive is closed: \(old)")
    }

    func testASilentClientIsClosedAtItsDeadlineAndHoldsNobodyMeanwhile() throws {
        let r = try start { $0.requestTimeout = 0.3 }
        let silent = try connect(r)
        defer { silent.close() }
        let began = ProcessControl.monotonicSeconds()
        // Another client is answered at once while the silent one is open.
        let other = try connect(r)
        defer { other.close() }
        try send(other, "GET /metrics HTTP/1.1\r\n\r\n")
        XCTAssertTrue(try read(other, until: Self.whole).text.hasPrefix("HTTP/1.1 200 "))
        XCTAssertLessThan(ProcessControl.monotonicSeconds() - began, 0.3, "answered before the silent one's deadline")
        // A byte that comes late does not move the deadline (it would be 0.5 s then).
        ProcessControl.sleep(seconds: 0.2)
        try send(silent, "G")
        let end = try read(silent, timeout: 2000)
        let waited = ProcessControl.monotonicSeconds() - began
        XCTAssertTrue(end.closed && end.text.isEmpty, "closed without an answer: \(end)")
        XCTAssertGreaterThanOrEqual(waited, 0.29)
        XCTAssertLessThan(waited, 0.45)
    }

    func testBeyondTheLimitTheOldestWaitingConnectionIsClosed() throws {
        let r = try start { $0.maxConnections = 2 }
        let a = try connect(r), b = try connect(r)
        defer { a.close(); b.close() }
        // Each accepted before the next one comes, so that the oldest is a.
        try send(a, "GET / HTTP/1.1\r\n\r\n")
        _ = try read(a, until: Self.whole)
        try send(b, "GET / HTTP/1.1\r\n\r\n")
        _ = try read(b, until: Self.whole)
        let c = try connect(r)
        defer { c.close() }
        try send(c, "GET /metrics HTTP/1.1\r\n\r\n")
        XCTAssertTrue(try read(c, until: Self.whole).text.hasPrefix("HTTP/1.1 200 "), "the new one is served")
        XCTAssertTrue(try read(a, timeout: 1000).closed, "the oldest was closed for it")
        try send(b, "GET /metrics HTTP/1.1\r\n\r\n")
        XCTAssertTrue(try read(b, until: Self.whole).text.hasPrefix("HTTP/1.1 200 "), "the other one stays")
    }

    func testAnswersWithinTheReuseIntervalAreTheSameBody() throws {
        let r = try start { $0.reuseWithin = 60 }
        let fd = try connect(r)
        defer { fd.close() }
        try send(fd, "GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n")
        let both = try read(fd, until: { $0.components(separatedBy: "test_requests_total").count == 3 })
        // Two pipelined answers, both rendered once: the counter the body shows is the first request's.
        XCTAssertEqual(both.text.components(separatedBy: "HTTP/1.1 200 OK").count, 3, both.text)
        XCTAssertEqual(both.text.components(separatedBy: "test_requests_total 1\n").count, 3, both.text)
    }
}
