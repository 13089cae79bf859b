/// Why a runtime could not be loaded, started or kept running. The text is
/// safe to show: secrets are scrubbed from anything the runtime said.
public struct RuntimeError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
