import LinuxSystem
import Runtimes
import TunnelgateSettings

/// A file the command reads (a configuration, a key file), opened once as a TrustedFile (StrictModes:
/// no file or directory on the way that anyone but root or this user can change, links followed only
/// out of such directories) and read from that descriptor into secure memory: a wg-quick file holds a
/// private key, a key file nothing else. The bytes are wiped when the last reference goes.
struct FileContents {
    var bytes: SecureBytes
    /// The checked file: its owner and mode, and `path` as the caller gave it.
    var file: TrustedFile

    /// The whole file; nil when it is longer than `limit`. Throws one line saying what is wrong.
    static func read(_ path: String, limit: Int) throws(Failure) -> FileContents? {
        let file: TrustedFile
        do { file = try TrustedFile.open(path) } catch {
            switch error {
            case .notFound: throw Failure("cannot read \(path): no such file")
            case .refused(let line): throw Failure(line)
            case .system(let e): throw Failure("cannot read \(path): \(e)")
            }
        }
        defer { file.close() }
        do {
            guard let bytes = try file.readSecret(limit: limit) else { return nil }
            return FileContents(bytes: bytes, file: file)
        } catch {
            throw Failure("cannot read \(path): \(error)")
        }
    }
}

/// Reads `runtime.privateKeyFile` and `presharedKeyFile` for the JSON parser:
/// regular, owner-only files of the running user, at most 4 KiB, opened as
/// TrustedFiles and read into secure memory; the keys decoded from them are
/// kept in secure memory too.
struct OwnerOnlySecretFiles: SecretFileReader {
    func readSecretFile(_ path: String) -> Result<any SecretMemory, SecretFileFailure> {
        let contents: FileContents
        do {
            guard let c = try FileContents.read(path, limit: 4096) else {
                return .failure(SecretFileFailure("\(path) is larger than 4096 bytes; a key file holds one base64 key"))
            }
            contents = c
        } catch {
            if error.description == "cannot read \(path): no such file" { return .failure(SecretFileFailure("\(path) does not exist")) }
            return .failure(SecretFileFailure(error.description))
        }
        if let problem = contents.file.ownerOnlyProblem() { return .failure(SecretFileFailure(problem)) }
        return .success(contents.bytes)
    }

    var secretMemory: any SecretMemoryAllocator { SecureMemoryAllocator() }
}
