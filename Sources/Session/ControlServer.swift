import Engine
import LinuxSystem
import TunnelgateSettings

/// The control socket of a running tunnel: `STATEDIR/NAME.sock`, owner-only,
/// answering processes of the same user (or root) only, checked by
/// SO_PEERCRED. One request per connection, one line each way:
///
///   status           → the tunnel's status report (JSON)
///   stop             → {"ok":true}; the tunnel then stops as on SIGTERM
///   message BASE64   → {"ok":true,"reply":"BASE64"}: the runtime's app_message
///
/// Served on the tunnel's own loop, so it never waits for a client: the
/// listener and every accepted connection sit in one epoll set whose
/// descriptor the loop polls, and a request is read as its bytes arrive. A
/// client that connects and sends nothing costs nothing; at most
/// `maximumPending` such connections are kept, the oldest closed first.
public final class ControlServer {
    public enum Request { case stop }

    /// Connections waiting for their request line, at most.
    public static let maximumPending = 8
    /// The longest request line (an app message is base64 in it).
    public static let maximumRequest = 1 << 20

    private struct Pending {
        let fd: FileDescriptor
        var bytes: [UInt8] = []
    }

    let listener: FileDescriptor
    let epoll: EventPoll
    let path: String
    let gateway: Engine
    let name: String
    /// In order of arrival.
    private var pending: [Pending] = []
    /// The socket file this server bound (device and inode), so that it removes only its own.
    private let boundFile: (dev: UInt64, ino: UInt64)?

    public init(gateway: Engine, name: String) throws(EngineError) {
        self.gateway = gateway
        self.name = name
        path = gateway.state.controlPath(name)
        do throws(SystemCallError) {
            epoll = try EventPoll()
            do throws(SystemCallError) {
                listener = try UnixSocket.listen(at: path)
                try epoll.watch(listener)
            } catch {
                epoll.close()
                throw error
            }
        } catch {
            throw .system(error)
        }
        boundFile = Self.identity(of: path)
    }

    deinit {
        for p in pending { p.fd.close() }
        listener.close()
        epoll.close()
        // A server made later for the same name (settings applied again) may have replaced the file.
        if let mine = boundFile, let now = Self.identity(of: path), now == mine { FileSystem.remove(path) }
    }

    private static func identity(of path: String) -> (dev: UInt64, ino: UInt64)? {
        guard let status = (try? FileSystem.status(path, followingSymbolicLinks: true)) ?? nil else { return nil }
        return (status.device, status.inode)
    }

    /// Readable when a connection is waiting to be accepted or a client sent bytes.
    public var descriptor: Int32 { epoll.descriptor.rawValue }

    private func close(_ fd: FileDescriptor) {
        // Closing it removes it from the set too; removing it first only says so.
        try? epoll.unwatch(fd)
        fd.close()
    }

    /// Accepts the connections waiting and answers every request that has
    /// arrived whole; returns .stop when one asked to stop. Never blocks on a
    /// client. `message` answers app messages (nil: this tunnel's runtime
    /// takes none).
    public func serve(message: (([UInt8]) -> Result<[UInt8], ControlFailure>)?) -> Request? {
        // Drain the set's readiness (level-triggered: what is not handled now is reported again).
        // A failed drain leaves the set readable: the loop only comes back sooner.
        _ = try? epoll.drain(maximum: Self.maximumPending + 1)

        while let connection = try? UnixSocket.accept(listener) {
            guard let peer = try? UnixSocket.peerCredentials(connection), peer.uid == 0 || peer.uid == ProcessControl.effectiveUserID else {
                reply(connection, #"{"ok":false,"error":"permission denied"}"#)
                connection.close()
                continue
            }
            guard (try? connection.setNonBlocking(true)) != nil else { connection.close(); continue }
            // A connection the set cannot watch would never wake the loop: refused.
            guard (try? epoll.watch(connection)) != nil else { connection.close(); continue }
            if pending.count == Self.maximumPending { close(pending.removeFirst().fd) }
            pending.append(Pending(fd: connection))
        }

        var request: Request?
        var index = 0
        while index < pending.count {
            switch readRequest(&pending[index]) {
            case .waiting:
                index += 1
                continue
            case .closed:
                break
            case .tooLong:
                reply(pending[index].fd, #"{"ok":false,"error":"the request is longer than \#(Self.maximumRequest) bytes"}"#)
            case .line(let line):
                if answer(line, on: pending[index].fd, message: message) == .stop { request = .stop }
            }
            close(pending.remove(at: index).fd)
        }
        return request
    }

    private enum ReadResult { case waiting, closed, tooLong, line(String) }

    /// Reads what the client has sent so far, without waiting.
    private func readRequest(_ p: inout Pending) -> ReadResult {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let read = chunk.withUnsafeMutableBytes { b in Result { () throws(SystemCallError) in try p.fd.read(into: b) } }
            guard case .success(let got) = read else { return .closed }
            guard let n = got else { return .waiting }  // EAGAIN
            if n == 0 { return .closed }
            if let newline = chunk[..<n].firstIndex(of: 0x0a) {
                p.bytes += chunk[..<newline]
                return p.bytes.count > Self.maximumRequest ? .tooLong : .line(String(decoding: p.bytes, as: UTF8.self))
            }
            p.bytes += chunk[..<n]
            if p.bytes.count > Self.maximumRequest { return .tooLong }
        }
    }

    private func answer(_ line: String, on connection: FileDescriptor,
                        message: (([UInt8]) -> Result<[UInt8], ControlFailure>)?) -> Request? {
        if line == "status" {
            let report = (try? gateway.report(name)).flatMap { try? JSONCoding.encodeValue($0) }
            reply(connection, report.map { $0.serialized() } ?? #"{"ok":false,"error":"no status"}"#)
        } else if line == "stop" {
            reply(connection, #"{"ok":true}"#)
            return .stop
        } else if line.hasPrefix("message ") {
            guard let data = Base64.decode(line.dropFirst(8)) else {
                reply(connection, #"{"ok":false,"error":"the message is not base64"}"#)
                return nil
            }
            guard let message else {
                reply(connection, #"{"ok":false,"error":"this tunnel's runtime takes no app messages"}"#)
                return nil
            }
            switch message(data) {
            case .success(let bytes): reply(connection, #"{"ok":true,"reply":""# + Base64.encode(bytes) + #""}"#)
            case .failure(let failure): reply(connection, #"{"ok":false,"error":"# + jsonQuoted(failure.description) + "}")
            }
        } else {
            reply(connection, #"{"ok":false,"error":"unknown request"}"#)
        }
        return nil
    }

    /// Writes the answer; a client that does not read it gets at most a second (a socket that cannot be
    /// given that bound gets no answer: the client sees the connection close).
    private func reply(_ fd: FileDescriptor, _ text: String) {
        try? fd.setNonBlocking(false)
        guard (try? fd.setTimeouts(seconds: 1)) != nil else { return }
        try? fd.writeAll(Array((text + "\n").utf8))
    }

    /// Sends one request to a tunnel's control socket and returns the reply line.
    public static func request(_ path: String, _ line: String) throws(EngineError) -> String {
        do throws(SystemCallError) {
            let fd = try UnixSocket.connect(to: path)
            defer { fd.close() }
            try fd.setTimeouts(seconds: 10)
            try fd.writeAll(Array((line + "\n").utf8))
            guard let answer = UnixSocket.readLine(fd) else {
                throw SystemCallError("read(\(path))", .connectionReset)
            }
            return String(decoding: answer, as: UTF8.self)
        } catch {
            throw .system(error)
        }
    }
}

/// Why an app message got no reply.
public struct ControlFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

func jsonQuoted(_ s: String) -> String { JSONValue.quoted(s) }
