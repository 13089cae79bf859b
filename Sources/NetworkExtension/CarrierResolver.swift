import Foundation
import LinuxSystem
import Synchronization

/// How a provider's own connections resolve host names: outside the tunnel, as iOS resolves them on the
/// provider's carrier path, never with the tunnel's DNS settings.
///
/// The resolver is the one the namespace had before the tunnel: `/etc/resolv.conf` as the provider's
/// packet plane sees it when it starts, which is before startTunnel and so before any
/// setTunnelNetworkSettings (a provider's plane is never restarted). Its `nameserver` lines are kept
/// (`snapshot()`); later the tunnel's dnsSettings may rewrite that file, and are not used. A name is
/// looked up in `/etc/hosts` first (read at each lookup), then with A and AAAA queries over UDP, sent
/// by the plane itself to each kept server in turn (2 s each, at most three servers). The queries are
/// the plane's sockets, so they carry its carrier identity, which a provider's tunnel exempts to every
/// destination (CarrierIdentity.userAnywhere): they leave outside the tunnel, by the routes the namespace
/// would take without it, and the kill switch (includeAllNetworks) lets them out, as the provider's
/// connections do; nobody else's DNS packets get past the tunnel that way. A name is queried as
/// given (no search domains). A resolver in the plane's own reach is needed because glibc's
/// getaddrinfo would read the file as it is at the time of the lookup.
enum CarrierResolver {
    /// What a failed resolution says.
    struct Failure: Error, Equatable, CustomStringConvertible {
        let description: String
    }

    private static let kept = Mutex<[SocketAddress]?>(nil)

    /// Keeps the nameservers of /etc/resolv.conf now (the plane calls it before startTunnel; a
    /// later call does nothing). The first lookup calls it when nothing did.
    static func snapshot(path: String = "/etc/resolv.conf") {
        kept.withLock { servers in
            guard servers == nil else { return }
            servers = nameservers(inResolvConf: ((try? FileSystem.read(path)) ?? nil).map { String(decoding: $0, as: UTF8.self) } ?? "")
        }
    }

    static var nameservers: [SocketAddress] {
        snapshot()
        return kept.withLock { $0 ?? [] }
    }

    /// The `nameserver ADDRESS` lines of a resolv.conf, as port-53 addresses, at most three (glibc's
    /// MAXNS). A line that is not an address is skipped. Pure.
    static func nameservers(inResolvConf text: String) -> [SocketAddress] {
        var out: [SocketAddress] = []
        for line in text.split(whereSeparator: \.isNewline) {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard words.count >= 2, words[0] == "nameserver", let a = SocketAddress.numeric(String(words[1]), port: 53) else { continue }
            if out.count < 3 { out.append(a) }
        }
        return out
    }

    /// The addresses /etc/hosts gives `name` (compared ignoring case), in the file's order. Pure.
    static func hostsAddresses(of name: String, inHosts text: String) -> [String] {
        var out: [String] = []
        for line in text.split(whereSeparator: \.isNewline) {
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let words = content.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard words.count >= 2, ParsedEndpoint.isAddressLiteral(String(words[0])) else { continue }
            if words.dropFirst().contains(where: { $0.lowercased() == name.lowercased() }) { out.append(String(words[0])) }
        }
        return out
    }

    /// The addresses of `host`, each with `port`: a literal as it is, else /etc/hosts, else DNS.
    static func resolve(_ host: ParsedEndpoint.Host, port: UInt16, cancelled: () -> Bool) throws(Failure) -> [SocketAddress] {
        switch host {
        case .address(let text):
            guard let a = socketAddress(literal: text, port: port) else { throw Failure(description: "'\(text)' is not a usable address") }
            return [a]
        case .name(let name):
            let hosts = ((try? FileSystem.read("/etc/hosts")) ?? nil).map { String(decoding: $0, as: UTF8.self) } ?? ""
            let listed = hostsAddresses(of: name, inHosts: hosts).compactMap { socketAddress(literal: $0, port: port) }
            if !listed.isEmpty { return listed }
            let servers = nameservers
            guard !servers.isEmpty else {
                throw Failure(description: "cannot resolve '\(name)': no nameserver in /etc/resolv.conf as it was when the provider started, and not in /etc/hosts")
            }
            var problems: [String] = []
            for server in servers {
                if cancelled() { throw Failure(description: "cancelled") }
                do throws(Failure) {
                    let found = try query(name, server: server, timeoutMilliseconds: 2000)
                    if !found.isEmpty { return found.map { $0.withPort(port) } }
                    problems.append("\(server.numericHost ?? "?"): no address")
                } catch {
                    problems.append("\(server.numericHost ?? "?"): \(error.description)")
                }
            }
            throw Failure(description: "cannot resolve '\(name)': \(problems.joined(separator: "; "))")
        }
    }

    static func socketAddress(literal text: String, port: UInt16) -> SocketAddress? {
        let parts = text.split(separator: "%", maxSplits: 1).map(String.init)
        guard let a = SocketAddress.numeric(parts[0], port: port) else { return nil }
        if parts.count == 2, case .ipv6(let bytes, let p, _) = a {
            guard let scope = UInt32(parts[1]) ?? SocketAddress.interfaceIndex(named: parts[1]) else { return nil }
            return .ipv6(bytes, port: p, scope: scope)
        }
        return a
    }

    /// A and AAAA for `name` from one server over UDP: the IPv6 addresses first, then IPv4 (as
    /// getaddrinfo orders them by default), each with port 0.
    static func query(_ name: String, server: SocketAddress, timeoutMilliseconds: Int32) throws(Failure) -> [SocketAddress] {
        let socket: FileDescriptor
        do throws(SystemCallError) {
            socket = try FileDescriptor.socket(family: server.family, type: .datagram, nonBlocking: true)
        } catch { throw Failure(description: "\(error)") }
        defer { socket.close() }
        var ids: [UInt16: UInt16] = [:]   // id → type
        do throws(SystemCallError) {
            try socket.connect(to: server)
            for type in [DNSMessage.aaaa, DNSMessage.a] {
                var id = UInt16.random(in: .min ... .max)
                while ids[id] != nil { id = UInt16.random(in: .min ... .max) }
                ids[id] = type
                let q = DNSMessage.query(id: id, name: name, type: type)
                _ = try socket.send(q)
            }
        } catch { throw Failure(description: "\(error)") }
        var v6: [SocketAddress] = [], v4: [SocketAddress] = []
        let deadline = ProcessControl.monotonicSeconds() + Double(timeoutMilliseconds) / 1000
        var buffer = [UInt8](repeating: 0, count: 4096)
        var lastProblem: String?
        while !ids.isEmpty {
            let left = Int32(max(0, (deadline - ProcessControl.monotonicSeconds()) * 1000))
            if left == 0 { break }
            var set = PollSet()
            set.add(socket, .readable)
            do throws(SystemCallError) {
                guard try set.wait(timeoutMilliseconds: left) > 0 else { break }
                guard let n = try socket.receive(into: &buffer) else { continue }
                let reply = Array(buffer[0..<n])
                guard reply.count >= 2 else { continue }
                let id = UInt16(reply[0]) << 8 | UInt16(reply[1])
                guard let type = ids.removeValue(forKey: id) else { continue }
                switch DNSMessage.addresses(in: reply, id: id, type: type) {
                case .success(let found):
                    for bytes in found {
                        if bytes.count == 16 { v6.append(.ipv6(bytes, port: 0)) } else { v4.append(.ipv4(bytes, port: 0)) }
                    }
                case .failure(let problem):
                    lastProblem = problem.description
                }
            } catch {
                throw Failure(description: "\(error)")
            }
        }
        if v6.isEmpty && v4.isEmpty {
            if !ids.isEmpty { throw Failure(description: "no answer within \(timeoutMilliseconds) ms") }
            if let lastProblem { throw Failure(description: lastProblem) }
        }
        return v6 + v4
    }
}

/// DNS messages (RFC 1035) as the carrier resolver sends and reads them. Pure.
enum DNSMessage {
    static let a: UInt16 = 1
    static let aaaa: UInt16 = 28
    static let cname: UInt16 = 5

    struct Problem: Error, Equatable, CustomStringConvertible {
        let description: String
    }

    /// A recursive query for `name` (a valid host name) of `type`, class IN.
    static func query(id: UInt16, name: String, type: UInt16) -> [UInt8] {
        var m: [UInt8] = [UInt8(id >> 8), UInt8(id & 0xff), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]
        for label in name.split(separator: ".") {
            let bytes = Array(label.utf8)
            m.append(UInt8(bytes.count))
            m += bytes
        }
        m += [0, UInt8(type >> 8), UInt8(type & 0xff), 0, 1]
        return m
    }

    /// The addresses of the answer section's records of `type` (4 bytes for A, 16 for AAAA) in a reply
    /// to query `id`; CNAMEs are followed by taking every record of the type the server included.
    static func addresses(in reply: [UInt8], id: UInt16, type: UInt16) -> Result<[[UInt8]], Problem> {
        guard reply.count >= 12 else { return .failure(Problem(description: "a reply shorter than its header")) }
        guard UInt16(reply[0]) << 8 | UInt16(reply[1]) == id else { return .failure(Problem(description: "a reply to another query")) }
        guard reply[2] & 0x80 != 0 else { return .failure(Problem(description: "a query, not a reply")) }
        if reply[2] & 0x02 != 0 { return .failure(Problem(description: "a truncated reply (TCP is not tried)")) }
        let rcode = reply[3] & 0x0f
        switch rcode {
        case 0: break
        case 3: return .success([])   // NXDOMAIN: no such name
        case 2: return .failure(Problem(description: "the server failed (SERVFAIL)"))
        case 5: return .failure(Problem(description: "the server refused the query (REFUSED)"))
        default: return .failure(Problem(description: "the server answered with error code \(rcode)"))
        }
        let questions = Int(reply[4]) << 8 | Int(reply[5])
        let answers = Int(reply[6]) << 8 | Int(reply[7])
        var offset = 12
        for _ in 0..<questions {
            guard let end = skipName(reply, from: offset), end + 4 <= reply.count else { return .failure(Problem(description: "a malformed question")) }
            offset = end + 4
        }
        var out: [[UInt8]] = []
        for _ in 0..<answers {
            guard let end = skipName(reply, from: offset), end + 10 <= reply.count else { return .failure(Problem(description: "a malformed answer")) }
            let rtype = UInt16(reply[end]) << 8 | UInt16(reply[end + 1])
            let rclass = UInt16(reply[end + 2]) << 8 | UInt16(reply[end + 3])
            let length = Int(reply[end + 8]) << 8 | Int(reply[end + 9])
            let data = end + 10
            guard data + length <= reply.count else { return .failure(Problem(description: "an answer longer than the reply")) }
            if rclass == 1 && rtype == type && length == (type == aaaa ? 16 : 4) { out.append(Array(reply[data..<(data + length)])) }
            offset = data + length
        }
        return .success(out)
    }

    /// The offset after the (possibly compressed) name at `offset`; nil when it runs off the message
    /// or is not a name.
    static func skipName(_ m: [UInt8], from offset: Int) -> Int? {
        var i = offset
        while i < m.count {
            let length = m[i]
            if length == 0 { return i + 1 }
            if length & 0xc0 == 0xc0 { return i + 2 <= m.count ? i + 2 : nil }
            if length & 0xc0 != 0 { return nil }
            i += 1 + Int(length)
        }
        return nil
    }
}
