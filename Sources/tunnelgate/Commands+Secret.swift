import LinuxSystem
import TunnelgateSecrets

/// `tunnelgate secret add NAME [--replace] | remove NAME | list`: the root-only secret store that
/// NEVPNProtocol.passwordReference and identityReference refer to (TunnelgateSecrets.SecretStore,
/// /etc/tunnelgate/secrets; TUNNELGATE_SECRETS names another directory, for tests). A secret comes in
/// on standard input only (never an argument, the environment or a file name a log could show), at
/// most 64 KB; one trailing newline is dropped, as a line typed or echoed ends in one. Nothing prints a
/// secret: `list` prints names.
extension CommandLine {
    static var secretStore: SecretStore {
        SecretStore(directory: ProcessControl.environmentValue("TUNNELGATE_SECRETS") ?? SecretStore.defaultDirectory)
    }

    static func secret(_ arguments: inout [String]) throws -> Int32 {
        guard let action = arguments.first else { throw UsageError(message: "secret needs add, remove or list", command: .secret) }
        arguments.removeFirst()
        let store = secretStore
        switch action {
        case "add":
            let replace = takeFlag(&arguments, "--replace")
            let name = try takePositional(&arguments, "NAME", .secret)
            try noMore(arguments, .secret)
            if let problem = SecretStore.nameProblem(name) { throw UsageError(message: problem, command: .secret) }
            let input = FileDescriptor.standardInput
            guard !input.isTerminal else {
                throw Failure("secret add reads the secret from standard input, and that is a terminal: pipe it in "
                              + "(tunnelgate secret add \(name) < FILE), so that it is never echoed or kept in a shell's history")
            }
            let buffer = try SecureBytes(count: SecretStore.maximumSize + 1)
            defer { buffer.wipe() }
            var length = 0
            let result = buffer.withUnsafeMutableBytes { bytes -> Result<Int, SystemCallError> in
                while length < bytes.count {
                    do throws(SystemCallError) {
                        guard let n = try input.read(into: UnsafeMutableRawBufferPointer(rebasing: bytes[length...])), n > 0 else { break }
                        length += n
                    } catch {
                        return .failure(error)
                    }
                }
                return .success(length)
            }
            if case .failure(let error) = result { throw Failure("reading the secret from standard input: \(error)") }
            guard length <= SecretStore.maximumSize else {
                throw Failure("the secret on standard input is over \(SecretStore.maximumSize) bytes; a secret is at most that")
            }
            var count = length
            buffer.withUnsafeBytes { if count > 0, $0[count - 1] == 10 { count -= 1 } }
            guard count > 0 else { throw Failure("no secret on standard input (it was empty)") }
            let stored = buffer.withUnsafeBytes { bytes in
                Result { () throws(SecretStore.Failure) in
                    try store.add(name, secret: UnsafeRawBufferPointer(rebasing: bytes[0..<count]), replacing: replace)
                }
            }
            if case .failure(let error) = stored { throw Failure(error.description) }
            print("stored \(name) (\(count) bytes) in \(store.directory); a configuration refers to it as passwordReference "
                  + "TunnelgateSecretStore.reference(named: \"\(name)\")")
            return ExitCode.success
        case "remove":
            let name = try takePositional(&arguments, "NAME", .secret)
            try noMore(arguments, .secret)
            do throws(SecretStore.Failure) { try store.remove(name) } catch { throw Failure(error.description) }
            print("removed \(name)")
            return ExitCode.success
        case "list":
            try noMore(arguments, .secret)
            let names: [String]
            do throws(SecretStore.Failure) { names = try store.names() } catch { throw Failure(error.description) }
            for name in names { print(name) }
            return ExitCode.success
        default:
            throw UsageError(message: "unknown secret action '\(action)' (add, remove or list)", command: .secret)
        }
    }
}
