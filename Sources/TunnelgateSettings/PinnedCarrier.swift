/// The transport of a carrier endpoint's traffic.
public enum CarrierTransport: String, Sendable, Hashable, CaseIterable, Codable {
    case udp, tcp

    /// The IP protocol number (IPPROTO_UDP, IPPROTO_TCP).
    public var protocolNumber: UInt8 { self == .udp ? 17 : 6 }
}

/// A carrier endpoint resolved to one address, pinned for the tunnel's life:
/// the routing rules and the kill switch name exactly this address (and port
/// and transport), and a runtime that was given a host name sends to it, so
/// a later DNS answer cannot move the exemption somewhere else.
public struct PinnedCarrier: Sendable, Hashable, CustomStringConvertible, Codable {
    public var address: IPAddress
    public var port: UInt16?
    /// nil: UDP and TCP when a port is given, any protocol without one.
    public var transport: CarrierTransport?
    /// The host name it was resolved from, when it was given by name.
    public var hostName: String?

    public init(address: IPAddress, port: UInt16? = nil, transport: CarrierTransport? = nil, hostName: String? = nil) {
        self.address = address
        self.port = port
        self.transport = transport
        self.hostName = hostName
    }

    /// The transports the exemption covers: the one given, or both with a port, or none (any protocol).
    public var transports: [CarrierTransport] {
        if let transport { return [transport] }
        return port == nil ? [] : CarrierTransport.allCases
    }

    /// `198.18.0.10:51820/udp`, `[2001:db8::10]:443`, `198.18.0.10` (any port and protocol).
    public var endpointText: String {
        let host = port != nil && address.family == .ipv6 ? "[\(address)]" : address.description
        var text = port.map { "\(host):\($0)" } ?? host
        if let transport { text += "/\(transport.rawValue)" }
        return text
    }

    public var description: String { endpointText + (hostName.map { " (\($0))" } ?? "") }
}

extension TunnelSettings {
    /// Resolves every carrier endpoint once: each address a name resolves to becomes a pinned carrier
    /// with the endpoint's port and transport. Every endpoint must resolve; each failure is reported
    /// under its key path. An entry another one covers (same address, no port) is dropped.
    public func pinCarrierEndpoints(using resolver: some HostResolver) throws(ConfigurationError) -> [PinnedCarrier] {
        var pinned: [PinnedCarrier] = []
        var problems: [ConfigProblem] = []
        for endpoint in carrierEndpoints {
            switch endpoint.host {
            case .address(let a):
                pinned.append(PinnedCarrier(address: a, port: endpoint.port, transport: endpoint.transport))
            case .name(let name):
                switch resolver.resolve(name) {
                case .success(let resolved) where !resolved.isEmpty:
                    pinned += resolved.map { PinnedCarrier(address: $0, port: endpoint.port, transport: endpoint.transport, hostName: name) }
                case .success:
                    problems.append(ConfigProblem(path: endpoint.keyPath, reason: "'\(name)' resolves to no address"))
                case .failure(let failure):
                    problems.append(ConfigProblem(path: endpoint.keyPath, reason: "'\(name)' does not resolve (\(failure.reason))"))
                }
            }
        }
        guard problems.isEmpty else { throw ConfigurationError(problems) }
        var seen = Set<PinnedCarrier>()
        let unique = pinned.filter { seen.insert(PinnedCarrier(address: $0.address, port: $0.port, transport: $0.transport)).inserted }
        // An address exempt on every port makes its port-bound entries redundant.
        let wholeHosts = Set(unique.filter { $0.port == nil }.map(\.address))
        return unique.filter { $0.port == nil || !wholeHosts.contains($0.address) }
    }
}
