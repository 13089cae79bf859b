import LinuxSystem

/// An rtnetlink request the kernel refused.
public typealias NetlinkError = KernelRequestError

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
