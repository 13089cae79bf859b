import LinuxSystem
import Runtimes
import TunnelgateSettings

/// A file the command reads (a configuration, a key file), opened once as a TrustedFile (StrictModes:
/// no file or directory on the way that anyone but root or this user can change, links followed only
/// out of such directories) and read from that descriptor into secure memory: a wg-quick file holds a
/// private key, a key file nothing else. The bytes are wiped when the last reference goes.
struct FileContents {
    var bytes: SecureBytes
    /// The checked file: its owner and mode, and `path` as the caller gave it (closed once read).
    var file: TrustedFile

    enum Problem: Error {
        case missing
        /// One line saying what is wrong.
        case refused(String)
        /// Longer than the limit.
        case tooLong
    }

    static func read(_ path: String, limit: Int) throws(Problem) -> FileContents {
        let file: TrustedFile
        do { file = try TrustedFile.open(path) } catch {
            switch error {
            case .notFound: throw .missing
            case .refused(let line): throw .refused(line)
            case .system(let e): throw .refused("cannot read \(path): \(e)")
            }
        }
        defer { file.close() }
        let bytes: SecureBytes?
        do { bytes = try file.readSecret(limit: limit) } catch { throw .refused("cannot read \(path): \(error)") }
        guard let bytes else { throw .tooLong }
        return FileContents(bytes: bytes, file: file)
    }
}

/// Reads `runtime.privateKeyFile` and `presharedKeyFile` for the JSON parser:
/// regular, owner-only files of the running user, at most 4 KiB, opened as
/// TrustedFiles and read into secure memory; the keys decoded from them are
/// kept in secure memory too.
struct OwnerOnlySecretFiles: SecretFileReader {
    func readSecretFile(_ path: String) -> Result<any SecretMemory, SecretFileFailure> {
        let contents: FileContents
        do { contents = try FileContents.read(path, limit: 4096) } catch {
            switch error {
            case .missing: return .failure(SecretFileFailure("\(path) does not exist"))
            case .refused(let line): return .failure(SecretFileFailure(line))
            case .tooLong: return .failure(SecretFileFailure("\(path) is larger than 4096 bytes; a key file holds one base64 key"))
            }
        }
        if let problem = contents.file.ownerOnlyProblem() { return .failure(SecretFileFailure(problem)) }
        return .success(contents.bytes)
    }

    var secretMemory: any SecretMemoryAllocator { SecureMemoryAllocator() }
}
