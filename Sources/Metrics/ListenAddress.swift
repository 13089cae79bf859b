import LinuxSystem
import TunnelgateSettings

/// Where the collector listens: `ADDR:PORT`, `[IPV6]:PORT` or `localhost:PORT`.
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public let address: IPAddress
    public let port: UInt16

    /// 127.0.0.1:9587. Loopback: nobody but this host (this namespace) reads the tunnels' metrics.
    /// Prometheus's list of exporter ports (9100–9999) is full; 9586 is the WireGuard exporter's, which
    /// people run beside a WireGuard tunnel, so not that one.
    public static let defaultValue = ListenAddress(address: .v4(IPv4Address(0x7f00_0001)), port: 9587)

    public init(address: IPAddress, port: UInt16) {
        self.address = address
        self.port = port
    }

    /// Parses `text`; the error says what is wrong with it.
    public static func parse(_ text: String) -> Result<ListenAddress, ListenAddressError> {
        let host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                return .failure(.init(text, "an IPv6 address is written [ADDRESS]:PORT"))
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return .failure(.init(text, "expected ADDRESS:PORT")) }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { return .failure(.init(text, "an IPv6 address is written [ADDRESS]:PORT")) }
        }
        guard !host.isEmpty else {
            return .failure(.init(text, "no address: give one, e.g. 127.0.0.1:\(portText.isEmpty ? "9587" : portText)"))
        }
        guard let port = UInt16(portText), port > 0 else { return .failure(.init(text, "the port must be a number from 1 to 65535")) }
        if host == "localhost" { return .success(ListenAddress(address: defaultValue.address, port: port)) }
        guard let address = IPAddress(host) else {
            return .failure(.init(text, "\(host) is not an IPv4 or IPv6 address (host names other than localhost are not resolved)"))
        }
        return .success(ListenAddress(address: address, port: port))
    }

    /// 127.0.0.0/8, ::1, or an IPv4-mapped 127.0.0.0/8 (::ffff:127.x.y.z).
    public var isLoopback: Bool {
        switch address {
        case .v4(let a): return a.isLoopback
        case .v6(let a): return a.isLoopback || (a.high == 0 && a.low >> 32 == 0xffff && a.low >> 24 & 0xff == 127)
        }
    }

    public var socketAddress: SocketAddress {
        switch address {
        case .v4(let a): .ipv4(a.bytes, port: port)
        case .v6(let a): .ipv6(a.bytes, port: port)
        }
    }

    public var description: String {
        switch address {
        case .v4(let a): "\(a):\(port)"
        case .v6(let a): "[\(a)]:\(port)"
        }
    }
}

/// A `--listen` value that is not an address and port.
public struct ListenAddressError: Error, Equatable, CustomStringConvertible {
    public let text: String
    public let reason: String
    init(_ text: String, _ reason: String) {
        self.text = text
        self.reason = reason
    }
    public var description: String { "--listen \(text): \(reason)" }
}
