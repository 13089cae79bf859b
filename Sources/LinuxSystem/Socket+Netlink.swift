import Glibc

/// A netlink socket's options (level SOL_NETLINK), each an `int` flag turned on. The numbers are
/// <linux/netlink.h>'s; shims.c checks them against the header.
public enum NetlinkOption: Int32, Sendable, CustomStringConvertible {
    /// NETLINK_CAP_ACK: an acknowledgement carries only the header of the request, not all of it.
    case capAcknowledgements = 10
    /// NETLINK_EXT_ACK: an error carries the kernel's reason as text (NLMSGERR_ATTR_MSG).
    case extendedAcknowledgements = 11
    /// NETLINK_GET_STRICT_CHK: dump requests are checked strictly and filtered in the kernel.
    case strictChecking = 12

    public var description: String {
        switch self {
        case .capAcknowledgements: "NETLINK_CAP_ACK"
        case .extendedAcknowledgements: "NETLINK_EXT_ACK"
        case .strictChecking: "NETLINK_GET_STRICT_CHK"
        }
    }
}

extension FileDescriptor {
    /// setsockopt(SOL_NETLINK, OPTION, 1).
    public func enable(_ option: NetlinkOption) throws(SystemCallError) {
        var one: Int32 = 1
        _ = try syscall("setsockopt(\(option))") {
            setsockopt(rawValue, SOL_NETLINK, option.rawValue, &one, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// SOCK_CLOEXEC, and SOCK_NONBLOCK when `nonBlocking`: socket(2)'s flags, for a C library that
    /// opens the socket itself (libmnl's mnl_socket_open2).
    public static func socketFlags(nonBlocking: Bool) -> Int32 {
        Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
    }
}
