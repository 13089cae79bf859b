/// `{"kind": "wireguard", …}` or a wg-quick file: the built-in userspace
/// WireGuard runtime's interface and peers, as wg(8) configures them.
///
/// Routes, addresses and DNS are not here: they are the tunnel's
/// `TunnelSettings`. Keys never show in a description (`SecretKey`).
public struct WireGuardSettings: Sendable, Equatable {
    /// A peer's address: a host name or IP address, and a port.
    public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        public var host: CarrierEndpoint.Host
        public var port: UInt16

        public init(host: CarrierEndpoint.Host, port: UInt16) {
            self.host = host
            self.port = port
        }

        /// `HOST:PORT`, `IPV4:PORT` or `[IPV6]:PORT`, port 1–65535 (a port is
        /// required, as wg(8) requires it); a reason otherwise.
        public static func parse(_ text: String) -> Result<Endpoint, CarrierEndpoint.ParseError> {
            switch CarrierEndpoint.parse(text) {
            case .failure(let error): return .failure(error)
            case .success(let endpoint):
                guard let port = endpoint.port else {
                    if case .address(.v6) = endpoint.host {
                        return .failure(.invalid("'\(text)' has no port; write an IPv6 endpoint as [ADDRESS]:PORT"))
                    }
                    return .failure(.invalid("'\(text)' has no port (HOST:PORT)"))
                }
                return .success(Endpoint(host: endpoint.host, port: port))
            }
        }

        /// The carrier endpoint of this peer: UDP to its address and port.
        public func carrier(keyPath: String) -> CarrierEndpoint {
            CarrierEndpoint(host: host, port: port, transport: .udp, keyPath: keyPath)
        }

        public var description: String { CarrierEndpoint(host: host, port: port).description }
    }

    /// One `[Peer]`.
    public struct Peer: Sendable, Equatable {
        /// The peer's Curve25519 public key (32 bytes).
        public var publicKey: [UInt8]
        public var presharedKey: SecretKey?
        /// Where to send the first handshake; nil: wait for the peer (it roams in).
        public var endpoint: Endpoint?
        /// The peer's cryptokey routing: where packets to it may go and from
        /// which sources its packets are accepted. Network prefixes (no host bits).
        public var allowedIPs: [IPPrefix]
        /// Seconds between keepalives; nil: off (0 or `off` in a file).
        public var persistentKeepalive: UInt16?

        public init(publicKey: [UInt8], presharedKey: SecretKey? = nil, endpoint: Endpoint? = nil,
                    allowedIPs: [IPPrefix] = [], persistentKeepalive: UInt16? = nil) {
            precondition(publicKey.count == 32, "a WireGuard public key is 32 bytes")
            self.publicKey = publicKey
            self.presharedKey = presharedKey
            self.endpoint = endpoint
            self.allowedIPs = allowedIPs
            self.persistentKeepalive = persistentKeepalive
        }
    }

    /// The MTU a wg-quick file, or a JSON file with this runtime and no
    /// `mtu`, gets: 1500 less WireGuard's 80 bytes of IPv6 + UDP + header.
    public static let defaultMTU = 1420

    public var privateKey: SecretKey
    /// The UDP port to listen on; nil: one the kernel picks (0 in a file).
    public var listenPort: UInt16?
    /// The mark of the device's UDP packets; nil: the tunnel slot's mark,
    /// which the tunnel's routing rule already exempts (0 or `off` in a file).
    public var fwMark: UInt32?
    public var peers: [Peer]

    public init(privateKey: SecretKey, listenPort: UInt16? = nil, fwMark: UInt32? = nil, peers: [Peer] = []) {
        self.privateKey = privateKey
        self.listenPort = listenPort
        self.fwMark = fwMark
        self.peers = peers
    }
}

extension WireGuardSettings {
    /// The same settings with every key replaced by a stand-in of zeros: what the engine keeps once the
    /// keys are handed to the packet plane, so that the key memory it read is released (and wiped) and
    /// no second copy stays in the engine.
    public func withoutKeys() -> WireGuardSettings {
        var copy = self
        copy.privateKey = Self.placeholderPrivateKey
        for i in copy.peers.indices where copy.peers[i].presharedKey != nil { copy.peers[i].presharedKey = Self.placeholderPrivateKey }
        return copy
    }

    /// Stand in for keys a translator could not read (its problem says why); never returned.
    static let placeholderPublicKey = [UInt8](repeating: 0, count: 32)
    static var placeholderPrivateKey: SecretKey { SecretKey(bytes: placeholderPublicKey)! }
}
