import DNSConfig
import LinuxSystem
import TunnelgateSettings

/// A kernel parameter under /proc/sys that a tunnel needs set. The old value
/// is journaled before the write and restored on down.
public struct SysctlChange: Sendable, Hashable, CustomStringConvertible {
    /// Relative to /proc/sys, e.g. `net/ipv4/ip_forward`.
    public var path: String
    public var value: String
    /// A parameter of the tunnel's own interface: it goes with the interface, so it is neither
    /// journaled nor restored.
    public var goesWithTunnel = false

    public init(path: String, value: String, goesWithTunnel: Bool = false) {
        self.path = path
        self.value = value
        self.goesWithTunnel = goesWithTunnel
    }

    public var description: String { "sysctl -w \(path.replacing("/", with: "."))=\(value)" }
}

extension TunnelPlan {
    /// The kernel parameters this tunnel needs.
    public var sysctls: [SysctlChange] {
        var out: [SysctlChange] = []
        if routing.ipv4.isActive {
            // Reverse-path checks of marked carrier traffic use the mark, as the routing did.
            out.append(SysctlChange(path: "net/ipv4/conf/all/src_valid_mark", value: "1"))
        }
        // Forwarding only where it is needed. IPv4 forwards what arrives on an interface whose own
        // `forwarding` is on: the interfaces the sources are reached by, and the tunnel's (for replies).
        // IPv6 has no per-interface forwarding in the kernel (conf/IF/forwarding only changes how the
        // interface treats router advertisements): `all` it is.
        let sources = settings.forwarding?.sources ?? []
        if sources.contains(where: { $0.family == .ipv4 }) {
            for interface in forwardingInterfaces {
                out.append(SysctlChange(path: "net/ipv4/conf/\(interface)/forwarding", value: "1"))
            }
            out.append(SysctlChange(path: "net/ipv4/conf/\(interfaceName)/forwarding", value: "1", goesWithTunnel: true))
        }
        if sources.contains(where: { $0.family == .ipv6 }) { out.append(SysctlChange(path: "net/ipv6/conf/all/forwarding", value: "1")) }
        return out
    }
}

extension Engine {
    /// Reads a parameter in the tunnel's namespace.
    func readSysctl(_ path: String) throws(SystemCallError) -> String? {
        try inTunnelNamespace { () throws(SystemCallError) in
            try FileSystem.read("/proc/sys/\(path)").map { String(decoding: $0, as: UTF8.self).trimmingSpace }
        }
    }

    /// Writes a parameter in the tunnel's namespace.
    func writeSysctl(_ path: String, _ value: String) throws(SystemCallError) {
        try inTunnelNamespace { () throws(SystemCallError) in
            let fd = try FileDescriptor.open("/proc/sys/\(path)", .writeOnly)
            defer { fd.close() }
            try fd.writeAll(Array((value + "\n").utf8))
        }
    }

    func inTunnelNamespace<T>(_ body: () throws(SystemCallError) -> T) throws(SystemCallError) -> T {
        guard let namespace = isolatedNamespace else { return try body() }
        do { return try namespace.perform(body) } catch {
            switch error { case .enter(let e), .body(let e): throw e }
        }
    }

    func inTunnelNamespace<T>(_ body: () throws(DNSConfigError) -> T) throws(DNSConfigError) -> T {
        guard let namespace = isolatedNamespace else { return try body() }
        do { return try namespace.perform(body) } catch {
            switch error {
            case .enter(let e): throw .system(e)
            case .body(let e): throw e
            }
        }
    }

    /// Sets each parameter, journaling its value before. Also a value that
    /// is already right is journaled: another tunnel may have set it, and
    /// must hand its original over to this one when it goes.
    func applySysctls(_ changes: [SysctlChange], journal: Journal) throws(SystemCallError) {
        for change in changes {
            guard let old = try readSysctl(change.path) else {
                throw SystemCallError("read(/proc/sys/\(change.path))", .noSuchEntry)
            }
            if !change.goesWithTunnel { try journal.record(sysctl: change.path, oldValue: old) }
            if old != change.value { try writeSysctl(change.path, change.value) }
        }
    }

    /// Puts back the values a journal recorded. A parameter another tunnel
    /// of this namespace also changed stays as it is: the original value is
    /// handed to that tunnel's journal, to be restored when the last one goes.
    func restoreSysctls(_ journal: JournalContents) -> [String] {
        var failures: [String] = []
        for (path, old) in journal.sysctls {
            let others = state.tunnelNames().filter { $0 != journal.name }.filter { other in
                (try? Journal.read(path: state.journalPath(other)))??.sysctls[path] != nil
            }
            if let heir = others.first {
                do { try Journal.append(path: state.journalPath(heir), ["sysctl \(path) \(old)"]) } catch {
                    failures.append("handing sysctl \(path) over to tunnel \(heir): \(error)")
                }
                continue
            }
            // Already the old value (it was never changed): nothing to write, which also spares a
            // read-only /proc/sys (a container's, where the value was set by the engine's caller).
            if (try? readSysctl(path)) == old { continue }
            do { try writeSysctl(path, old) } catch { failures.append("restoring sysctl \(path)=\(old): \(error)") }
        }
        return failures
    }
}

extension String {
    var trimmingSpace: String {
        String(self.drop { $0 == " " || $0 == "\n" || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\n" || $0 == "\t" }.reversed())
    }
}
