import LinuxSystem
import Netlink
import TunnelgateSettings

/// An append-only record of every kernel object a tunnel creates, written
/// (and synced) before the objects are created, so that whatever happens to
/// the process, the next `up` or `down` of that name can remove exactly
/// what was made and nothing else.
///
/// One record per line, fields separated by spaces:
///   tunnelgate-journal 1
///   tunnel NAME slot S
///   link NAME                      a TUN interface
///   route TABLE unicast|throw PREFIX [via GATEWAY]
///   rule 4|6 PRIORITY TABLE FWMARK INVERT [suppress N] [to PREFIX] [ipproto P] [dport A-B] [uid A-B] [goto P | nop 0]
///   nft inet TABLE                 an nftables table (the kill switch)
///   sysctl PATH OLDVALUE           a kernel parameter's value before the tunnel changed it
///   file PATH                      a file the tunnel wrote (a provider's proxy files), removed with it
///   committed                      applied and verified
public struct JournalContents: Sendable, Equatable {
    public var name: String
    public var slot: TunnelSlot
    public var links: [String] = []
    public var routes: [RouteSpec] = []
    public var rules: [RuleSpec] = []
    public var nftTables: [String] = []
    /// Kernel parameters and their values before; the last record of a path wins.
    public var sysctls: [String: String] = [:]
    /// Files the tunnel wrote (absolute paths without spaces), in the order recorded.
    public var files: [String] = []
    public var committed = false
}

public final class Journal {
    public let path: String
    private let descriptor: FileDescriptor

    /// Starts a new journal (replacing none: the caller removed any residue first).
    public init(path: String, name: String, slot: TunnelSlot) throws(SystemCallError) {
        self.path = path
        descriptor = try FileDescriptor.open(path, [.writeOnly, .create, .truncate, .append], mode: 0o600)
        try append(["tunnelgate-journal 1", "tunnel \(name) slot \(slot.index)"])
    }

    /// Opens an existing journal to append to it (a running tunnel's).
    public static func reopen(path: String) throws(SystemCallError) -> Journal? {
        guard FileSystem.exists(path) else { return nil }
        return Journal(appendingTo: try FileDescriptor.open(path, [.writeOnly, .append]), path: path)
    }

    private init(appendingTo descriptor: FileDescriptor, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { descriptor.close() }

    /// Appends records and syncs them before returning.
    public func append(_ lines: [String]) throws(SystemCallError) {
        var text = ""
        for line in lines { text += line; text += "\n" }
        try descriptor.writeAll(Array(text.utf8))
        try descriptor.sync()
    }

    public func record(link name: String) throws(SystemCallError) {
        try append(["link \(name)"])
    }

    public func record(routes: [RouteSpec], rules: [RuleSpec]) throws(SystemCallError) {
        try append(Self.records(routes: routes, rules: rules))
    }

    /// The journal lines of routes and rules.
    public static func records(routes: [RouteSpec], rules: [RuleSpec]) -> [String] {
        var lines: [String] = []
        lines.reserveCapacity(routes.count + rules.count)
        for r in routes {
            var line = "route \(r.table) \(r.type == .throw ? "throw" : "unicast") \(r.destination)"
            if let g = r.gateway { line += " via \(g)" }
            lines.append(line)
        }
        for r in rules {
            var line = "rule \(r.family == .ipv4 ? 4 : 6) \(r.priority) \(r.table) \(r.fwmark ?? 0) \(r.invert ? 1 : 0)"
            if let n = r.suppressPrefixLength { line += " suppress \(n)" }
            if let d = r.destination { line += " to \(d)" }
            if let p = r.ipProtocol { line += " ipproto \(p)" }
            if let p = r.destinationPorts { line += " dport \(p.lowerBound)-\(p.upperBound)" }
            if let u = r.uidRange { line += " uid \(u.lowerBound)-\(u.upperBound)" }
            switch r.action {
            case .lookup: break
            case .goto(let target): line += " goto \(target)"
            case .nop: line += " nop 0"
            }
            lines.append(line)
        }
        return lines
    }

    public func record(nftTable name: String) throws(SystemCallError) {
        try append(["nft inet \(name)"])
    }

    public func record(sysctl path: String, oldValue: String) throws(SystemCallError) {
        try append(["sysctl \(path) \(oldValue)"])
    }

    /// The record of a file about to be written (its path has no space or line break: checked by the caller).
    public static func fileRecord(_ path: String) -> String { "file \(path)" }

    /// Appends records to the journal of another tunnel.
    public static func append(path: String, _ lines: [String]) throws(SystemCallError) {
        let fd = try FileDescriptor.open(path, [.writeOnly, .append])
        defer { fd.close() }
        try fd.writeAll(Array(lines.map { $0 + "\n" }.joined().utf8))
        try fd.sync()
    }

    public func recordCommitted() throws(SystemCallError) {
        try append(["committed"])
    }

    /// Reads a journal; nil when there is none. A torn last line (the
    /// process died mid-write) is ignored.
    public static func read(path: String) throws(SystemCallError) -> JournalContents? {
        guard let bytes = try FileSystem.read(path) else { return nil }
        var contents: JournalContents?
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            let f = line.split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
            guard let kind = f.first else { continue }
            switch kind {
            case "tunnel" where f.count == 4:
                guard let s = Int(f[3]), (0..<TunnelSlot.count).contains(s) else { continue }
                contents = JournalContents(name: f[1], slot: TunnelSlot(index: s))
            case "link" where f.count == 2:
                contents?.links.append(f[1])
            case "route" where f.count == 4 || f.count == 6:
                guard let table = UInt32(f[1]), let prefix = IPPrefix(f[3]) else { continue }
                let gateway = f.count == 6 ? IPAddress(f[5]) : nil
                contents?.routes.append(RouteSpec(destination: prefix, type: f[2] == "throw" ? .throw : .unicast,
                                                  table: table, gateway: gateway))
            case "rule" where f.count >= 6 && f.count % 2 == 0:
                guard let priority = UInt32(f[2]), let table = UInt32(f[3]), let mark = UInt32(f[4]) else { continue }
                var rule = RuleSpec(family: f[1] == "6" ? .ipv6 : .ipv4, priority: priority, table: table,
                                    fwmark: mark == 0 ? nil : mark, fwmask: mark == 0 ? nil : 0xffff_ffff,
                                    invert: f[5] == "1")
                // Optional fields follow as KEY VALUE pairs.
                func range<T: FixedWidthInteger>(_ text: String, _: T.Type) -> ClosedRange<T>? {
                    let parts = text.split(separator: "-")
                    guard parts.count == 2, let a = T(parts[0]), let b = T(parts[1]), a <= b else { return nil }
                    return a...b
                }
                var i = 6
                while i + 1 < f.count {
                    let value = f[i + 1]
                    switch f[i] {
                    case "suppress": rule.suppressPrefixLength = UInt32(value)
                    case "to": rule.destination = IPPrefix(value)
                    case "ipproto": rule.ipProtocol = UInt8(value)
                    case "dport": rule.destinationPorts = range(value, UInt16.self)
                    case "uid": rule.uidRange = range(value, UInt32.self)
                    case "goto": if let t = UInt32(value) { rule.action = .goto(t) }
                    case "nop": rule.action = .nop
                    default: break
                    }
                    i += 2
                }
                contents?.rules.append(rule)
            case "nft" where f.count == 3 && f[1] == "inet":
                contents?.nftTables.append(f[2])
            case "sysctl" where f.count == 3 && !f[1].contains(".."):
                contents?.sysctls[f[1]] = f[2]
            case "file" where f.count == 2 && f[1].hasPrefix("/") && !f[1].contains(".."):
                if contents?.files.contains(f[1]) == false { contents?.files.append(f[1]) }
            case "committed":
                contents?.committed = true
            default:
                continue
            }
        }
        return contents
    }
}
