import LinuxSystem

/// A netlink request the kernel refused: the operation in ip(8) words, the
/// errno, and the kernel's extended-ack message when it sent one.
/// "ip route add 10.0.0.0/8 dev tg0 table 7000: File exists (17)".
public struct NetlinkError: Error, Sendable, CustomStringConvertible {
    public let operation: String
    public let errno: Errno
    public let kernelMessage: String?

    public init(operation: String, errno: Errno, kernelMessage: String? = nil) {
        self.operation = operation
        self.errno = errno
        self.kernelMessage = kernelMessage
    }

    public var description: String {
        var s = "\(operation): \(errno)"
        if let kernelMessage, !kernelMessage.isEmpty { s += " (kernel: \(kernelMessage))" }
        return s
    }
}

/// Everything that went wrong in one batch, in request order.
public struct NetlinkBatchError: Error, Sendable, CustomStringConvertible {
    /// The index of each failed request in the batch, with its error.
    public let failures: [(index: Int, error: NetlinkError)]

    public var description: String {
        let shown = failures.prefix(5).map(\.error.description)
        let more = failures.count > 5 ? ["… and \(failures.count - 5) more"] : []
        return (shown + more).joined(separator: "\n")
    }
}
