import TunnelgateSettings

/// What the device runs with: the interface's key and port, and its peers.
/// Built from `WireGuardSettings` (wg-quick or JSON); changed later by `wg set`.
public struct DeviceConfiguration: Sendable {
    public struct PeerConfiguration: Sendable {
        public var publicKey: WireGuardKey
        /// In the configuration's secret memory, shared (the settings' SecretKey), not copied.
        public var presharedKey: SecretKey?
        public var endpoint: Endpoint?
        public var allowedIPs: [IPPrefix]
        /// Seconds; 0 is off.
        public var persistentKeepalive: UInt16

        public init(publicKey: WireGuardKey, presharedKey: SecretKey?, endpoint: Endpoint?, allowedIPs: [IPPrefix], persistentKeepalive: UInt16) {
            self.publicKey = publicKey
            self.presharedKey = presharedKey
            self.endpoint = endpoint
            self.allowedIPs = allowedIPs
            self.persistentKeepalive = persistentKeepalive
        }
    }

    /// In the configuration's secret memory (`PrivateKey(_: SecretKey)`): the device's one copy.
    public var privateKey: PrivateKey
    /// 0 picks a free port.
    public var listenPort: UInt16
    /// 0 is no mark.
    public var fwmark: UInt32
    public var peers: [PeerConfiguration]

    public init(privateKey: PrivateKey, listenPort: UInt16, fwmark: UInt32, peers: [PeerConfiguration]) {
        self.privateKey = privateKey
        self.listenPort = listenPort
        self.fwmark = fwmark
        self.peers = peers
    }
}

/// What the device counts: everything dropped has a reason.
public struct DeviceCounters: Sendable, Equatable {
    public var packetsSent: UInt64 = 0, bytesSent: UInt64 = 0
    public var packetsReceived: UInt64 = 0, bytesReceived: UInt64 = 0
    public var keepalivesSent: UInt64 = 0, keepalivesReceived: UInt64 = 0
    public var initiationsSent: UInt64 = 0, responsesSent: UInt64 = 0
    public var handshakesCompleted: UInt64 = 0
    public var cookieRepliesSent: UInt64 = 0, cookieRepliesReceived: UInt64 = 0
    public var dropsNoPeer: UInt64 = 0, dropsNoEndpoint: UInt64 = 0, dropsStagedOverflow: UInt64 = 0
    public var dropsMalformedDatagram: UInt64 = 0, dropsMAC: UInt64 = 0, dropsHandshake: UInt64 = 0
    public var dropsUnknownPeer: UInt64 = 0, dropsReplayedInitiation: UInt64 = 0, dropsInitiationRate: UInt64 = 0
    /// Handshake messages with a valid MAC2 dropped under load because their source address's bucket
    /// was empty (HandshakeRateLimiter).
    public var dropsSourceRate: UInt64 = 0
    /// Handshake messages dropped because the handshake thread's queue was full (a flood outran it).
    public var dropsHandshakeQueue: UInt64 = 0
    public var dropsUnknownIndex: UInt64 = 0, dropsExpiredSession: UInt64 = 0
    public var dropsAuthentication: UInt64 = 0, dropsReplay: UInt64 = 0
    public var dropsMalformedPacket: UInt64 = 0, dropsSpoofedSource: UInt64 = 0
    public var sendErrors: UInt64 = 0, tunWriteErrors: UInt64 = 0
    /// TCP super-packets read from a TUN with offloads (each sent as segments, counted in packetsSent).
    public var superPacketsRead: UInt64 = 0
    /// Messages sent with UDP_SEGMENT: runs of a super-packet's segments sent as one (UDP GSO).
    public var segmentedSends: UInt64 = 0
    /// Received messages that held a run of a peer's datagrams (UDP_GRO), each cut into its datagrams.
    public var mergedReceives: UInt64 = 0
    /// Super-packets written to the TUN (receive-side GRO), and the decrypted packets they carried.
    public var superPacketsWritten: UInt64 = 0, coalescedSegments: UInt64 = 0
    /// Super-packets the TUN refused, written again packet by packet (a kernel without GSO_UDP_L4 on
    /// TUN writes: UDP is then no longer coalesced).
    public var refusedSuperPackets: UInt64 = 0
    /// Batches whose sealing or opening was split between the device thread and its crypto worker.
    public var cryptoHandOffs: UInt64 = 0
    /// Receive moderation: the times the device thread began a wait of up to
    /// `WireGuardDevice.receiveModeration` after a small receive (fewer than `moderatedBelow` messages,
    /// nothing read from the TUN) before it polled its sockets again, so that the peer's next datagrams
    /// gathered there; a TUN packet or a wake-up ends the wait early (a TUN already readable, at once).
    public var moderatedReceives: UInt64 = 0
    /// TUN reads dropped for their virtio_net_hdr: a GSO type not asked for, or a header that does not fit.
    public var dropsOffloadUnsupported: UInt64 = 0, dropsOffloadMalformed: UInt64 = 0

    /// `"name":value` pairs, for the status JSON.
    var json: String {
        let fields: [(String, UInt64)] = [
            ("packetsSent", packetsSent), ("bytesSent", bytesSent), ("packetsReceived", packetsReceived),
            ("bytesReceived", bytesReceived), ("keepalivesSent", keepalivesSent), ("keepalivesReceived", keepalivesReceived),
            ("initiationsSent", initiationsSent), ("responsesSent", responsesSent), ("handshakesCompleted", handshakesCompleted),
            ("cookieRepliesSent", cookieRepliesSent), ("cookieRepliesReceived", cookieRepliesReceived),
            ("dropsNoPeer", dropsNoPeer), ("dropsNoEndpoint", dropsNoEndpoint), ("dropsStagedOverflow", dropsStagedOverflow),
            ("dropsMalformedDatagram", dropsMalformedDatagram), ("dropsMAC", dropsMAC), ("dropsHandshake", dropsHandshake),
            ("dropsUnknownPeer", dropsUnknownPeer), ("dropsReplayedInitiation", dropsReplayedInitiation),
            ("dropsInitiationRate", dropsInitiationRate), ("dropsSourceRate", dropsSourceRate), ("dropsHandshakeQueue", dropsHandshakeQueue), ("dropsUnknownIndex", dropsUnknownIndex),
            ("dropsExpiredSession", dropsExpiredSession), ("dropsAuthentication", dropsAuthentication),
            ("dropsReplay", dropsReplay), ("dropsMalformedPacket", dropsMalformedPacket),
            ("dropsSpoofedSource", dropsSpoofedSource), ("sendErrors", sendErrors), ("tunWriteErrors", tunWriteErrors),
            ("superPacketsRead", superPacketsRead), ("segmentedSends", segmentedSends), ("dropsOffloadUnsupported", dropsOffloadUnsupported),
            ("dropsOffloadMalformed", dropsOffloadMalformed), ("mergedReceives", mergedReceives),
            ("superPacketsWritten", superPacketsWritten), ("coalescedSegments", coalescedSegments),
            ("refusedSuperPackets", refusedSuperPackets), ("cryptoHandOffs", cryptoHandOffs),
            ("moderatedReceives", moderatedReceives),
        ]
        return fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",")
    }
}
