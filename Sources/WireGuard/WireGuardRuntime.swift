import Glibc
import LinuxSystem
import RuntimeABI
import TUN
import TunnelgateSettings

/// The built-in userspace WireGuard as a hosted runtime: `tunnelgate up
/// wg0.conf`, or `"runtime": {"kind": "wireguard", …}` in JSON. It reads
/// and writes the TUN itself (fd path) on its device thread.
public final class WireGuardRuntime: HostedRuntime {
    public let packetPath = PacketPath.fd
    public var startTimeout: Double { 5 }
    public var tunWriter: TunWriter? { nil }
    /// The device segments TCP super-packets itself and writes a virtio_net_hdr before every packet
    /// (unless `offloadsVariable` is `off`).
    public var wantsTunOffloads: Bool { offloads }
    /// `off` makes the TUN a plain one (a packet per read) and sends a datagram per message (no
    /// UDP_SEGMENT): for measuring what the offloads bring (docs/performance.md), not for use.
    public static let offloadsVariable = "TUNNELGATE_WIREGUARD_OFFLOADS"
    private let offloads = getenv(WireGuardRuntime.offloadsVariable).map { String(cString: $0) } != "off"

    let device: WireGuardDevice
    let settings: WireGuardSettings
    private var interfaceName: String?
    private var slotMark: UInt32?
    /// Peers whose endpoint is a host name, pinned by `attach` to the plan's resolved address.
    private var namedEndpoints: [(WireGuardKey, String, UInt16)] = []
    private var unpinned: [String] = []
    private var started = false
    private var stopped = false
    /// Where wg(8) looks for userspace interfaces.
    public static let socketDirectory = "/var/run/wireguard"

    /// Binds the UDP port and takes the keys: every check that can fail
    /// before the kernel is touched.
    public init(_ settings: WireGuardSettings, log: @escaping @Sendable (String) -> Void = { _ in }) throws(RuntimeError) {
        self.settings = settings
        let timers = WireGuardTimers.fromEnvironment()
        if timers.scale != 1 { log("WireGuard timers scaled by \(timers.scale) (\(WireGuardTimers.testScaleVariable); for tests only)") }
        // The configuration's key memory itself (SecureBytes): the device's one copy of the key.
        guard let key = PrivateKey(settings.privateKey) else {
            throw RuntimeError("the WireGuard private key is not a usable X25519 key")
        }
        var peers: [DeviceConfiguration.PeerConfiguration] = []
        for (i, p) in settings.peers.enumerated() {
            guard let publicKey = WireGuardKey(p.publicKey) else {
                throw RuntimeError("peer \(i + 1): the public key is not 32 bytes")
            }
            // A host name is not resolved here: the engine resolved it once for the plan, and the peer
            // sends to the address the carrier exemption names (attach pins it).
            var endpoint: Endpoint?
            if let e = p.endpoint {
                switch e.host {
                case .address(let address): endpoint = Endpoint(address: address, port: e.port)
                case .name(let name): namedEndpoints.append((publicKey, name, e.port))
                }
            }
            peers.append(.init(publicKey: publicKey, presharedKey: p.presharedKey,
                               endpoint: endpoint,
                               allowedIPs: p.allowedIPs, persistentKeepalive: p.persistentKeepalive ?? 0))
        }
        device = try WireGuardDevice(DeviceConfiguration(privateKey: key, listenPort: settings.listenPort ?? 0,
                                                         fwmark: settings.fwMark ?? 0, peers: peers),
                                     timers: timers, log: log)
    }

    public var summary: String {
        "built-in WireGuard on UDP port \(device.boundPort), \(settings.peers.count) peer\(settings.peers.count == 1 ? "" : "s")"
    }

    public func attach(to plan: RuntimeContext) {
        interfaceName = plan.interfaceName
        slotMark = plan.carrierMark
        unpinned = []
        for (key, name, port) in namedEndpoints {
            let pinned = plan.carriers.first { $0.hostName == name && $0.port == port }
                ?? plan.carriers.first { $0.hostName == name }
            if let pinned {
                device.pin(endpoint: Endpoint(address: pinned.address, port: port), forPeer: key)
            } else {
                unpinned.append(name)
            }
        }
    }

    public func start(tun: FileDescriptor, mtu: Int) throws(RuntimeError) {
        guard unpinned.isEmpty else {
            throw RuntimeError("endpoint \(unpinned[0]): not among the plan's pinned carriers")
        }
        let name = interfaceName
        try device.start(tun: tun, mtu: mtu, fwmark: slotMark,
                         uapiPath: name.map { "\(Self.socketDirectory)/\($0).sock" }, udpSegmentation: offloads)
        started = true
    }

    public func status() throws(RuntimeError) -> RuntimeState {
        let s = device.snapshot()
        let phase: RuntimeState.Phase
        if let failure = s.failure {
            return RuntimeState(phase: .failed, interface: nil, error: failure,
                                json: "{\"state\":\"failed\",\"interface\":null,\"error\":\(JSONValue.quoted(failure))}")
        } else if !s.running {
            phase = stopped ? .stopped : .starting
        } else if !s.peers.isEmpty, s.peers.allSatisfy({ !$0.hasSession && $0.handshakeAttempts >= 3 }) {
            // Every peer's handshake has gone unanswered three times: the carrier path is gone.
            phase = .reconnecting
        } else {
            phase = .ready
        }
        let interface = phase == .ready || phase == .reconnecting ? interfaceName : nil
        var json = "{\"state\":\"\(phase.rawValue)\",\"interface\":\(interface.map { JSONValue.quoted($0) } ?? "null"),"
        json += "\"packetPath\":\"fd\",\"kind\":\"wireguard\",\"listenPort\":\(s.listenPort),\"tunOffloads\":\(s.tunOffloads),\"peers\":["
        json += s.peers.map { p in
            var o = "{\"publicKey\":\"\(p.publicKey.base64)\",\"endpoint\":\(p.endpoint.map { JSONValue.quoted($0.description) } ?? "null"),"
            o += "\"allowedIPs\":[\(p.allowedIPs.map { "\"\($0)\"" }.joined(separator: ","))],"
            o += "\"latestHandshake\":\(p.lastHandshake),\"rxBytes\":\(p.rxBytes),\"txBytes\":\(p.txBytes),"
            o += "\"persistentKeepalive\":\(p.persistentKeepalive),\"session\":\(p.hasSession)}"
            return o
        }.joined(separator: ",")
        json += "],\(s.counters.json)}"
        return RuntimeState(phase: phase, interface: interface, error: nil, json: json)
    }

    public func packetIn(_ packet: UnsafePointer<UInt8>, _ len: Int) -> PacketDelivery { .refused }

    public func appMessage(_ bytes: [UInt8]) throws(RuntimeError) -> [UInt8] {
        let text = String(decoding: bytes, as: UTF8.self)
        switch text {
        case "status": return Array(try status().json.utf8)
        default: throw RuntimeError("unknown message \(JSONValue.quoted(text)) (the WireGuard runtime takes: status)")
        }
    }

    public func stop() {
        guard !stopped else { return }
        stopped = true
        device.stop()
    }
}
