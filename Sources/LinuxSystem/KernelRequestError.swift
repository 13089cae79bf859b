/// A netlink request the kernel refused (rtnetlink or nf_tables): the
/// operation in ip(8)/nft(8) words, the errno, and the kernel's
/// extended-ack message when it sent one.
/// "ip route add 10.0.0.0/8 dev tg0 table 7460: File exists (17)".
public struct KernelRequestError: Error, Sendable, CustomStringConvertible {
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
