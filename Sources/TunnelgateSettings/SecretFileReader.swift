/// Reads the files a configuration names for key material
/// (`runtime.privateKeyFile`, `presharedKeyFile`), injected so that this
/// module stays free of libc, and gives the memory the keys decoded from
/// them live in. The command's reader opens each file as a TrustedFile,
/// refuses one that is not owner-only, and reads it into LinuxSystem's
/// SecureBytes; the parser decodes the key from those bytes into memory from
/// `secretMemory`, and the file's bytes are wiped when the parser lets go.
public protocol SecretFileReader: Sendable {
    /// The file's bytes, or why it may not be used (naming the path).
    func readSecretFile(_ path: String) -> Result<any SecretMemory, SecretFileFailure>
    /// Where keys decoded from those files are kept.
    var secretMemory: any SecretMemoryAllocator { get }
}

public struct SecretFileFailure: Error, Sendable, Equatable {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
}

/// The reader of `TunnelSettings.parse(json:)` when the caller gives none:
/// it reads nothing, so a configuration naming a key file is refused.
public struct NoSecretFiles: SecretFileReader {
    public init() {}
    public func readSecretFile(_ path: String) -> Result<any SecretMemory, SecretFileFailure> {
        .failure(SecretFileFailure("\(path) is not read here: key files are read by `tunnelgate validate`, `plan` and `up`"))
    }
    public var secretMemory: any SecretMemoryAllocator { UnprotectedSecretMemoryAllocator() }
}
