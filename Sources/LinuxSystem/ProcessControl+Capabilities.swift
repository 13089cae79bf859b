import CTunnelgateShims

/// Linux capabilities by their CAP_* numbers.
public enum Capability: Int, Sendable, CaseIterable {
    case chown = 0, dacOverride = 1, dacReadSearch = 2, fowner = 3, fsetid = 4, kill = 5, setgid = 6, setuid = 7
    case setpcap = 8, netBindService = 10, netBroadcast = 11, netAdmin = 12, netRaw = 13, ipcLock = 14
    case sysModule = 16, sysRawio = 17, sysChroot = 18, sysPtrace = 19, sysAdmin = 21, sysBoot = 22
    case sysNice = 23, sysResource = 24, sysTime = 25, mknod = 27, auditWrite = 29, setfcap = 31
    case bpf = 39, perfmon = 38, checkpointRestore = 40
}

extension ProcessControl {
    /// Keeps only `capabilities`: the rest leave the bounding, effective and permitted sets for good
    /// (inheritable and ambient become empty).
    public static func keepOnly(_ capabilities: Set<Capability>) throws(SystemCallError) {
        let mask = capabilities.reduce(UInt64(0)) { $0 | (1 << UInt64($1.rawValue)) }
        _ = try syscall("capset(keep only \(capabilities.count) capabilities)") { CTunnelgateShims_keep_capabilities(mask) }
    }
}
