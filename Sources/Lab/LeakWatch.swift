import LinuxSystem
import Netlink
import Nftables
import TunnelgateSettings

/// One flow the leak watch saw: a 5-tuple leaving the client by one of its links, with how many
/// packets; with the sending socket's uid when counted on the client itself.
public struct ObservedFlow: Sendable, Hashable, CustomStringConvertible {
    public var uid: UInt32?
    public var proto: UInt8
    public var source: IPAddress
    public var sourcePort: UInt16
    public var destination: IPAddress
    public var destinationPort: UInt16
    public var packets: UInt64
    /// Where it was counted: "router:c0" (the far end of a client link) or "client:eth0".
    public var observedAt: String
    /// When the watch first saw this 5-tuple, in milliseconds since the epoch (CLOCK_REALTIME); nil when
    /// not known. Never earlier than the first packet; later by at most the read's own duration and a
    /// clock tick (docs/lab.md).
    public var firstSeenMilliseconds: UInt64?

    public init(uid: UInt32?, proto: UInt8, source: IPAddress, sourcePort: UInt16, destination: IPAddress,
                destinationPort: UInt16, packets: UInt64, observedAt: String, firstSeenMilliseconds: UInt64? = nil) {
        self.uid = uid
        self.proto = proto
        self.source = source
        self.sourcePort = sourcePort
        self.destination = destination
        self.destinationPort = destinationPort
        self.packets = packets
        self.observedAt = observedAt
        self.firstSeenMilliseconds = firstSeenMilliseconds
    }

    public var protoName: String {
        switch proto {
        case 6: "tcp"
        case 17: "udp"
        case 1: "icmp"
        case 58: "icmpv6"
        default: "proto \(proto)"
        }
    }

    var isICMP: Bool { proto == 1 || proto == 58 }
    public var isDNS: Bool { (proto == 17 || proto == 6) && destinationPort == 53 }

    static func endpoint(_ a: IPAddress, _ port: UInt16, icmp: Bool) -> String {
        if icmp { return a.description }
        return a.family == .ipv6 ? "[\(a)]:\(port)" : "\(a):\(port)"
    }

    /// `udp 10.231.0.2:40000 -> 198.18.0.30:53 packets 2 (at router:c0)`; ICMP shows its type and code.
    public var description: String {
        var s = "\(protoName) \(Self.endpoint(source, sourcePort, icmp: isICMP)) -> \(Self.endpoint(destination, destinationPort, icmp: isICMP))"
        if isICMP { s += " type \(sourcePort) code \(destinationPort)" }
        s += " packets \(packets)"
        if let uid { s += " uid \(uid)" }
        return s + " (at \(observedAt))"
    }

    /// The description with the first-seen time: `… (at r) first-seen 1764654001123 (05:40:01.123Z)`.
    public var descriptionWithTime: String {
        guard let t = firstSeenMilliseconds else { return description }
        return description + " first-seen \(t) (\(LeakTime.clock(t)))"
    }
}

extension ObservedFlow {
    /// One JSON object (`leaks show --json`): kind as the caller judged it, the 5-tuple (ICMP: type and
    /// code instead of ports), packets, where counted, first seen (ms since the epoch, or null), uid.
    public func json(kind: String, toCarrierAddress: Bool) -> String {
        var fields = ["\"kind\": \(JSONValue.quoted(kind))", "\"proto\": \(JSONValue.quoted(protoName))",
                      "\"source\": \(JSONValue.quoted(source.description))", "\"destination\": \(JSONValue.quoted(destination.description))"]
        if isICMP {
            fields += ["\"icmpType\": \(sourcePort)", "\"icmpCode\": \(destinationPort)"]
        } else {
            fields += ["\"sourcePort\": \(sourcePort)", "\"destinationPort\": \(destinationPort)"]
        }
        fields += ["\"packets\": \(packets)", "\"at\": \(JSONValue.quoted(observedAt))",
                   "\"firstSeen\": \(firstSeenMilliseconds.map(String.init) ?? "null")",
                   "\"uid\": \(uid.map(String.init) ?? "null")", "\"toCarrierAddress\": \(toCarrierAddress)"]
        return "{" + fields.joined(separator: ", ") + "}"
    }
}

/// The arithmetic of first-seen times.
public enum LeakTime {
    /// One clock tick at the lowest HZ the kernel builds with (100): how much earlier than the true
    /// moment a time derived from the kernel's jiffies can be, added so that it never is.
    public static let tickMilliseconds: UInt64 = 10

    /// When an element of a set whose elements expire `timeout` ms after they were added was added, from
    /// what the kernel said was left (`expiresIn`) in a listing that had returned at `readAt` (ms since
    /// the epoch): readAt − (timeout − expiresIn), plus a tick. nil when the element has no expiry.
    public static func firstSeen(readAt: UInt64, timeout: UInt64, expiresIn: UInt64?) -> UInt64? {
        guard let expiresIn else { return nil }
        let age = timeout > expiresIn ? timeout - expiresIn : 0
        return (readAt > age ? readAt - age : 0) + tickMilliseconds
    }

    /// The wall clock now, in milliseconds since the epoch.
    public static func now() -> UInt64 {
        let c = ProcessControl.wallClock()
        return UInt64(c.seconds) * 1000 + UInt64(c.nanoseconds / 1_000_000)
    }

    /// `HH:MM:SS.mmmZ` of a time in ms since the epoch (UTC; the date is left out: a phase lasts minutes).
    public static func clock(_ ms: UInt64) -> String {
        let day = ms % 86_400_000
        func two(_ v: UInt64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let milli = day % 1000
        let m = milli < 10 ? "00\(milli)" : milli < 100 ? "0\(milli)" : "\(milli)"
        return "\(two(day / 3_600_000)):\(two(day / 60000 % 60)):\(two(day / 1000 % 60)).\(m)Z"
    }
}

/// A carrier 5-tuple the client may send to: `IP:PORT/PROTO` ([IPv6]:PORT/PROTO), from any source;
/// with `@SPORT`, only from that source port of the client (a carrier socket bound to a known local
/// port: WireGuard's ListenPort); with `@SADDR:SPORT` (`@[IPv6]:SPORT`), only from that address and port.
public struct CarrierSpec: Sendable, Hashable, CustomStringConvertible {
    public var address: IPAddress
    public var port: UInt16
    public var proto: UInt8
    /// The client's source port the carrier is sent from, when it is fixed.
    public var sourcePort: UInt16?
    /// The client's source address, when the carrier socket is bound to one (only with `sourcePort`).
    public var sourceAddress: IPAddress?

    /// `HOST:PORT` or `[IPv6]:PORT` as (host, port); nil for anything else (an IPv6 address without brackets).
    static func hostPort(_ text: Substring) -> (IPAddress, UInt16)? {
        var host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard let a = IPAddress(String(host)), let p = UInt16(portText), p > 0 else { return nil }
        if a.family == .ipv6 && !text.hasPrefix("[") { return nil }
        return (a, p)
    }

    public init?(_ text: String) {
        var spec = Substring(text)
        if let at = spec.lastIndex(of: "@") {
            let from = spec[spec.index(after: at)...]
            spec = spec[..<at]
            if let p = UInt16(from) {
                guard p > 0 else { return nil }
                sourcePort = p
            } else {
                guard let (a, p) = Self.hostPort(from) else { return nil }
                sourceAddress = a
                sourcePort = p
            }
        }
        guard let slash = spec.lastIndex(of: "/") else { return nil }
        switch spec[spec.index(after: slash)...].lowercased() {
        case "udp": proto = 17
        case "tcp": proto = 6
        default: return nil
        }
        guard let (a, p) = Self.hostPort(spec[..<slash]) else { return nil }
        if let s = sourceAddress, s.family != a.family { return nil }
        address = a
        port = p
    }

    public func matches(_ f: ObservedFlow) -> Bool {
        f.destination == address && f.destinationPort == port && f.proto == proto
            && (sourcePort.map { $0 == f.sourcePort } ?? true) && (sourceAddress.map { $0 == f.source } ?? true)
    }

    static func endpoint(_ a: IPAddress) -> String { a.family == .ipv6 ? "[\(a)]" : a.description }

    public var description: String {
        var s = Self.endpoint(address) + ":\(port)/\(proto == 6 ? "tcp" : "udp")"
        if let sourcePort { s += "@" + (sourceAddress.map { Self.endpoint($0) + ":" } ?? "") + "\(sourcePort)" }
        return s
    }
}

/// What the leak watch counted since its last reset.
public struct LeakReading: Sendable {
    /// Flows counted at the far ends of the client's links.
    public var flows: [ObservedFlow]
    /// Flows counted by uid in the client's last postrouting step.
    public var flowsByUID: [ObservedFlow]
    /// Packets counted that no flow holds (the set was full, or a fragment without ports).
    public var unitemised: UInt64
}

/// Counters for every packet leaving the client by its links: on the far end of each link (an
/// nftables table in that node counting each 5-tuple that arrives from the client, IPv4 and IPv6,
/// in the prerouting hook before anything else can drop it), and on the client itself by the
/// sending socket's uid (last in its postrouting hook: what its own rules let out). Neighbour
/// discovery and MLD (ICMPv6 130–137, 143) are not counted: the link needs them.
///
/// Each 5-tuple's element is added once (`add @set`, which does not refresh an element's expiry) to a
/// set whose elements expire after `elementTimeout`: what the kernel says is left of it when the watch
/// is read tells when the 5-tuple was first seen. An element that expired takes its packets with it,
/// which the rule counters (`total …`) then show as unitemised: a run that outlives the timeout fails
/// its leak checks, it does not pass them.
public struct LeakWatch {
    public static let table = "tunnelgate_lab_leaks"
    /// 30 days, in milliseconds: longer than any run, shorter than what the kernel's jiffies can hold.
    public static let elementTimeout: UInt64 = 30 * 86_400_000
    let lab: Lab

    public init(lab: Lab) { self.lab = lab }

    /// (node, interfaces) where packets from the client arrive.
    var farEnds: [(node: String, interfaces: [String])] {
        var out: [String: [String]] = [:]
        for l in lab.topology.clientLinks { out[l.far.node, default: []].append(l.far.interface) }
        return out.keys.sorted().map { ($0, out[$0]!) }
    }

    /// Installs (or replaces: zeroes) every counter.
    public func install() throws {
        for far in farEnds {
            try lab.namespace(of: far.node).nftables().replace(Self.farProgram(interfaces: far.interfaces))
        }
        if let client = lab.topology.client {
            let ifaces = lab.topology.clientLinks.map(\.near.interface)
            if !ifaces.isEmpty { try lab.namespace(of: client).nftables().replace(Self.clientProgram(interfaces: ifaces)) }
        }
    }

    public func reset() throws { try install() }

    // Register numbers of the key fields.
    private static func r(_ n: UInt32) -> NftRegister { .r32(n) }

    static func keyFields(_ family: IPFamily, uid: Bool) -> [(type: UInt32, length: UInt32)] {
        let addr: (UInt32, UInt32) = family == .ipv4 ? (7, 4) : (8, 16)
        return (uid ? [(24, 4)] : []) + [addr, addr, (12, 1), (13, 2), (13, 2)]
    }

    /// Loads saddr, daddr, l4proto, and the ports (ICMP: type and code) into consecutive registers from `first`.
    static func loadKey(_ family: IPFamily, from first: UInt32, icmp: Bool) -> [NftExpression] {
        let width: UInt32 = family == .ipv4 ? 1 : 4
        let saddrOffset: UInt32 = family == .ipv4 ? 12 : 8
        let daddrOffset: UInt32 = family == .ipv4 ? 16 : 24
        let proto = first + 2 * width
        return [
            .payload(.network, offset: saddrOffset, length: width * 4, r(first)),
            .payload(.network, offset: daddrOffset, length: width * 4, r(first + width)),
            .meta(.l4proto, r(proto)),
            .payload(.transport, offset: 0, length: icmp ? 1 : 2, r(proto + 1)),
            .payload(.transport, offset: icmp ? 1 : 2, length: icmp ? 1 : 2, r(proto + 2)),
        ]
    }

    static func match(interface: String, input: Bool, family: IPFamily) -> [NftExpression] {
        [.meta(input ? .inputName : .outputName, r(0)), .compare(.equal, r(0), NftExpression.interfaceName(interface)),
         .meta(.nfproto, r(0)), .compare(.equal, r(0), [family == .ipv4 ? 2 : 10])]
    }

    static func setName(_ family: IPFamily, uid: Bool) -> String {
        (uid ? "by_uid" : "from_client") + (family == .ipv4 ? "4" : "6")
    }

    static func farProgram(interfaces: [String]) -> NftProgram {
        var rules: [NftProgramRule] = []
        for i in interfaces {
            for f in [IPFamily.ipv4, .ipv6] {
                let m = match(interface: i, input: true, family: f)
                let icmp: UInt8 = f == .ipv4 ? 1 : 58
                if f == .ipv6 {
                    // Neighbour discovery and MLD: what the link itself needs, not traffic.
                    let nd: [NftExpression] = [.meta(.l4proto, r(1)), .compare(.equal, r(1), [58]),
                                               .payload(.transport, offset: 0, length: 1, r(1))]
                    rules.append(NftProgramRule(m + nd + [.compare(.greaterOrEqual, r(1), [130]), .compare(.lessOrEqual, r(1), [137]), .accept],
                                                comment: "neighbour discovery \(i)"))
                    rules.append(NftProgramRule(m + nd + [.compare(.equal, r(1), [143]), .accept], comment: "mld \(i)"))
                }
                rules.append(NftProgramRule(m + [.counter], comment: "total \(f == .ipv4 ? "ipv4" : "ipv6") \(i)"))
                rules.append(NftProgramRule(m + [.meta(.l4proto, r(1)), .compare(.equal, r(1), [icmp])]
                                            + loadKey(f, from: 0, icmp: true) + [.addToSet(set: setName(f, uid: false), key: r(0)), .accept],
                                            comment: "icmp \(i)"))
                rules.append(NftProgramRule(m + loadKey(f, from: 0, icmp: false) + [.addToSet(set: setName(f, uid: false), key: r(0)), .accept],
                                            comment: "flows \(i)"))
            }
        }
        return NftProgram(name: table, comment: "tunnelgate-lab: what arrives from the client",
                          sets: [IPFamily.ipv4, .ipv6].map { NftProgramSet(name: setName($0, uid: false), fields: keyFields($0, uid: false),
                                                                           dynamic: true, counters: true, size: 65535,
                                                                           timeoutMilliseconds: elementTimeout) },
                          chains: [NftProgramChain(name: "from_client", hook: .prerouting, priority: -450, rules: rules)])
    }

    static func clientProgram(interfaces: [String]) -> NftProgram {
        var rules: [NftProgramRule] = []
        for i in interfaces {
            for f in [IPFamily.ipv4, .ipv6] {
                let m = match(interface: i, input: false, family: f)
                let icmp: UInt8 = f == .ipv4 ? 1 : 58
                let uid: [NftExpression] = [.meta(.socketUID, r(0))]
                rules.append(NftProgramRule(m + [.meta(.l4proto, r(1)), .compare(.equal, r(1), [icmp])] + uid
                                            + loadKey(f, from: 1, icmp: true) + [.addToSet(set: setName(f, uid: true), key: r(0)), .accept],
                                            comment: "icmp by uid \(i)"))
                rules.append(NftProgramRule(m + uid + loadKey(f, from: 1, icmp: false) + [.addToSet(set: setName(f, uid: true), key: r(0)), .accept],
                                            comment: "flows by uid \(i)"))
            }
        }
        return NftProgram(name: table, comment: "tunnelgate-lab: what leaves the client, by uid",
                          sets: [IPFamily.ipv4, .ipv6].map { NftProgramSet(name: setName($0, uid: true), fields: keyFields($0, uid: true),
                                                                           dynamic: true, counters: true, size: 65535,
                                                                           timeoutMilliseconds: elementTimeout) },
                          chains: [NftProgramChain(name: "by_uid", hook: .postrouting, priority: 2_147_483_000, rules: rules)])
    }

    static func decode(_ e: NftSetElement, family: IPFamily, uid: Bool, at: String, readAt: UInt64 = 0) -> ObservedFlow? {
        let k = e.key
        let w = family == .ipv4 ? 4 : 16
        var o = 0
        var uidValue: UInt32?
        guard k.count >= (uid ? 4 : 0) + 2 * w + 12 else { return nil }
        if uid {
            uidValue = k[0..<4].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            o = 4
        }
        let src: IPAddress = family == .ipv4 ? .v4(IPv4Address(bytes: k[o..<o + 4])) : .v6(IPv6Address(bytes: k[o..<o + 16]))
        o += w
        let dst: IPAddress = family == .ipv4 ? .v4(IPv4Address(bytes: k[o..<o + 4])) : .v6(IPv6Address(bytes: k[o..<o + 16]))
        o += w
        let proto = k[o]
        o += 4
        let icmp = proto == 1 || proto == 58
        let sport = icmp ? UInt16(k[o]) : UInt16(k[o]) << 8 | UInt16(k[o + 1])
        o += 4
        let dport = icmp ? UInt16(k[o]) : UInt16(k[o]) << 8 | UInt16(k[o + 1])
        return ObservedFlow(uid: uidValue, proto: proto, source: src, sourcePort: sport, destination: dst,
                            destinationPort: dport, packets: e.packets, observedAt: at,
                            firstSeenMilliseconds: LeakTime.firstSeen(readAt: readAt, timeout: elementTimeout, expiresIn: e.expiresInMilliseconds))
    }

    public func read() throws -> LeakReading {
        var reading = LeakReading(flows: [], flowsByUID: [], unitemised: 0)
        for far in farEnds {
            let nft = try lab.namespace(of: far.node).nftables()
            // The totals first: a packet that comes while the two are read then counts in an element and
            // not in the total read before it, never in the total alone (which would read as unitemised).
            let total = try nft.ruleCounters(table: Self.table).filter { $0.comment?.hasPrefix("total ") == true }.reduce(0) { $0 + $1.packets }
            var itemised: UInt64 = 0
            for f in [IPFamily.ipv4, .ipv6] {
                let elements = try nft.elements(table: Self.table, set: Self.setName(f, uid: false))
                let readAt = LeakTime.now()
                for e in elements {
                    if let flow = Self.decode(e, family: f, uid: false, at: far.node, readAt: readAt) {
                        reading.flows.append(flow)
                        itemised += flow.packets
                    }
                }
            }
            if total > itemised { reading.unitemised += total - itemised }
        }
        if let client = lab.topology.client, !lab.topology.clientLinks.isEmpty {
            let nft = try lab.namespace(of: client).nftables()
            for f in [IPFamily.ipv4, .ipv6] {
                let elements = try nft.elements(table: Self.table, set: Self.setName(f, uid: true))
                let readAt = LeakTime.now()
                for e in elements {
                    if let flow = Self.decode(e, family: f, uid: true, at: client, readAt: readAt) { reading.flowsByUID.append(flow) }
                }
            }
        }
        let order: (ObservedFlow, ObservedFlow) -> Bool = { ($0.destination, $0.destinationPort, $0.source, $0.sourcePort) < ($1.destination, $1.destinationPort, $1.source, $1.sourcePort) }
        reading.flows.sort(by: order)
        reading.flowsByUID.sort(by: order)
        return reading
    }
}

/// Which leaks a verdict judges by their destination: all, only those to a declared carrier's address
/// (TunnelCrack's ServerIP: the carrier's host reached by something that is not the carrier 5-tuple),
/// or only those to any other address.
public enum LeakClass: String, Sendable, CaseIterable {
    case all
    case carrierAddresses = "carrier-addresses"
    case otherAddresses = "other-addresses"
}

/// The part of a reading a verdict looks at: flows first seen in [after, before) (ms since the
/// epoch; either end open), of one class.
public struct LeakWindow: Sendable, Hashable {
    public var after: UInt64?
    public var before: UInt64?
    public var only: LeakClass

    public init(after: UInt64? = nil, before: UInt64? = nil, only: LeakClass = .all) {
        self.after = after
        self.before = before
        self.only = only
    }

    /// A flow without a first-seen time is always inside: what cannot be dated is not excused.
    public func contains(_ f: ObservedFlow) -> Bool {
        guard let t = f.firstSeenMilliseconds else { return true }
        return (after.map { t >= $0 } ?? true) && (before.map { t < $0 } ?? true)
    }

    func judges(_ f: ObservedFlow, carriers: [CarrierSpec]) -> Bool {
        guard contains(f) else { return false }
        let toCarrier = carriers.contains { $0.address == f.destination }
        switch only {
        case .all: return true
        case .carrierAddresses: return toCarrier
        case .otherAddresses: return !toCarrier
        }
    }

    public var isEverything: Bool { after == nil && before == nil && only == .all }

    /// ` (first seen after 1764654001123, before …; to carrier addresses only)`; empty for everything.
    public var description: String {
        var parts: [String] = []
        if let after { parts.append("first seen at or after \(after) (\(LeakTime.clock(after)))") }
        if let before { parts.append("first seen before \(before) (\(LeakTime.clock(before)))") }
        if only != .all { parts.append("to \(only == .carrierAddresses ? "carrier" : "other") addresses only") }
        return parts.isEmpty ? "" : " (" + parts.joined(separator: ", ") + ")"
    }
}

/// The verdict of `expect-no-leaks`: every flow that is not to a declared carrier (or an allowed
/// prefix), and with `uid`, every carrier flow sent by another uid; within `window`.
public struct LeakVerdict: Sendable {
    public var leaks: [ObservedFlow]
    public var dnsLeaks: [ObservedFlow]
    public var carrierPackets: UInt64
    public var wrongUID: [ObservedFlow]
    public var unitemised: UInt64

    public var passed: Bool { leaks.isEmpty && dnsLeaks.isEmpty && wrongUID.isEmpty && unitemised == 0 }

    /// The packets of every leaked flow.
    public var leakedPackets: UInt64 { (leaks + dnsLeaks + wrongUID).reduce(0) { $0 + $1.packets } + unitemised }

    public init(reading: LeakReading, carriers: [CarrierSpec], allowed: [IPPrefix], uid: UInt32?, window: LeakWindow = LeakWindow()) {
        var leaks: [ObservedFlow] = [], dns: [ObservedFlow] = [], carrier: UInt64 = 0
        for f in reading.flows {
            if carriers.contains(where: { $0.matches(f) }) { carrier += f.packets; continue }
            if allowed.contains(where: { $0.contains(f.destination) }) { continue }
            guard window.judges(f, carriers: carriers) else { continue }
            var shown = f
            // The uid that sent it, when the client counted it too.
            shown.uid = reading.flowsByUID.first { $0.proto == f.proto && $0.destination == f.destination
                && $0.destinationPort == f.destinationPort && $0.sourcePort == f.sourcePort }?.uid
            if f.isDNS { dns.append(shown) } else { leaks.append(shown) }
        }
        self.leaks = leaks.sorted(by: Self.oldestFirst)
        self.dnsLeaks = dns.sorted(by: Self.oldestFirst)
        self.carrierPackets = carrier
        self.wrongUID = uid.map { u in
            reading.flowsByUID.filter { f in f.uid != u && carriers.contains { $0.matches(f) } && window.judges(f, carriers: carriers) }
        } ?? []
        // Packets no flow holds cannot be dated or placed: they count in every window.
        self.unitemised = reading.unitemised
    }

    /// Oldest first; the order of the reading (by destination) among equal or unknown times.
    static func oldestFirst(_ a: ObservedFlow, _ b: ObservedFlow) -> Bool {
        (a.firstSeenMilliseconds ?? 0) < (b.firstSeenMilliseconds ?? 0)
    }

    /// The kind `leaks show` gives a flow: carrier (one of `carriers`), allowed (to an `allowed` prefix),
    /// dns or other.
    public static func kind(of f: ObservedFlow, carriers: [CarrierSpec], allowed: [IPPrefix]) -> String {
        carriers.contains { $0.matches(f) } ? "carrier" : allowed.contains { $0.contains(f.destination) } ? "allowed" : f.isDNS ? "dns" : "other"
    }

    /// `leaks show --json`: every flow with its kind, what the client counted by uid, the packets no flow holds.
    public static func json(reading: LeakReading, carriers: [CarrierSpec], allowed: [IPPrefix]) -> String {
        let toCarrier = { (f: ObservedFlow) in carriers.contains { $0.address == f.destination } }
        let flows = reading.flows.map { $0.json(kind: kind(of: $0, carriers: carriers, allowed: allowed), toCarrierAddress: toCarrier($0)) }
        let byUID = reading.flowsByUID.map { $0.json(kind: kind(of: $0, carriers: carriers, allowed: allowed), toCarrierAddress: toCarrier($0)) }
        return "{\"flows\": [" + flows.joined(separator: ", ") + "], \"byUID\": [" + byUID.joined(separator: ", ")
            + "], \"unitemised\": \(reading.unitemised)}"
    }

    public var lines: [String] {
        leaks.map { "leak: \($0.descriptionWithTime)" } + dnsLeaks.map { "dns leak: \($0.descriptionWithTime)" }
            + wrongUID.map { "carrier from another uid: \($0.descriptionWithTime)" }
            + (unitemised > 0 ? ["\(unitemised) packets counted that no flow holds"] : [])
    }
}
