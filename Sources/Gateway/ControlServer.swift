import FoundationEssentials
import Glibc
import LinuxSystem
import TunnelgateSettings

/// The control socket of a running tunnel: `STATEDIR/NAME.sock`, owner-only,
/// answering processes of the same user (or root) only, checked by
/// SO_PEERCRED. One request per connection, one line each way:
///
///   status           → the tunnel's status report (JSON)
///   stop             → {"ok":true}; the tunnel then stops as on SIGTERM
///   message BASE64   → {"ok":true,"reply":"BASE64"}: the runtime's app_message
public final class ControlServer {
    public enum Request { case stop }

    let listener: FileDescriptor
    let path: String
    let gateway: Gateway
    let name: String

    public init(gateway: Gateway, name: String) throws(GatewayError) {
        self.gateway = gateway
        self.name = name
        path = gateway.state.controlPath(name)
        do { listener = try UnixSocket.listen(at: path) } catch { throw .system(error) }
    }

    deinit {
        listener.close()
        FileSystem.remove(path)
    }

    public var descriptor: Int32 { listener.rawValue }

    /// Serves the connections waiting; returns .stop when one asked to stop.
    /// `message` answers app messages (nil: this tunnel's runtime takes none).
    public func serve(message: (([UInt8]) -> Result<[UInt8], ControlFailure>)?) -> Request? {
        var request: Request?
        while let connection = try? UnixSocket.accept(listener) {
            defer { connection.close() }
            UnixSocket.setTimeout(connection, seconds: 1)
            guard let peer = try? UnixSocket.peerCredentials(connection), peer.uid == 0 || peer.uid == geteuid() else {
                reply(connection, #"{"ok":false,"error":"permission denied"}"#)
                continue
            }
            guard let line = UnixSocket.readLine(connection).map({ String(decoding: $0, as: UTF8.self) }) else { continue }
            if line == "status" {
                let report = (try? gateway.report(name)).flatMap { try? JSONEncoder().encode($0) }
                reply(connection, report.map { String(decoding: $0, as: UTF8.self) } ?? #"{"ok":false,"error":"no status"}"#)
            } else if line == "stop" {
                reply(connection, #"{"ok":true}"#)
                request = .stop
            } else if line.hasPrefix("message ") {
                guard let data = Data(base64Encoded: String(line.dropFirst(8))) else {
                    reply(connection, #"{"ok":false,"error":"the message is not base64"}"#)
                    continue
                }
                guard let message else {
                    reply(connection, #"{"ok":false,"error":"this tunnel's runtime takes no app messages"}"#)
                    continue
                }
                switch message(Array(data)) {
                case .success(let bytes): reply(connection, #"{"ok":true,"reply":""# + Data(bytes).base64EncodedString() + #""}"#)
                case .failure(let failure): reply(connection, #"{"ok":false,"error":"# + jsonQuoted(failure.description) + "}")
                }
            } else {
                reply(connection, #"{"ok":false,"error":"unknown request"}"#)
            }
        }
        return request
    }

    private func reply(_ fd: FileDescriptor, _ text: String) {
        try? fd.writeAll(Array((text + "\n").utf8))
    }

    /// Sends one request to a tunnel's control socket and returns the reply line.
    public static func request(_ path: String, _ line: String) throws(GatewayError) -> String {
        do throws(SystemCallError) {
            let fd = try UnixSocket.connect(to: path)
            defer { fd.close() }
            UnixSocket.setTimeout(fd, seconds: 10)
            try fd.writeAll(Array((line + "\n").utf8))
            guard let answer = UnixSocket.readLine(fd) else {
                throw SystemCallError("read(\(path))", Errno(rawValue: ECONNRESET))
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
