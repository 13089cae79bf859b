import LinuxSystem

/// A netfilter request refused: the operation in nft(8) words and the errno.
public struct NftablesError: Error, Sendable, CustomStringConvertible {
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
