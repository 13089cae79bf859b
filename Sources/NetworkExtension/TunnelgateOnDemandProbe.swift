import CTunnelgateTLS
import Foundation
import LinuxSystem

/// An on-demand rule's `probeURL` (and an NEEvaluateConnectionRule's), fetched as iOS fetches it: one
/// HTTP GET on the network being judged, not through the tunnel; the criterion matches when the answer
/// is `200 OK`.
///
/// Outside the tunnel: every socket of the probe (the TCP connection, the DNS queries for its host) is
/// bound to the primary link with SO_BINDTODEVICE. A tunnel's lookup rule sends unmarked packets to its
/// table, whose routes leave by the TUN; with the socket's output interface fixed to the primary link
/// those routes do not apply (the kernel skips a route whose device is not the bound one), the lookup
/// falls through to the main table and leaves by the physical link, whether or not a tunnel is up.
/// A tunnel's kill switch (`includeAllNetworks`) still drops the probe (it lets out the carrier identity's
/// packets only), so there the criterion does not match; the log names the failure.
///
/// A host name is looked up in `/etc/hosts`, then with A and AAAA queries to the network's resolver
/// (the nameservers the rules see, beneath any tunnel's DNS), over the same bound link. `https` is
/// verified against the system's trust store (`/etc/ssl/certs`), with SNI, as NWTCPConnection's TLS.
/// Everything together takes at most `timeoutSeconds`; at most `maximumHeader` bytes are read.
struct TunnelgateOnDemandProbe {
    static let timeoutSeconds = 3.0
    static let maximumHeader = 8192
    static let trustStoreFile = "/etc/ssl/certs/ca-certificates.crt"
    static let trustStoreDirectory = "/etc/ssl/certs"
    /// The fwmark of the probe's DNS queries (SO_MARK), so that the watcher's own queries are not
    /// taken for an app's (the DNS watch logs only unmarked packets). 'tg' 0x0d: on demand.
    static let queryMark: UInt32 = 0x7467_0d00

    /// The outcome, as the log says it.
    enum Outcome: Equatable, CustomStringConvertible {
        /// The HTTP status code of the answer.
        case status(Int)
        /// No answer: the reason.
        case failed(String)

        var matches: Bool { self == .status(200) }
        var description: String {
            switch self {
            case .status(let code): "HTTP \(code)"
            case .failed(let why): why
            }
        }
    }

    /// The primary link's name (the sockets are bound to it).
    let interface: String
    /// The network's resolver.
    let nameservers: [SocketAddress]

    /// GET `url` on the primary link: the status code, or why there is none.
    func fetch(_ url: URL) -> Outcome {
        let deadline = ProcessControl.monotonicSeconds() + Self.timeoutSeconds
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty else {
            return .failed("'\(url.absoluteString)' is not an http or https URL with a host")
        }
        let tls = scheme == "https"
        guard let port = UInt16(exactly: url.port ?? (tls ? 443 : 80)), port != 0 else { return .failed("port \(url.port ?? 0) is out of range") }
        let addresses: [SocketAddress]
        switch resolve(host, port: port, deadline: deadline) {
        case .success(let found): addresses = found
        case .failure(let why): return .failed(why.description)
        }
        var problems: [String] = []
        for address in addresses {
            if ProcessControl.monotonicSeconds() >= deadline { problems.append("no answer within \(Int(Self.timeoutSeconds)) s"); break }
            switch get(url, host: host, address: address, tls: tls, deadline: deadline) {
            case .status(let code): return .status(code)
            case .failed(let why): problems.append("\(address.numericHost ?? "?"): \(why)")
            }
        }
        return .failed(problems.joined(separator: "; "))
    }

    // MARK: The request

    /// The request line and headers (HTTP/1.1, no body, the connection closed after the answer). Pure.
    static func request(_ url: URL, host: String) -> [UInt8] {
        var path = url.path.isEmpty ? "/" : url.path
        if let query = url.query { path += "?" + query }
        let authority = (host.contains(":") ? "[\(host)]" : host) + (url.port.map { ":\($0)" } ?? "")
        return Array("GET \(path) HTTP/1.1\r\nHost: \(authority)\r\nUser-Agent: tunnelgate-on-demand\r\nAccept: */*\r\nConnection: close\r\n\r\n".utf8)
    }

    /// The status code of an answer's first line (`HTTP/1.1 200 OK`), nil while it is incomplete or when
    /// it is not HTTP. Pure.
    static func statusCode(in answer: [UInt8]) -> Int?? {
        guard let end = answer.firstIndex(of: 0x0A) else { return answer.count >= maximumHeader ? .some(nil) : nil }
        let line = String(decoding: answer[..<end], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let words = line.split(separator: " ", maxSplits: 2)
        guard words.count >= 2, words[0].hasPrefix("HTTP/1."), words[1].count == 3, let code = Int(words[1]) else { return .some(nil) }
        return .some(code)
    }

    private func get(_ url: URL, host: String, address: SocketAddress, tls: Bool, deadline: Double) -> Outcome {
        let socket: FileDescriptor
        do throws(SystemCallError) {
            socket = try FileDescriptor.socket(family: address.family, type: .stream, nonBlocking: true)
        } catch { return .failed("\(error)") }
        defer { socket.close() }
        do throws(SystemCallError) {
            try socket.bindToDevice(interface)
            if try !socket.connect(to: address) {
                guard try wait(socket, .writable, deadline) else { return .failed("connect: no answer within \(Int(Self.timeoutSeconds)) s") }
                if let e = try socket.pendingError() { return .failed("connect: \(e)") }
            }
        } catch { return .failed("\(error)") }
        var session: OpaquePointer?
        defer { if let session { CTunnelgateTLS_free(session) } }
        var error = [CChar](repeating: 0, count: 512)
        func tlsText() -> String { String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        if tls {
            let file = FileSystem.exists(Self.trustStoreFile) ? Self.trustStoreFile : nil
            guard let s = CTunnelgateTLS_client(socket.rawValue, host, file, Self.trustStoreDirectory, 0, 0, &error, error.count) else {
                return .failed("TLS: \(tlsText())")
            }
            session = s
            while true {
                let rc = CTunnelgateTLS_handshake(s, &error, error.count)
                if rc == CTunnelgateTLS_done { break }
                if rc == CTunnelgateTLS_failed { return .failed("TLS: \(tlsText())") }
                do throws(SystemCallError) {
                    guard try wait(socket, rc == CTunnelgateTLS_want_write ? .writable : .readable, deadline) else {
                        return .failed("TLS handshake: no answer within \(Int(Self.timeoutSeconds)) s")
                    }
                } catch { return .failed("\(error)") }
            }
        }
        // The request (small: one write nearly always).
        let request = Self.request(url, host: host)
        var sent = 0
        while sent < request.count {
            var want: PollSet.Events = .writable
            do throws(SystemCallError) {
                if let session {
                    let n = request[sent...].withUnsafeBytes { CTunnelgateTLS_write(session, $0.baseAddress, $0.count, &error, error.count) }
                    if n > 0 { sent += n; continue }
                    if n == CTunnelgateTLS_failed { return .failed("TLS: \(tlsText())") }
                    if n == CTunnelgateTLS_want_read { want = .readable }
                } else if let n = try socket.send(request, from: sent) {
                    sent += n; continue
                }
                guard try wait(socket, want, deadline) else { return .failed("sending: no progress within \(Int(Self.timeoutSeconds)) s") }
            } catch { return .failed("sending: \(error)") }
        }
        // The status line.
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        while true {
            if let code = Self.statusCode(in: answer) {
                guard let code else { return .failed("the answer is not HTTP/1.x") }
                return .status(code)
            }
            var want: PollSet.Events = .readable
            do throws(SystemCallError) {
                if let session {
                    let n = CTunnelgateTLS_read(session, &buffer, buffer.count, &error, error.count)
                    if n > 0 { answer += buffer[0..<n]; continue }
                    if n == CTunnelgateTLS_closed { return .failed("the server closed the connection before a status line") }
                    if n == CTunnelgateTLS_failed { return .failed("TLS: \(tlsText())") }
                    if n == CTunnelgateTLS_want_write { want = .writable }
                } else if let n = try socket.read(into: &buffer) {
                    if n == 0 { return .failed("the server closed the connection before a status line") }
                    answer += buffer[0..<n]; continue
                }
                guard try wait(socket, want, deadline) else { return .failed("no answer within \(Int(Self.timeoutSeconds)) s") }
            } catch { return .failed("reading: \(error)") }
        }
    }

    private func wait(_ socket: FileDescriptor, _ events: PollSet.Events, _ deadline: Double) throws(SystemCallError) -> Bool {
        let left = Int32(max(0, (deadline - ProcessControl.monotonicSeconds()) * 1000))
        guard left > 0 else { return false }
        var set = PollSet()
        _ = set.add(socket, events)
        return try set.wait(timeoutMilliseconds: left) > 0
    }

    // MARK: The probe's host

    func resolve(_ host: String, port: UInt16, deadline: Double) -> Result<[SocketAddress], CarrierResolver.Failure> {
        if let literal = CarrierResolver.socketAddress(literal: host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port: port) {
            return .success([literal])
        }
        let hosts = ((try? FileSystem.read("/etc/hosts")) ?? nil).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let listed = CarrierResolver.hostsAddresses(of: host, inHosts: hosts).compactMap { CarrierResolver.socketAddress(literal: $0, port: port) }
        if !listed.isEmpty { return .success(listed) }
        guard !nameservers.isEmpty else { return .failure(.init(description: "cannot resolve '\(host)': the network has no nameserver and /etc/hosts does not name it")) }
        var problems: [String] = []
        for server in nameservers {
            let left = Int32(max(0, (deadline - ProcessControl.monotonicSeconds()) * 1000))
            guard left > 0 else { break }
            switch query(host, server: server, timeoutMilliseconds: min(left, 1500)) {
            case .success(let found) where !found.isEmpty: return .success(found.map { $0.withPort(port) })
            case .success: problems.append("\(server.numericHost ?? "?"): no address")
            case .failure(let why): problems.append("\(server.numericHost ?? "?"): \(why.description)")
            }
        }
        return .failure(.init(description: "cannot resolve '\(host)': \(problems.isEmpty ? "no time left" : problems.joined(separator: "; "))"))
    }

    /// A and AAAA for `name` from `server` over UDP bound to the primary link: IPv4 first (a test
    /// network and most probes answer there), then IPv6.
    private func query(_ name: String, server: SocketAddress, timeoutMilliseconds: Int32) -> Result<[SocketAddress], CarrierResolver.Failure> {
        let socket: FileDescriptor
        do throws(SystemCallError) {
            socket = try FileDescriptor.socket(family: server.family, type: .datagram, nonBlocking: true)
        } catch { return .failure(.init(description: "\(error)")) }
        defer { socket.close() }
        var ids: [UInt16: UInt16] = [:]
        do throws(SystemCallError) {
            try socket.bindToDevice(interface)
            try socket.setMark(Self.queryMark)
            try socket.connect(to: server)
            for type in [DNSMessage.a, DNSMessage.aaaa] {
                var id = UInt16.random(in: .min ... .max)
                while ids[id] != nil { id = UInt16.random(in: .min ... .max) }
                ids[id] = type
                _ = try socket.send(DNSMessage.query(id: id, name: name, type: type))
            }
        } catch { return .failure(.init(description: "\(error)")) }
        var v4: [SocketAddress] = [], v6: [SocketAddress] = []
        let deadline = ProcessControl.monotonicSeconds() + Double(timeoutMilliseconds) / 1000
        var buffer = [UInt8](repeating: 0, count: 4096)
        var lastProblem: String?
        while !ids.isEmpty {
            do throws(SystemCallError) {
                guard try wait(socket, .readable, deadline) else { break }
                guard let n = try socket.receive(into: &buffer), n >= 2 else { continue }
                let reply = Array(buffer[0..<n])
                let id = UInt16(reply[0]) << 8 | UInt16(reply[1])
                guard let type = ids.removeValue(forKey: id) else { continue }
                switch DNSMessage.addresses(in: reply, id: id, type: type) {
                case .success(let found):
                    for bytes in found { if bytes.count == 16 { v6.append(.ipv6(bytes, port: 0)) } else { v4.append(.ipv4(bytes, port: 0)) } }
                case .failure(let problem): lastProblem = problem.description
                }
            } catch { return .failure(.init(description: "\(error)")) }
        }
        if v4.isEmpty && v6.isEmpty {
            if !ids.isEmpty { return .failure(.init(description: "no answer within \(timeoutMilliseconds) ms")) }
            if let lastProblem { return .failure(.init(description: lastProblem)) }
        }
        return .success(v4 + v6)
    }
}
