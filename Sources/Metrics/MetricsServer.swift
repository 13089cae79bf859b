import LinuxSystem

/// The collector's HTTP/1.1 server: one thread, one poll(2) over the listening socket, a stop
/// descriptor and every connection, all non-blocking, so no client can hold it.
///
/// - At most `maxConnections` connections; a new one beyond that closes the oldest (Prometheus opens
///   a new one when its idle keep-alive connection is gone, a client that holds connections without
///   asking for anything only pushes its own out).
/// - A connection has `requestTimeout` seconds, from when it was accepted or its last answer was
///   written, to send a complete request head, however slowly its bytes arrive; then it is closed.
/// - A request head is at most `maxRequestBytes` (431 and close beyond that).
/// - An answer is written as far as the socket takes it; the rest waits for POLLOUT, while nothing more
///   is read from that connection; a client that does not take it within `writeTimeout` is closed.
/// - Keep-alive as HTTP/1.1 has it (`Connection: close` ends it; HTTP/1.0 only with keep-alive);
///   pipelined requests are answered one per connection per turn of the loop, so one client's queue of
///   requests does not hold the others.
/// - A /metrics answer rendered less than `reuseWithin` seconds ago is sent again instead of reading
///   every namespace anew: however fast clients ask, the state is read at most 1/reuseWithin times a
///   second.
///
/// GET or HEAD of /metrics answers the exposition (`text/plain; version=0.0.4`); `/` a line pointing
/// there; other paths 404, other methods 405.
public final class MetricsServer {
    public struct Limits: Sendable {
        public var maxConnections = 16
        public var maxRequestBytes = 8192
        public var requestTimeout = 10.0
        public var writeTimeout = 10.0
        public var reuseWithin = 0.25
        public init() {}
    }

    public let address: SocketAddress
    public private(set) var counters = CollectorCounters()
    private let listener: FileDescriptor
    private let limits: Limits
    private var connections: [Connection] = []
    /// The exposition of one scrape, while `run` runs.
    private var render: ((CollectorCounters) -> String)?
    /// The last /metrics body and when it was rendered (monotonic).
    private var lastBody: (bytes: [UInt8], at: Double)?

    private final class Connection {
        let descriptor: FileDescriptor
        let accepted: Double
        var input: [UInt8] = []
        var output: [UInt8] = []
        var written = 0
        var closeAfterWrite = false
        /// The input may hold a complete request, to be answered next turn (pipelining).
        var pending = false
        /// Reading: the request head is due by then. Writing: the answer must be taken by then.
        var deadline: Double
        var writing: Bool { written < output.count }

        init(_ descriptor: FileDescriptor, now: Double, timeout: Double) {
            self.descriptor = descriptor
            accepted = now
            deadline = now + timeout
        }
    }

    /// Binds and listens (the error names the address: "bind(127.0.0.1:9587) failed: Address already in use (98)").
    public init(listen address: SocketAddress, limits: Limits = Limits()) throws(SystemCallError) {
        listener = try FileDescriptor.listenTCP(at: address)
        self.address = (try? listener.localAddress()).flatMap { $0 } ?? address
        self.limits = limits
    }

    deinit {
        for c in connections { c.descriptor.close() }
        listener.close()
    }

    /// Serves until `stop` is readable (a signalfd: the caller reads the signal). `metrics` renders the
    /// exposition for one request, given the counters so far.
    public func run(stop: FileDescriptor, metrics: @escaping (CollectorCounters) -> String) throws(SystemCallError) {
        render = metrics
        defer { render = nil }
        var polls = PollSet()
        while true {
            polls.removeAll()
            polls.add(stop, .readable)
            polls.add(listener, .readable)
            for c in connections { polls.add(c.descriptor, c.writing ? .writable : .readable) }
            let now = ProcessControl.monotonicSeconds()
            let due = connections.map(\.deadline).min()
            var timeout = due.map { Int32(max(0, min(60_000, (($0 - now) * 1000).rounded(.up)))) } ?? -1
            if connections.contains(where: \.pending) { timeout = 0 }
            _ = try polls.wait(timeoutMilliseconds: timeout)
            if !polls.events(at: 0).isEmpty { return }
            // Each connection as it was polled; accepting comes after, so positions still match.
            let polled = connections
            for (i, c) in polled.enumerated() {
                let events = polls.events(at: i + 2)
                if c.pending, !c.writing {
                    c.pending = false
                    answerWaiting(c)
                } else if !events.isEmpty {
                    serve(c)
                }
            }
            if !polls.events(at: 1).isEmpty { acceptWaiting() }
            expire(now: ProcessControl.monotonicSeconds())
        }
    }

    private func acceptWaiting() {
        // Bounded per turn, so a flood of connections cannot keep the loop from the ones it has.
        for _ in 0..<64 {
            let accepted: FileDescriptor?
            do { accepted = try listener.accept() } catch { return }  // ECONNABORTED, EMFILE …: try next turn
            guard let fd = accepted else { return }
            if connections.count >= limits.maxConnections {
                // Prefer to drop one that is waiting for its request over one being answered.
                let victim = connections.firstIndex { !$0.writing } ?? 0
                close(connections[victim])
                counters.closedLimit += 1
            }
            connections.append(Connection(fd, now: ProcessControl.monotonicSeconds(), timeout: limits.requestTimeout))
        }
    }

    private func expire(now: Double) {
        for c in connections where c.deadline <= now {
            close(c)
            counters.closedTimeout += 1
        }
    }

    private func close(_ c: Connection) {
        c.descriptor.close()
        connections.removeAll { $0 === c }
    }

    private func serve(_ c: Connection) {
        if c.writing {
            flush(c)
            return
        }
        var chunk = [UInt8](repeating: 0, count: 4096)
        let n: Int?
        do { n = try chunk.withUnsafeMutableBytes { buffer throws(SystemCallError) in try c.descriptor.read(into: buffer) } } catch {
            close(c)  // ECONNRESET and the like: the client is gone
            return
        }
        guard let n else { return }
        if n == 0 { close(c); return }  // the client closed its end
        c.input += chunk[0..<n]
        answerWaiting(c)
    }

    /// Answers the request at the start of the input, if its head is complete.
    private func answerWaiting(_ c: Connection) {
        switch HTTPRequest.parse(c.input[...]) {
        case .incomplete:
            if c.input.count > limits.maxRequestBytes {
                counters.closedBadRequest += 1
                respond(c, status: 431, body: "request head larger than \(limits.maxRequestBytes) bytes\n", close: true)
            }
        case .invalid(let status):
            counters.closedBadRequest += 1
            respond(c, status: status, body: "not a request this server answers\n", close: true)
        case .request(let request, let consumed):
            c.input.removeFirst(consumed)
            let head = request.method == "HEAD"
            let close = !request.keepAlive
            counters.requests += 1
            switch (request.method, request.path) {
            case ("GET", "/metrics"), ("HEAD", "/metrics"):
                respond(c, status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", extraHeaders: "",
                        body: exposition(), headOnly: head, close: close, http10: request.minorVersion == 0)
            case ("GET", "/"), ("HEAD", "/"):
                respond(c, status: 200, body: "tunnelgate metrics: /metrics\n", headOnly: head, close: close,
                        http10: request.minorVersion == 0)
            case ("GET", _), ("HEAD", _):
                respond(c, status: 404, body: "not found; the metrics are at /metrics\n", headOnly: head, close: close,
                        http10: request.minorVersion == 0)
            default:
                respond(c, status: 405, extraHeaders: "Allow: GET, HEAD\r\n", body: "only GET and HEAD\n", close: close,
                        http10: request.minorVersion == 0)
            }
        }
    }

    /// The /metrics body: the last one while it is fresh, else rendered now.
    private func exposition() -> [UInt8] {
        let now = ProcessControl.monotonicSeconds()
        if let last = lastBody, now - last.at < limits.reuseWithin { return last.bytes }
        let bytes = Array((render?(counters) ?? "").utf8)
        lastBody = (bytes, now)
        return bytes
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 431: "Request Header Fields Too Large"
        case 505: "HTTP Version Not Supported"
        default: "Error"
        }
    }

    private func respond(_ c: Connection, status: Int, contentType: String = "text/plain; charset=utf-8",
                         extraHeaders: String = "", body: String, headOnly: Bool = false, close: Bool, http10: Bool = false) {
        respond(c, status: status, contentType: contentType, extraHeaders: extraHeaders, body: Array(body.utf8),
                headOnly: headOnly, close: close, http10: http10)
    }

    private func respond(_ c: Connection, status: Int, contentType: String, extraHeaders: String, body bodyBytes: [UInt8],
                         headOnly: Bool, close: Bool, http10: Bool) {
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\nContent-Type: \(contentType)\r\n"
        head += "Content-Length: \(bodyBytes.count)\r\n" + extraHeaders
        if close { head += "Connection: close\r\n" } else if http10 { head += "Connection: keep-alive\r\n" }
        head += "\r\n"
        c.output = Array(head.utf8) + (headOnly ? [] : bodyBytes)
        c.written = 0
        c.closeAfterWrite = close
        c.deadline = ProcessControl.monotonicSeconds() + limits.writeTimeout
        flush(c)
    }

    /// Writes what the socket takes; once all is written, closes or waits for the next request.
    private func flush(_ c: Connection) {
        while c.writing {
            let sent: Int?
            do {
                sent = try c.output.withUnsafeBytes { all throws(SystemCallError) in
                    try c.descriptor.send(UnsafeRawBufferPointer(rebasing: all[c.written...]))
                }
            } catch {
                close(c)  // EPIPE, ECONNRESET: the client is gone
                return
            }
            guard let sent else { return }  // the socket's buffer is full: wait for POLLOUT
            c.written += sent
        }
        if c.closeAfterWrite { close(c); return }
        c.output = []
        c.written = 0
        c.deadline = ProcessControl.monotonicSeconds() + limits.requestTimeout
        // A pipelined request may be waiting already: answered next turn, after the other connections.
        c.pending = !c.input.isEmpty
    }
}
