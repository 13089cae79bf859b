import Glibc
import LinuxSystem
import TunnelgateSettings

/// A file read through one descriptor, with what fstat(2) said about that
/// descriptor: the permissions checked are those of the bytes read.
struct FileContents {
    var bytes: [UInt8]
    var status: FileStatus

    /// nil when nothing exists at `path`. Stops after more than `limit`
    /// bytes (the caller sees `bytes.count > limit`).
    static func read(_ path: String, limit: Int = .max) throws(SystemCallError) -> FileContents? {
        let fd: FileDescriptor
        do throws(SystemCallError) {
            fd = try FileDescriptor.open(path, O_RDONLY)
        } catch where error.errno == .noSuchEntry {
            return nil
        }
        defer { fd.close() }
        let status = try fd.status()
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while bytes.count <= limit {
            let n = try chunk.withUnsafeMutableBytes { b in
                Result { () throws(SystemCallError) in try fd.read(into: b) ?? 0 }
            }.get()
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return FileContents(bytes: bytes, status: status)
    }
}

/// Why a file holding key material may not be used, or nil when it is
/// owner-only and the running user's: the rule of a callback runtime's
/// `secretFile` (Sources/Runtimes/Secret.swift). `holding` says what is in it.
func ownerOnlyProblem(_ path: String, _ status: FileStatus, holding: String? = nil) -> String? {
    let subject = holding.map { "\(path) holds \($0) and" } ?? path
    if status.permissions & 0o077 != 0 {
        return "\(subject) can be read by others (mode \(String(status.permissions & 0o777, radix: 8))); make it owner-only: chmod 600 \(path)"
    }
    if status.owner != geteuid() {
        return "\(subject) belongs to uid \(status.owner), not to uid \(geteuid()) that runs tunnelgate"
    }
    return nil
}

/// Reads `runtime.privateKeyFile` and `presharedKeyFile` for the JSON parser:
/// regular, owner-only files of the running user, at most 4 KiB.
struct OwnerOnlySecretFiles: SecretFileReader {
    func readSecretFile(_ path: String) -> Result<[UInt8], SecretFileFailure> {
        let file: FileContents
        do {
            guard let f = try FileContents.read(path, limit: 4096) else { return .failure(SecretFileFailure("\(path) does not exist")) }
            file = f
        } catch {
            return .failure(SecretFileFailure("cannot read \(path): \(error.errno)"))
        }
        guard file.status.kind == .regular else { return .failure(SecretFileFailure("\(path) is not a regular file")) }
        guard file.bytes.count <= 4096 else {
            return .failure(SecretFileFailure("\(path) is larger than 4096 bytes; a key file holds one base64 key"))
        }
        if let problem = ownerOnlyProblem(path, file.status) { return .failure(SecretFileFailure(problem)) }
        return .success(file.bytes)
    }
}
