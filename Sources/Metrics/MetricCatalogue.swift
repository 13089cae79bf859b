/// Every metric `tunnelgate metrics` serves (docs/operations.md, Metrics, lists the same; a test checks
/// that it does). Per tunnel the labels are `tunnel` (its name) and `namespace` (NamespaceLabel).
public enum MetricCatalogue {
    // MARK: Per namespace

    public static let namespaceUp = MetricFamily(
        "tunnelgate_namespace_up", .gauge,
        "1 when the namespace's state directory could be read at this scrape, 0 when not (the namespace is gone or its state directory was refused).")
    public static let tunnels = MetricFamily(
        "tunnelgate_tunnels", .gauge,
        "Tunnels with a state record or a journal in the namespace (running, starting, stopping, or residue of a dead owner).")

    // MARK: Per tunnel: lifecycle

    public static let status = MetricFamily(
        "tunnelgate_tunnel_status", .gauge,
        "The tunnel's NEVPNStatus: one series per status, 1 for the current one.")
    public static let startTime = MetricFamily(
        "tunnelgate_tunnel_start_time_seconds", .gauge,
        "When the owner started this run (Unix time).")
    public static let residue = MetricFamily(
        "tunnelgate_tunnel_residue", .gauge,
        "1 when the tunnel's owner died and left kernel state that `tunnelgate down` removes.")
    public static let lastDisconnectError = MetricFamily(
        "tunnelgate_last_disconnect_error_info", .gauge,
        "Present (value 1) while the last run of a tunnel that is not running ended with an error (NAME.lasterror); the message is the label.")
    public static let reasserting = MetricFamily(
        "tunnelgate_reasserting", .gauge,
        "1 while the tunnel is reasserting for this cause: carrier_path (the runtime says ready or there is none, so Tunnelgate's own carrier-path check found no carrier endpoint with a path) or runtime (the runtime says reconnecting).")
    public static let lastReassert = MetricFamily(
        "tunnelgate_last_reassert_timestamp_seconds", .gauge,
        "When the tunnel last went reasserting in this run (Unix time); absent when it has not.")

    // MARK: Per tunnel: traffic (the kernel's TUN counters)

    public static let interfaceTransmitBytes = MetricFamily(
        "tunnelgate_interface_transmit_bytes_total", .counter,
        "Bytes the host sent into the tunnel: the kernel's tx_bytes of the TUN interface.")
    public static let interfaceTransmitPackets = MetricFamily(
        "tunnelgate_interface_transmit_packets_total", .counter,
        "Packets the host sent into the tunnel: the kernel's tx_packets of the TUN interface.")
    public static let interfaceReceiveBytes = MetricFamily(
        "tunnelgate_interface_receive_bytes_total", .counter,
        "Bytes the tunnel delivered to the host: the kernel's rx_bytes of the TUN interface.")
    public static let interfaceReceivePackets = MetricFamily(
        "tunnelgate_interface_receive_packets_total", .counter,
        "Packets the tunnel delivered to the host: the kernel's rx_packets of the TUN interface.")

    // MARK: Per tunnel: the owner's packet loop (NAME.state counters)

    public static let hostToTunnelPackets = MetricFamily(
        "tunnelgate_host_to_tunnel_packets_total", .counter,
        "Packets the owner's loop read from the TUN for the runtime (callback path; 0 where the runtime reads the TUN itself).")
    public static let hostToTunnelBytes = MetricFamily(
        "tunnelgate_host_to_tunnel_bytes_total", .counter,
        "Bytes the owner's loop read from the TUN for the runtime (callback path).")
    public static let tunnelToHostPackets = MetricFamily(
        "tunnelgate_tunnel_to_host_packets_total", .counter,
        "Packets the runtime's writer callback wrote to the TUN (callback path).")
    public static let tunnelToHostBytes = MetricFamily(
        "tunnelgate_tunnel_to_host_bytes_total", .counter,
        "Bytes the runtime's writer callback wrote to the TUN (callback path).")
    public static let dropped = MetricFamily(
        "tunnelgate_dropped_packets_total", .counter,
        "Packets dropped by the owner's loop or the TUN writer, by reason: no_runtime, not_ip, over_mtu, malformed (from the runtime), refused (by the runtime), write_failed (not taken by the TUN).")
    public static let queueFull = MetricFamily(
        "tunnelgate_backpressure_queue_full_total", .counter,
        "QUEUE_FULL answers the owner's loop got from the runtime (backpressure; nothing is dropped for it).")
    public static let resent = MetricFamily(
        "tunnelgate_backpressure_resent_packets_total", .counter,
        "Times the owner's loop sent packets in again after a QUEUE_FULL answer.")
    public static let handOffs = MetricFamily(
        "tunnelgate_runtime_handoffs_total", .counter,
        "Hand-offs of packets read from the TUN to a callback runtime (one packet_in_batch call, or a run of packet_in calls).")
    public static let handOffSeconds = MetricFamily(
        "tunnelgate_runtime_handoff_seconds_total", .counter,
        "Wall time the owner's loop spent inside the runtime's packet_in_batch or packet_in calls.")
    public static let repairs = MetricFamily(
        "tunnelgate_repairs_total", .counter,
        "Repair passes that put back kernel state someone else changed.")
    public static let failedClosed = MetricFamily(
        "tunnelgate_failed_closed", .gauge,
        "1 when repairs could not win and the tunnel failed closed: a block-all table stays until `tunnelgate down`.")

    // MARK: Per tunnel: the kill switch (the kernel's nftables table against NAME.firewall)

    public static let killSwitchEnabled = MetricFamily(
        "tunnelgate_kill_switch_enabled", .gauge,
        "1 when the table the owner enforces is a kill switch (includeAllNetworks, isolate mode, or the block-all table of failing closed), whatever the kernel holds now.")
    public static let killSwitchIntact = MetricFamily(
        "tunnelgate_kill_switch_intact", .gauge,
        "1 when the kernel holds the kill switch exactly as its owner enforces it, compared by content (status --json .killSwitch); 0 when it is missing, differs or is not a kill switch.")
    public static let firewallState = MetricFamily(
        "tunnelgate_firewall_state", .gauge,
        "How the tunnel's nftables table compares with the one its owner enforces: one series per state (as_planned, tampered_with, missing, not_verified), 1 for the current one; absent for a tunnel without a table.")
    public static let firewallDifferences = MetricFamily(
        "tunnelgate_firewall_differences", .gauge,
        "Differences of the kernel's table from the enforced one (one per `nftables: …` line of `tunnelgate status`).")

    // MARK: Per tunnel: what the runtime's own status says (NAME.state .runtimeStatus)

    public static let runtimeQueueFull = MetricFamily(
        "tunnelgate_runtime_queue_full_total", .counter,
        "QUEUE_FULL answers the runtime counts itself (its status's queueFull: the example runtime, MeshGuard).")
    public static let wireguardLastHandshake = MetricFamily(
        "tunnelgate_wireguard_peer_last_handshake_timestamp_seconds", .gauge,
        "When the built-in WireGuard last completed a handshake with the peer (Unix time; 0: never), per peer public key.")
    public static let wireguardHandshakeAge = MetricFamily(
        "tunnelgate_wireguard_peer_handshake_age_seconds", .gauge,
        "Seconds since the last completed handshake with the peer, at this scrape; absent before the first.")
    public static let wireguardReceiveBytes = MetricFamily(
        "tunnelgate_wireguard_peer_receive_bytes_total", .counter,
        "Bytes of datagrams received from the peer (wg show's transfer, received).")
    public static let wireguardTransmitBytes = MetricFamily(
        "tunnelgate_wireguard_peer_transmit_bytes_total", .counter,
        "Bytes of datagrams sent to the peer (wg show's transfer, sent).")
    public static let meshPeersAlive = MetricFamily(
        "tunnelgate_mesh_peers_alive", .gauge,
        "Mesh peers the MeshGuard runtime sees alive (its status's alivePeers).")
    public static let meshPeers = MetricFamily(
        "tunnelgate_mesh_peers", .gauge,
        "Mesh peers the MeshGuard runtime lists in its status, in any state.")

    // MARK: The collector itself

    public static let scrapeDuration = MetricFamily(
        "tunnelgate_metrics_scrape_duration_seconds", .gauge,
        "How long reading the state directories and the kernel took for this scrape.")
    public static let requests = MetricFamily(
        "tunnelgate_metrics_requests_total", .counter,
        "HTTP requests the collector answered, any path and status.")
    public static let connectionsClosed = MetricFamily(
        "tunnelgate_metrics_connections_closed_total", .counter,
        "Connections the collector closed itself, by reason: timeout (no complete request, or the answer not taken, in time), limit (the oldest dropped for a new one), bad_request (malformed or too large).")

    /// Every family, in the order a scrape writes them.
    public static let all: [MetricFamily] = [
        namespaceUp, tunnels,
        status, startTime, residue, lastDisconnectError, reasserting, lastReassert,
        interfaceTransmitBytes, interfaceTransmitPackets, interfaceReceiveBytes, interfaceReceivePackets,
        hostToTunnelPackets, hostToTunnelBytes, tunnelToHostPackets, tunnelToHostBytes, dropped,
        queueFull, resent, handOffs, handOffSeconds, repairs, failedClosed,
        killSwitchEnabled, killSwitchIntact, firewallState, firewallDifferences,
        runtimeQueueFull, wireguardLastHandshake, wireguardHandshakeAge, wireguardReceiveBytes, wireguardTransmitBytes,
        meshPeersAlive, meshPeers,
        scrapeDuration, requests, connectionsClosed,
    ]
}
