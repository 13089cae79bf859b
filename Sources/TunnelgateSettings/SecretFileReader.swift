/// Reads the files a configuration names for key material
/// (`runtime.privateKeyFile`, `presharedKeyFile`), injected so that this
/// module stays free of libc. The command's reader refuses a file that is not
/// owner-only, as it refuses a callback runtime's `secretFile`.
public protocol SecretFileReader: Sendable {
    /// The file's bytes, or why it may not be used (naming the path).
    func readSecretFile(_ path: String) -> Result<[UInt8], SecretFileFailure>
}

public struct SecretFileFailure: Error, Sendable, Equatable {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
}

/// The reader of `TunnelSettings.parse(json:)` when the caller gives none:
/// it reads nothing, so a configuration naming a key file is refused.
public struct NoSecretFiles: SecretFileReader {
    public init() {}
    public func readSecretFile(_ path: String) -> Result<[UInt8], SecretFileFailure> {
        .failure(SecretFileFailure("\(path) is not read here: key files are read by `tunnelgate validate`, `plan` and `up`"))
    }
}
