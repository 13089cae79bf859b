import Foundation

/// NWEndpoint: where a provider's own connection goes (NetworkExtension's, not Network.framework's).
/// Abstract, as on iOS: make an NWHostEndpoint or an NWBonjourServiceEndpoint.
open class NWEndpoint: NSObject, @unchecked Sendable {
    // @unchecked Sendable: the subclasses are immutable.
    override init() { super.init() }
}

/// NWHostEndpoint: a host name or address literal and a port, both text as on iOS
/// (`NWHostEndpoint(hostname: "vpn.example.com", port: "443")`).
///
/// The port is a decimal number 0–65535 (`"443"`); iOS also accepts a service name, and so does this
/// (`"https"`: /etc/services' TCP or UDP entry). What a connection cannot use is refused when the
/// connection starts, with the reason as its error (`TunnelgateEndpointProblem`).
open class NWHostEndpoint: NWEndpoint, @unchecked Sendable {
    // @unchecked Sendable: immutable.
    public let hostname: String
    public let port: String

    public init(hostname: String, port: String) {
        self.hostname = hostname
        self.port = port
        super.init()
    }

    /// `HOST:PORT`, `[V6]:PORT` for an IPv6 literal.
    open override var description: String {
        hostname.contains(":") ? "[\(hostname)]:\(port)" : "\(hostname):\(port)"
    }

    open override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? NWHostEndpoint else { return false }
        return hostname == other.hostname && port == other.port
    }

    open override var hash: Int {
        var h = Hasher()
        h.combine(hostname)
        h.combine(port)
        return h.finalize()
    }
}

/// NWBonjourServiceEndpoint: a DNS-SD service instance (`name`, `type` such as `_vpn._tcp`, `domain`).
/// Present so that a provider naming one compiles; a connection to one fails when it starts
/// (`TunnelgateEndpointProblem.bonjourUnavailable`): resolving a service needs mDNS on the local link
/// (multicast to 224.0.0.251:5353, answered by every host's responder), which a provider's sandboxed
/// plane has no responder or daemon for, and its carrier identity is exempted only for the tunnel's
/// carrier endpoints, never for a multicast group.
open class NWBonjourServiceEndpoint: NWEndpoint, @unchecked Sendable {
    // @unchecked Sendable: immutable.
    public let name: String
    public let type: String
    public let domain: String

    public init(name: String, type: String, domain: String) {
        self.name = name
        self.type = type
        self.domain = domain
        super.init()
    }

    open override var description: String { "\(name).\(type).\(domain)" }

    open override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? NWBonjourServiceEndpoint else { return false }
        return name == other.name && type == other.type && domain == other.domain
    }

    open override var hash: Int {
        var h = Hasher()
        h.combine(name)
        h.combine(type)
        h.combine(domain)
        return h.finalize()
    }
}

/// Why an endpoint cannot be connected to (Linux only): the error a connection fails with, in
/// NSPOSIXErrorDomain-free words, naming the endpoint.
public enum TunnelgateEndpointProblem: Error, Equatable, Sendable, CustomStringConvertible {
    /// The host name is empty, too long (more than 253 bytes), has an empty or over-long (63) label,
    /// or a character a host name cannot hold.
    case invalidHostname(String)
    /// The port is neither a number 0–65535 nor a service /etc/services names.
    case invalidPort(String)
    /// Port 0 for a remote endpoint.
    case zeroPort(String)
    /// An NWBonjourServiceEndpoint (see its documentation).
    case bonjourUnavailable(String)
    /// An NWEndpoint that is neither a host endpoint nor a Bonjour one.
    case unsupported(String)

    public var description: String {
        switch self {
        case .invalidHostname(let h): "invalid host name '\(h)': not an address literal or a DNS name (labels of 1-63 letters, digits, '-' or '_', 253 bytes at most)"
        case .invalidPort(let p): "invalid port '\(p)': not a number 0-65535 or a service name in /etc/services"
        case .zeroPort(let e): "\(e): port 0 cannot be connected to"
        case .bonjourUnavailable(let e): "\(e): Bonjour service endpoints cannot be resolved on Linux (no mDNS responder in the provider's sandbox; the carrier exemption does not cover multicast)"
        case .unsupported(let e): "\(e): only NWHostEndpoint and NWBonjourServiceEndpoint are endpoints"
        }
    }
}

/// An endpoint as a connection uses it: the host (an address literal, without brackets, or a DNS
/// name without its trailing dot) and the port number. Pure.
struct ParsedEndpoint: Equatable, Sendable {
    enum Host: Equatable, Sendable {
        case address(String)
        case name(String)
    }
    let host: Host
    let port: UInt16

    /// Parses `endpoint`; `services` answers a service name's port (for `"https"`), nil when unknown.
    static func parse(_ endpoint: NWEndpoint, allowZeroPort: Bool = false,
                      services: (String) -> UInt16? = { _ in nil }) throws(TunnelgateEndpointProblem) -> ParsedEndpoint {
        if endpoint is NWBonjourServiceEndpoint { throw .bonjourUnavailable(endpoint.description) }
        guard let host = endpoint as? NWHostEndpoint else { throw .unsupported(endpoint.description) }
        let port: UInt16
        if let n = UInt16(host.port), host.port.allSatisfy(\.isASCII) {
            port = n
        } else if !host.port.isEmpty, host.port.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }),
                  let n = services(host.port) {
            port = n
        } else {
            throw .invalidPort(host.port)
        }
        if port == 0 && !allowZeroPort { throw .zeroPort(host.description) }
        return ParsedEndpoint(host: try parseHost(host.hostname), port: port)
    }

    static func parseHost(_ text: String) throws(TunnelgateEndpointProblem) -> Host {
        var h = text
        if h.hasPrefix("[") && h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        if isAddressLiteral(h) { return .address(h) }
        if h.hasSuffix(".") { h.removeLast() }
        let labels = h.split(separator: ".", omittingEmptySubsequences: false)
        guard !h.isEmpty, h.utf8.count <= 253,
              labels.allSatisfy({ label in
                  !label.isEmpty && label.utf8.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                      && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
              }),
              // All-numeric dotted text that is not an IPv4 literal (`1.2.3`, `300.1.1.1`) is a typo, not a name.
              !labels.allSatisfy({ $0.allSatisfy(\.isNumber) })
        else { throw .invalidHostname(text) }
        return .name(h.lowercased())
    }

    /// An IPv4 dotted quad or an IPv6 literal (with an optional `%scope`).
    static func isAddressLiteral(_ text: String) -> Bool {
        let quad = text.split(separator: ".", omittingEmptySubsequences: false)
        if quad.count == 4, quad.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isNumber) && Int($0)! <= 255 }) {
            return true
        }
        let bare = text.split(separator: "%", maxSplits: 1).first.map(String.init) ?? text
        guard bare.contains(":"), bare.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return false }
        return IPv6Text.bytes(bare) != nil
    }
}

/// IPv6 literal text to its 16 bytes (RFC 4291's forms, an IPv4 tail included). Pure.
enum IPv6Text {
    static func bytes(_ text: String) -> [UInt8]? {
        var head: [UInt16] = [], tail: [UInt16] = []
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ part: String, allowV4: Bool) -> [UInt16]? {
            if part.isEmpty { return [] }
            var out: [UInt16] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (i, piece) in pieces.enumerated() {
                if allowV4 && i == pieces.count - 1 && piece.contains(".") {
                    let q = piece.split(separator: ".", omittingEmptySubsequences: false)
                    guard q.count == 4, let b = Optional(q.compactMap { UInt8($0) }), b.count == 4 else { return nil }
                    out.append(UInt16(b[0]) << 8 | UInt16(b[1]))
                    out.append(UInt16(b[2]) << 8 | UInt16(b[3]))
                } else {
                    guard (1...4).contains(piece.count), let g = UInt16(piece, radix: 16) else { return nil }
                    out.append(g)
                }
            }
            return out
        }
        if halves.count == 2 {
            guard let h = groups(halves[0], allowV4: false), let t = groups(halves[1], allowV4: true), h.count + t.count <= 7 else { return nil }
            head = h; tail = t
        } else {
            guard let h = groups(halves[0], allowV4: true), h.count == 8 else { return nil }
            head = h
        }
        let all = head + [UInt16](repeating: 0, count: 8 - head.count - tail.count) + tail
        return all.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xff)] }
    }
}
