import Engine
import TunnelgateSettings

/// One tunnel as a scrape saw it: `tunnelgate status --json`'s report (the owner's record, NAME.lasterror
/// and the kernel, read back) and the two times of the record the report does not carry, converted
/// from CLOCK_MONOTONIC to Unix time.
public struct TunnelSnapshot: Sendable {
    public var report: TunnelReport
    /// When the owner started this run (TunnelRecord.since).
    public var startedAt: Double?
    /// When it last went reasserting (TunnelRecord.lastReasserting).
    public var lastReassertAt: Double?

    public init(report: TunnelReport, startedAt: Double? = nil, lastReassertAt: Double? = nil) {
        self.report = report
        self.startedAt = startedAt
        self.lastReassertAt = lastReassertAt
    }
}

/// One namespace as a scrape saw it.
public struct NamespaceSnapshot: Sendable {
    /// The `namespace` label (NamespaceLabel).
    public var name: String
    /// nil when its state was read; otherwise why not.
    public var error: String?
    public var tunnels: [TunnelSnapshot]

    public init(name: String, error: String? = nil, tunnels: [TunnelSnapshot] = []) {
        self.name = name
        self.error = error
        self.tunnels = tunnels
    }
}

/// What the collector counts about itself.
public struct CollectorCounters: Sendable, Equatable {
    public var requests: UInt64 = 0
    public var closedTimeout: UInt64 = 0
    public var closedLimit: UInt64 = 0
    public var closedBadRequest: UInt64 = 0
    public init() {}
}

/// Turns snapshots into samples. Pure: the clock is passed in, so tests give it.
public enum TunnelMetrics {
    /// NEVPNStatus names, one series each (TunnelStatus has no `invalid`: Tunnelgate never reports it).
    static let statuses: [TunnelStatus] = [.disconnected, .connecting, .connected, .reasserting, .disconnecting]
    static let firewallStates: [(FirewallCheck, String)] = [
        (.asPlanned, "as_planned"), (.tamperedWith, "tampered_with"), (.missing, "missing"), (.notVerified, "not_verified"),
    ]

    public static func exposition(_ namespaces: [NamespaceSnapshot], now: Double, scrapeSeconds: Double,
                                  collector: CollectorCounters) -> Exposition {
        typealias M = MetricCatalogue
        var out = Exposition(order: M.all)
        for ns in namespaces {
            let nsLabel: [Exposition.Label] = [("namespace", ns.name)]
            out.add(M.namespaceUp, nsLabel, .bool(ns.error == nil))
            guard ns.error == nil else { continue }
            out.add(M.tunnels, nsLabel, .unsigned(UInt64(ns.tunnels.count)))
            for tunnel in ns.tunnels { add(tunnel, namespace: ns.name, now: now, to: &out) }
        }
        out.add(M.scrapeDuration, [], .double(scrapeSeconds))
        out.add(M.requests, [], .unsigned(collector.requests))
        out.add(M.connectionsClosed, [("reason", "timeout")], .unsigned(collector.closedTimeout))
        out.add(M.connectionsClosed, [("reason", "limit")], .unsigned(collector.closedLimit))
        out.add(M.connectionsClosed, [("reason", "bad_request")], .unsigned(collector.closedBadRequest))
        return out
    }

    static func add(_ tunnel: TunnelSnapshot, namespace: String, now: Double, to out: inout Exposition) {
        typealias M = MetricCatalogue
        let r = tunnel.report
        let labels: [Exposition.Label] = [("tunnel", r.name), ("namespace", namespace)]
        func with(_ name: String, _ value: String) -> [Exposition.Label] { labels + [(name, value)] }

        for s in statuses { out.add(M.status, with("status", s.rawValue), .bool(r.status == s)) }
        if let started = tunnel.startedAt { out.add(M.startTime, labels, .double(started)) }
        out.add(M.residue, labels, .bool(r.residue))
        if let message = r.lastDisconnectError { out.add(M.lastDisconnectError, with("message", message), .unsigned(1)) }

        let runtime = RuntimeStatus(r.runtime)
        let runtimeReconnecting = runtime.string("state") == "reconnecting"
        out.add(M.reasserting, with("cause", "carrier_path"), .bool(r.status == .reasserting && !runtimeReconnecting))
        out.add(M.reasserting, with("cause", "runtime"), .bool(r.status == .reasserting && runtimeReconnecting))
        if let at = tunnel.lastReassertAt { out.add(M.lastReassert, labels, .double(at)) }

        if let k = r.interfaceCounters {
            out.add(M.interfaceTransmitBytes, labels, .unsigned(k.txBytes))
            out.add(M.interfaceTransmitPackets, labels, .unsigned(k.txPackets))
            out.add(M.interfaceReceiveBytes, labels, .unsigned(k.rxBytes))
            out.add(M.interfaceReceivePackets, labels, .unsigned(k.rxPackets))
        }
        if let c = r.counters {
            out.add(M.hostToTunnelPackets, labels, .unsigned(c.packetsFromHost))
            out.add(M.hostToTunnelBytes, labels, .unsigned(c.bytesFromHost))
            out.add(M.tunnelToHostPackets, labels, .unsigned(c.packetsToHost))
            out.add(M.tunnelToHostBytes, labels, .unsigned(c.bytesToHost))
            let drops: [(String, UInt64)] = [
                ("no_runtime", c.droppedNoRuntime), ("not_ip", c.droppedNotIP), ("over_mtu", c.droppedOverMTU),
                ("malformed", c.droppedMalformed), ("refused", c.droppedRefused), ("write_failed", c.droppedWriteFailed),
            ]
            for (reason, count) in drops { out.add(M.dropped, with("reason", reason), .unsigned(count)) }
            out.add(M.queueFull, labels, .unsigned(c.queueFull))
            out.add(M.resent, labels, .unsigned(c.retries))
            if let n = c.handOffs { out.add(M.handOffs, labels, .unsigned(n)) }
            if let s = c.handOffSeconds { out.add(M.handOffSeconds, labels, .double(s)) }
            out.add(M.repairs, labels, .unsigned(c.repairs))
        }
        if r.pid != nil || r.residue { out.add(M.failedClosed, labels, .bool(r.failedClosed != nil)) }

        if let check = r.firewall {
            out.add(M.killSwitchEnabled, labels, .bool(r.firewallIsKillSwitch == true))
            out.add(M.killSwitchIntact, labels, .bool(r.killSwitch))
            for (state, name) in firewallStates { out.add(M.firewallState, with("state", name), .bool(check == state)) }
            out.add(M.firewallDifferences, labels, .unsigned(UInt64(r.firewallDifferences.count)))
        }

        if let n = runtime.unsigned("queueFull") { out.add(M.runtimeQueueFull, labels, .unsigned(n)) }
        if runtime.string("kind") == "wireguard" {
            for peer in runtime.objects("peers") {
                guard let key = peer.string("publicKey") else { continue }
                let peerLabels = with("peer", key)
                let handshake = peer.unsigned("latestHandshake") ?? 0
                out.add(M.wireguardLastHandshake, peerLabels, .unsigned(handshake))
                if handshake > 0 { out.add(M.wireguardHandshakeAge, peerLabels, .double(max(0, now - Double(handshake)))) }
                if let rx = peer.unsigned("rxBytes") { out.add(M.wireguardReceiveBytes, peerLabels, .unsigned(rx)) }
                if let tx = peer.unsigned("txBytes") { out.add(M.wireguardTransmitBytes, peerLabels, .unsigned(tx)) }
            }
        }
        if let alive = runtime.unsigned("alivePeers") {
            out.add(M.meshPeersAlive, labels, .unsigned(alive))
            out.add(M.meshPeers, labels, .unsigned(UInt64(runtime.objects("peers").count)))
        }
    }
}

/// Members of a runtime's status JSON, read without failing on what a runtime did not write.
struct RuntimeStatus {
    let members: [(key: String, value: JSONValue)]

    init(_ value: JSONValue?) {
        if case .object(let m)? = value { members = m } else { members = [] }
    }

    func value(_ key: String) -> JSONValue? { members.first(where: { $0.key == key })?.value }

    func string(_ key: String) -> String? {
        if case .string(let s)? = value(key) { return s }
        return nil
    }

    /// A whole, non-negative number (a count or a time in seconds); nil for anything else.
    func unsigned(_ key: String) -> UInt64? {
        guard case .number(let v, let literal)? = value(key), v >= 0 else { return nil }
        if let exact = UInt64(literal) { return exact }
        return v == v.rounded() && v < 18_446_744_073_709_551_616 ? UInt64(v) : nil
    }

    func objects(_ key: String) -> [RuntimeStatus] {
        guard case .array(let items)? = value(key) else { return [] }
        return items.compactMap { if case .object = $0 { RuntimeStatus($0) } else { nil } }
    }
}
