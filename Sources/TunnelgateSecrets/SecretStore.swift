import LinuxSystem

/// Tunnelgate's secret store: named secrets kept root-only on disk, for what a configuration must
/// not hold (NEVPNProtocol.passwordReference, identityReference). A configuration names a secret by
/// a reference (`reference(named:)`), never holds its bytes.
///
/// One file per secret, `DIRECTORY/NAME`, mode 0600, owned by the effective user (root), in a
/// directory of mode 0700 (default `/etc/tunnelgate/secrets`, created 0700 when missing, its parent
/// 0755). Every file and the directory are opened as TrustedFiles (the path walked from `/`, each
/// directory on the way root's or the user's and not writable by others, no symbolic link at the
/// secret itself), and a secret is read into SecureBytes (locked, out of core dumps, zeroed when
/// released). A secret is written under a temporary name, synced, then linked to its name (refused
/// when the name exists) or renamed over it (`replacing`), so a reader sees the old secret or the
/// new one, never part of one.
///
/// Errors name the secret and the file, never the secret's bytes.
public struct SecretStore: Sendable {
    public static let defaultDirectory = "/etc/tunnelgate/secrets"
    /// The largest secret: a password, a token, a PKCS#12 identity.
    public static let maximumSize = 64 << 10

    public let directory: String

    public init(directory: String = SecretStore.defaultDirectory) {
        self.directory = directory
    }

    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The name cannot name a secret: why.
        case invalidName(String)
        case notFound(String)
        case exists(String)
        /// The store or a file in it is not root-only (or otherwise not trusted): one line naming it.
        case refused(String)
        case tooLarge(String)
        case system(String)

        public var description: String {
            switch self {
            case .invalidName(let why): why
            case .notFound(let name): "no secret named '\(name)' in the secret store"
            case .exists(let name): "a secret named '\(name)' exists already (replace it, or remove it first)"
            case .refused(let line): line
            case .tooLarge(let line): line
            case .system(let line): line
            }
        }
    }

    /// Why `name` cannot name a secret, or nil: 1 to 64 characters from letters, digits, `.`, `_`, `-`,
    /// not starting with `.` or `-`.
    public static func nameProblem(_ name: String) -> String? {
        let bytes = Array(name.utf8)
        if bytes.isEmpty { return "a secret's name cannot be empty" }
        if bytes.count > 64 { return "a secret's name is at most 64 characters ('\(name.prefix(64))…' is \(bytes.count))" }
        let allowed = bytes.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2E || b == 0x5F || b == 0x2D
        }
        if !allowed { return "'\(name)': a secret's name has only letters, digits, '.', '_' and '-'" }
        if bytes[0] == 0x2E || bytes[0] == 0x2D { return "'\(name)': a secret's name cannot start with '.' or '-'" }
        return nil
    }

    // MARK: References

    static let referencePrefix = Array("tunnelgate-secret:".utf8)

    /// The opaque reference a configuration holds for the secret `name` (`tunnelgate-secret:NAME`).
    public static func reference(named name: String) -> [UInt8] {
        referencePrefix + Array(name.utf8)
    }

    /// The secret a reference names, or nil when it is not one of this store's references.
    public static func name(fromReference reference: [UInt8]) -> String? {
        guard reference.count > referencePrefix.count, Array(reference.prefix(referencePrefix.count)) == referencePrefix else {
            return nil
        }
        let name = String(decoding: reference.dropFirst(referencePrefix.count), as: UTF8.self)
        return nameProblem(name) == nil ? name : nil
    }

    // MARK: Operations

    /// Stores `secret` under `name`. Fails with `.exists` when the name is taken and not `replacing`
    /// (the stored secret then stays as it was).
    public func add(_ name: String, secret: UnsafeRawBufferPointer, replacing: Bool = false) throws(Failure) {
        if let problem = Self.nameProblem(name) { throw .invalidName(problem) }
        guard secret.count <= Self.maximumSize else {
            throw .tooLarge("the secret '\(name)' is \(secret.count) bytes; a secret is at most \(Self.maximumSize)")
        }
        let store = try openDirectory(creating: true)
        defer { store.close() }
        let temporary = ".\(name).new"
        // Left by a write that did not finish: never a secret anyone reads.
        try? store.unlink(named: temporary)
        // What fails from here leaves nothing behind but what was stored before.
        var linked = false
        do throws(SystemCallError) {
            let fd = try store.createFile(named: temporary, mode: 0o600)
            do throws(SystemCallError) {
                var written = 0
                while written < secret.count {
                    written += try fd.write(UnsafeRawBufferPointer(rebasing: secret[written...]))
                }
                try fd.sync()
            } catch {
                fd.close()
                throw error
            }
            fd.close()
            if replacing {
                try store.rename(temporary, to: name)
            } else {
                try store.link(temporary, as: name)
                linked = true
                try store.unlink(named: temporary)
            }
            try store.descriptor.sync()
        } catch {
            try? store.unlink(named: temporary)
            if !replacing, !linked, error.errno == .exists, error.call.hasPrefix("linkat") { throw .exists(name) }
            throw .system("storing the secret '\(name)' in \(directory): \(error)")
        }
    }

    /// The secret `name`, in secure memory.
    public func read(_ name: String) throws(Failure) -> SecureBytes {
        if let problem = Self.nameProblem(name) { throw .invalidName(problem) }
        let store = try openDirectory(creating: false)
        defer { store.close() }
        let path = store.resolvedPath + "/" + name
        let file: TrustedFile
        do { file = try TrustedFile.open(path) } catch {
            if case .notFound = error { throw .notFound(name) }
            throw .refused("the secret '\(name)': \(error)")
        }
        defer { file.close() }
        guard file.resolvedPath == path else {
            throw .refused("\(path) is a symbolic link (to \(file.resolvedPath)); a secret must be a file in the store; refusing it")
        }
        if let problem = file.ownerOnlyProblem(holding: "the secret '\(name)'") { throw .refused(problem) }
        let bytes: SecureBytes?
        do { bytes = try file.readSecret(limit: Self.maximumSize) } catch {
            throw .system("reading the secret '\(name)': \(error)")
        }
        guard let bytes else {
            throw .tooLarge("\(path) is \(file.status.size) bytes; a secret is at most \(Self.maximumSize)")
        }
        return bytes
    }

    /// The secret `name` found through a reference (`reference(named:)`).
    public func read(reference: [UInt8]) throws(Failure) -> SecureBytes {
        guard let name = Self.name(fromReference: reference) else {
            throw .invalidName("the reference does not name a secret of Tunnelgate's secret store (tunnelgate-secret:NAME)")
        }
        return try read(name)
    }

    public func remove(_ name: String) throws(Failure) {
        if let problem = Self.nameProblem(name) { throw .invalidName(problem) }
        let store = try openDirectory(creating: false)
        defer { store.close() }
        do throws(SystemCallError) {
            try store.unlink(named: name)
            try store.descriptor.sync()
        } catch {
            if error.errno == .noSuchEntry { throw .notFound(name) }
            throw .system("removing the secret '\(name)': \(error)")
        }
    }

    /// The names of the stored secrets, sorted (never their contents).
    public func names() throws(Failure) -> [String] {
        let store = try openDirectory(creating: false, missingIsEmpty: true)
        defer { store?.close() }
        guard let store else { return [] }
        return FileSystem.list(store.procPath).filter { Self.nameProblem($0) == nil }.sorted()
    }

    // MARK: The directory

    private func openDirectory(creating: Bool) throws(Failure) -> TrustedFile {
        guard let d = try openDirectory(creating: creating, missingIsEmpty: false) else { throw .notFound(directory) }
        return d
    }

    /// The store's directory, checked: trusted (TrustedFile), owned by the effective user, and not
    /// open to its group or others.
    private func openDirectory(creating: Bool, missingIsEmpty: Bool) throws(Failure) -> TrustedFile? {
        if creating { try createDirectories() }
        let store: TrustedFile
        do { store = try TrustedFile.open(directory, expecting: .directory) } catch {
            if case .notFound = error {
                if missingIsEmpty { return nil }
                throw .refused("the secret store \(directory) does not exist (add a secret to create it)")
            }
            throw .refused("the secret store: \(error)")
        }
        if store.status.permissions & 0o077 != 0 || store.status.owner != ProcessControl.effectiveUserID {
            let mode = String(store.status.permissions & 0o7777, radix: 8)
            store.close()
            throw .refused("the secret store \(directory) must be its owner's only (mode 0\(mode), owner uid \(store.status.owner)); "
                           + "chmod 700 \(directory)")
        }
        return store
    }

    private func createDirectories() throws(Failure) {
        var components = directory.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !components.isEmpty else { return }
        let last = components.removeLast()
        var path = directory.hasPrefix("/") ? "" : "."
        do throws(SystemCallError) {
            for c in components {
                path += "/" + c
                _ = try FileSystem.createDirectory(path, mode: 0o755)
            }
            _ = try FileSystem.createDirectory(path + "/" + last, mode: 0o700)
        } catch {
            throw .system("creating the secret store \(directory): \(error)")
        }
    }
}

extension SecretStore {
    /// Stores the bytes of `secret` (secure memory) under `name`.
    public func add(_ name: String, secret: SecureBytes, replacing: Bool = false) throws(Failure) {
        let result = secret.withUnsafeBytes { raw in
            Result { () throws(Failure) in try add(name, secret: raw, replacing: replacing) }
        }
        try result.get()
    }
}
