import LinuxSystem
import RuntimeABI
import TUN
import TunnelgateSettings

/// The built-in userspace WireGuard as a hosted runtime: `tunnelgate up
/// wg0.conf`, or `"runtime": {"kind": "wireguard", …}` in JSON. It reads
/// and writes the TUN itself (fd path) on its device thread.
///
/// Two ways to make one, by who makes its sockets:
/// - `init(_:log:)`: the runtime makes them, for tests and tools that run the device in one
///   privileged process: UDP bound to ListenPort (any free port without one) and marked with FwMark
///   or the tunnel's carrier mark, the UAPI socket at /var/run/wireguard/NAME.sock; `wg set
///   listen-port` and `fwmark` work.
/// - `init(_:carrierSockets:timers:offloads:log:)`: the engine made them (`CarrierSockets`), for a
///   packet plane that may neither bind a low port nor mark a socket: used as they are, never bound or
///   marked here; `wg set listen-port` and `fwmark` are refused.
public final class WireGuardRuntime: HostedRuntime {
    /// Sockets the engine made and handed over: the UDP sockets bound to the tunnel's port (and
    /// marked with its carrier identity when that is a mark), and the listening UAPI socket (nil:
    /// none). The descriptors become the runtime's, closed when it stops.
    public struct CarrierSockets {
        public var ipv4: FileDescriptor?
        public var ipv6: FileDescriptor?
        public var uapi: FileDescriptor?

        public init(ipv4: FileDescriptor?, ipv6: FileDescriptor?, uapi: FileDescriptor?) {
            self.ipv4 = ipv4
            self.ipv6 = ipv6
            self.uapi = uapi
        }
    }

    public let packetPath = PacketPath.fd
    public var startTimeout: Double { 5 }
    public var tunWriter: TunWriter? { nil }
    /// The device segments TCP super-packets itself and writes a virtio_net_hdr before every packet
    /// (unless `offloadsVariable` is `off`).
    public var wantsTunOffloads: Bool { offloads }
    /// `off` makes the TUN a plain one (a packet per read) and sends a datagram per message (no
    /// UDP_SEGMENT): for measuring what the offloads bring (docs/performance.md), not for use.
    public static let offloadsVariable = "TUNNELGATE_WIREGUARD_OFFLOADS"
    /// What `offloadsVariable` says: true unless it is `off`.
    public static var offloadsFromEnvironment: Bool { ProcessControl.environmentValue(offloadsVariable) != "off" }
    private let offloads: Bool
    /// `off`, `auto` (the default: while the device thread is saturated) or `always` (tests): when the
    /// device's crypto worker seals and opens half of a batch (docs/wireguard.md).
    public static let workersVariable = "TUNNELGATE_WIREGUARD_WORKERS"
    /// What `workersVariable` says, nil when it says something else (an error for the caller to name).
    public static var workersFromEnvironment: WireGuardDevice.CryptoWorkers? {
        guard let value = ProcessControl.environmentValue(workersVariable), !value.isEmpty else { return .whenSaturated }
        return WireGuardDevice.CryptoWorkers(rawValue: value)
    }
    private var workers: WireGuardDevice.CryptoWorkers = .whenSaturated

    let device: WireGuardDevice
    let settings: WireGuardSettings
    /// The engine's UAPI socket until start hands it to the device.
    private var handedOverUAPI: FileDescriptor?
    private let ownsSockets: Bool
    private var interfaceName: String?
    private var slotMark: UInt32?
    /// Peers whose endpoint is a host name, pinned by `attach` to the plan's resolved address.
    private var namedEndpoints: [(WireGuardKey, String, UInt16)]
    private var unpinned: [String] = []
    private var started = false
    private var stopped = false
    /// Where wg(8) looks for userspace interfaces.
    public static let socketDirectory = "/var/run/wireguard"

    /// Makes the sockets (binds the UDP port, so a port in use is an error now) and takes the keys:
    /// every check that can fail before the kernel is touched. Timers and offloads as the environment
    /// says (`WireGuardTimers.testScaleVariable`, `offloadsVariable`).
    public convenience init(_ settings: WireGuardSettings, log: @escaping @Sendable (String) -> Void = { _ in }) throws(RuntimeError) {
        let timers = WireGuardTimers.fromEnvironment()
        if timers.scale != 1 { log("WireGuard timers scaled by \(timers.scale) (\(WireGuardTimers.testScaleVariable); for tests only)") }
        let (configuration, named) = try Self.configuration(settings)
        let device = try WireGuardDevice(configuration, timers: timers, log: log)
        self.init(settings, device: device, namedEndpoints: named, uapi: nil, ownsSockets: true,
                  offloads: Self.offloadsFromEnvironment)
    }

    /// Takes the engine's sockets (checked: UDP of their family, bound to one port, which must be
    /// the configuration's ListenPort when it has one) and the keys. `timers` and `offloads` are given,
    /// not read from the environment (a packet plane has none).
    public convenience init(_ settings: WireGuardSettings, carrierSockets sockets: CarrierSockets, timers: WireGuardTimers,
                            offloads: Bool, workers: WireGuardDevice.CryptoWorkers = .whenSaturated,
                            log: @escaping @Sendable (String) -> Void = { _ in }) throws(RuntimeError) {
        if timers.scale != 1 { log("WireGuard timers scaled by \(timers.scale) (for tests only)") }
        let bind: UDPBind
        do throws(BindError) {
            bind = try UDPBind(handedOver: sockets.ipv4, ipv6: sockets.ipv6, log: log)
        } catch {
            sockets.uapi?.close()
            throw RuntimeError(error.description)
        }
        if let port = settings.listenPort, port != bind.port {
            bind.close()
            sockets.uapi?.close()
            throw RuntimeError("the carrier sockets are bound to port \(bind.port), not the configuration's ListenPort \(port)")
        }
        let configuration: DeviceConfiguration, named: [(WireGuardKey, String, UInt16)]
        do throws(RuntimeError) {
            (configuration, named) = try Self.configuration(settings)
        } catch {
            bind.close()
            sockets.uapi?.close()
            throw error
        }
        let device: WireGuardDevice
        do throws(RuntimeError) {
            device = try WireGuardDevice(configuration, bind: bind, timers: timers, log: log)
        } catch {
            sockets.uapi?.close()
            throw error
        }
        self.init(settings, device: device, namedEndpoints: named, uapi: sockets.uapi, ownsSockets: false, offloads: offloads)
        self.workers = workers
    }

    private init(_ settings: WireGuardSettings, device: WireGuardDevice, namedEndpoints: [(WireGuardKey, String, UInt16)],
                 uapi: FileDescriptor?, ownsSockets: Bool, offloads: Bool) {
        self.settings = settings
        self.device = device
        self.namedEndpoints = namedEndpoints
        handedOverUAPI = uapi
        self.ownsSockets = ownsSockets
        self.offloads = offloads
    }

    /// The device's configuration from the settings, and the peers whose endpoint is a host name.
    private static func configuration(_ settings: WireGuardSettings) throws(RuntimeError)
        -> (DeviceConfiguration, [(WireGuardKey, String, UInt16)]) {
        // The configuration's key memory itself (SecureBytes): the device's one copy of the key.
        guard let key = PrivateKey(settings.privateKey) else {
            throw RuntimeError("the WireGuard private key is not a usable X25519 key")
        }
        var peers: [DeviceConfiguration.PeerConfiguration] = []
        var named: [(WireGuardKey, String, UInt16)] = []
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
                case .name(let name): named.append((publicKey, name, e.port))
                }
            }
            peers.append(.init(publicKey: publicKey, presharedKey: p.presharedKey,
                               endpoint: endpoint,
                               allowedIPs: p.allowedIPs, persistentKeepalive: p.persistentKeepalive ?? 0))
        }
        return (DeviceConfiguration(privateKey: key, listenPort: settings.listenPort ?? 0,
                                    fwmark: settings.fwMark ?? 0, peers: peers), named)
    }

    public var summary: String {
        "built-in WireGuard on UDP port \(device.boundPort)\(ownsSockets ? "" : " (the engine's sockets)"), "
            + "\(settings.peers.count) peer\(settings.peers.count == 1 ? "" : "s")"
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
        do throws(SystemCallError) {
            try tun.setNonBlocking(true)
        } catch { throw RuntimeError("the TUN: \(error)") }
        try start(packetIO: TunPacketIO(descriptor: tun, mtu: mtu))
    }

    /// Starts the device on `io` (the TUN's, or a `PacketChannel` end in tests).
    public func start(packetIO io: any PacketIO) throws(RuntimeError) {
        guard unpinned.isEmpty else {
            throw RuntimeError("endpoint \(unpinned[0]): not among the plan's pinned carriers")
        }
        let uapi: WireGuardDevice.UAPISocket?
        if ownsSockets {
            uapi = interfaceName.map { .path("\(Self.socketDirectory)/\($0).sock") }
        } else {
            uapi = handedOverUAPI.map { .handedOver($0) }
            handedOverUAPI = nil  // the device's now, whether or not it starts
        }
        try device.start(tun: io, fwmark: slotMark, uapi: uapi, udpSegmentation: offloads, receiveOffload: offloads, workers: workers)
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
        json += "\"packetPath\":\"fd\",\"kind\":\"wireguard\",\"listenPort\":\(s.listenPort),\"tunOffloads\":\(s.tunOffloads),\"tunCoalescing\":\(s.tunCoalescing),\"udpReceiveOffload\":\(s.udpReceiveOffload),\"cryptoWorker\":\(s.cryptoWorker),\"peers\":["
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
        // A UAPI socket handed over but never given to the device (start did not run) is still ours.
        handedOverUAPI?.close()
        handedOverUAPI = nil
    }
}
