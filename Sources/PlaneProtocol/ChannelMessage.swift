import LinuxSystem
import RuntimeABI
import TunnelgateSettings

/// What the engine tells a packet plane (engine → plane). One message per channel datagram.
public enum EngineMessage: Codable, Sendable, Equatable {
    /// Load the runtime (its library, symbols, secret) before the engine touches the kernel: answered by
    /// `loaded`. Descriptors and tail as `PlaneLoad` says.
    case load(PlaneLoad)
    /// Start the loaded runtime on the tunnel's TUN (the descriptor sent with it).
    case start(PlaneStart)
    /// An app message for the runtime (`tunnelgate message`, sendProviderMessage): answered by `reply`.
    case message(id: UInt64, data: [UInt8])
    /// Stop the runtime and exit.
    case stop
    /// A NetworkExtension provider's plane starts its provider: what the manager handed the engine
    /// (the host's handoff as JSON, nil when none), for `TunnelgateHostHandoff.current` in the plane.
    /// `secrets`: the secrets its protocol's passwordReference and identityReference name, read by the
    /// engine from the root-only store, in the message's tail in this order (the plane cannot read the
    /// store).
    case provider(handoff: JSONText?, secrets: [ProviderSecret])
    /// A provider's plane: whether a carrier endpoint has a path now (the engine's carrier-path check),
    /// for `NEProvider.defaultPath`; sent when the tunnel runs and at each change.
    case path(satisfied: Bool)
    /// A provider's plane: logind said the host is about to sleep (true) or woke (false), for
    /// `NEProvider.sleep(completionHandler:)` and `wake()`; not sent when the tunnel stops for sleep.
    case sleep(Bool)
    /// The answer to a provider's `apply` (setTunnelNetworkSettings): nil error is success; a success
    /// that made a new TUN carries its descriptor.
    case applied(id: UInt64, error: String?, code: Int?)
    /// A provider: stopTunnel(with: reason), then exit.
    case stopTunnel(reason: Int)
}

/// What a packet plane tells the engine (plane → engine).
public enum PlaneMessage: Codable, Sendable, Equatable {
    /// The answer to `load`: nil, or why the runtime cannot run (a missing symbol, a library that does
    /// not load, a bad secret).
    case loaded(error: String?, summary: String?)
    /// The runtime's state and the plane's counters: on every change, and once a second.
    case state(PlaneReport)
    /// The answer to `message`.
    case reply(id: UInt64, data: [UInt8]?, error: String?)
    /// The runtime failed; the plane exits after this.
    case failed(reason: String)
    /// A provider asks for network settings (nil removes them), as setTunnelNetworkSettings.
    case apply(id: UInt64, settings: JSONText?)
    /// A provider's startTunnel completed (error: nil on success).
    case started(error: ProviderError?)
    /// A provider called cancelTunnelWithError.
    case cancel(error: ProviderError?)
}

/// A provider's NSError as the host keeps it: domain, code, description.
public struct ProviderError: Codable, Sendable, Equatable {
    public var message: String
    public var domain: String?
    public var code: Int?
    public init(message: String, domain: String? = nil, code: Int? = nil) {
        self.message = message
        self.domain = domain
        self.code = code
    }
}

/// JSON carried as text inside a message (settings a provider hands over).
public struct JSONText: Codable, Sendable, Equatable {
    public var text: String
    public init(_ text: String) { self.text = text }
}

/// The plane's periodic report.
public struct PlaneReport: Codable, Sendable, Equatable {
    public var phase: RuntimeState.Phase
    public var interface: String?
    public var error: String?
    /// The runtime's own status JSON (secrets scrubbed).
    public var json: String
    public var counters: PacketCounters

    public init(state: RuntimeState, counters: PacketCounters) {
        phase = state.phase
        interface = state.interface
        error = state.error
        json = state.json
        self.counters = counters
    }

    public var runtimeState: RuntimeState { RuntimeState(phase: phase, interface: interface, error: error, json: json) }
}

/// What a plane loads before the kernel is touched.
/// One secret of a provider's protocol in a `provider` message's tail: the reference it answers (the
/// opaque bytes of passwordReference or identityReference) and its length.
public struct ProviderSecret: Codable, Sendable, Equatable {
    public var reference: [UInt8]
    public var count: Int
    public init(reference: [UInt8], count: Int) {
        self.reference = reference
        self.count = count
    }
}

public struct PlaneLoad: Codable, Sendable, Equatable {
    public enum Runtime: Codable, Sendable, Equatable {
        /// No runtime: packets read from the TUN are counted and dropped.
        case none
        /// A library behind the callback ABI: its settings (the library itself comes as a descriptor,
        /// the secret in the message's tail).
        case callback(CallbackRuntimeSettings)
        /// MeshGuard (the library as a descriptor, the identity seed in the tail).
        case mesh(MeshRuntimeSettings)
        /// The built-in WireGuard: everything but its keys (in the tail) and its sockets (the engine's,
        /// as descriptors).
        case wireguard(WireGuardPlan)
    }

    /// What each descriptor sent with the message is, in order.
    public enum Descriptor: String, Codable, Sendable, Equatable {
        /// A sealed copy of the runtime's library.
        case library
        /// The built-in WireGuard's UDP sockets, bound by the engine (marked before start).
        case udp4, udp6
        /// The listening socket wg(8) connects to (/var/run/wireguard/NAME.sock), made by the engine.
        case uapi
    }

    /// What each part of the message's tail is, in order, and how long.
    public struct Secret: Codable, Sendable, Equatable {
        public enum Role: String, Codable, Sendable, Equatable {
            /// The callback runtime's secret (secretFile's bytes).
            case runtimeSecret
            /// The MeshGuard identity seed.
            case meshSeed
            /// The WireGuard interface's private key.
            case privateKey
            /// Peer N's preshared key.
            case presharedKey
        }
        public var role: Role
        public var count: Int
        /// Which peer, for a preshared key.
        public var peer: Int?
        public init(role: Role, count: Int, peer: Int? = nil) {
            self.role = role
            self.count = count
            self.peer = peer
        }
    }

    public var runtime: Runtime
    public var descriptors: [Descriptor]
    public var secrets: [Secret]
    /// Where the plane's log lines say they come from (`tunnelgate[NAME]`).
    public var tunnelName: String

    public init(runtime: Runtime, descriptors: [Descriptor], secrets: [Secret], tunnelName: String) {
        self.runtime = runtime
        self.descriptors = descriptors
        self.secrets = secrets
        self.tunnelName = tunnelName
    }
}

/// What a loaded plane starts with: the tunnel it runs in, and the descriptors sent with it.
public struct PlaneStart: Codable, Sendable, Equatable {
    public enum Descriptor: String, Codable, Sendable, Equatable {
        case tun
    }

    public var context: RuntimeContext
    /// The TUN carries a virtio_net_hdr (TSO on).
    public var tunOffloads: Bool
    public var descriptors: [Descriptor]

    public init(context: RuntimeContext, tunOffloads: Bool, descriptors: [Descriptor]) {
        self.context = context
        self.tunOffloads = tunOffloads
        self.descriptors = descriptors
    }
}

/// The built-in WireGuard as the plane builds it: the configuration without its keys (those come in
/// the tail: the private key, then each peer's preshared key) and without its sockets (the engine's:
/// bound to the port, marked with the carrier identity, handed over as descriptors).
public struct WireGuardPlan: Codable, Sendable, Equatable {
    public struct Peer: Codable, Sendable, Equatable {
        public var publicKey: [UInt8]
        /// Its preshared key is in the tail.
        public var hasPresharedKey: Bool
        /// The configured endpoint as written (a name is pinned, in the plane, to the plan's address).
        public var endpointHost: String?
        public var endpointPort: UInt16
        public var allowedIPs: [IPPrefix]
        public var persistentKeepalive: UInt16?

        public init(publicKey: [UInt8], hasPresharedKey: Bool, endpointHost: String?, endpointPort: UInt16,
                    allowedIPs: [IPPrefix], persistentKeepalive: UInt16?) {
            self.publicKey = publicKey
            self.hasPresharedKey = hasPresharedKey
            self.endpointHost = endpointHost
            self.endpointPort = endpointPort
            self.allowedIPs = allowedIPs
            self.persistentKeepalive = persistentKeepalive
        }
    }

    /// The configuration's ListenPort and FwMark (nil: none); the sockets carry them already.
    public var listenPort: UInt16?
    public var fwMark: UInt32?
    public var peers: [Peer]
    /// TUNNELGATE_WIREGUARD_OFFLOADS and the test-only timer scale, read by the engine (the plane has
    /// no environment).
    public var offloads: Bool
    public var timerScale: Double
    /// TUNNELGATE_WIREGUARD_WORKERS: when the device's crypto worker helps (`off`, `auto`, `always`).
    public var workers: String

    public init(listenPort: UInt16?, fwMark: UInt32?, peers: [Peer], offloads: Bool, timerScale: Double, workers: String = "auto") {
        self.listenPort = listenPort
        self.fwMark = fwMark
        self.peers = peers
        self.offloads = offloads
        self.timerScale = timerScale
        self.workers = workers
    }
}
