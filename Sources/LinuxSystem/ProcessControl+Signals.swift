import Glibc

/// Signal numbers, for callers that do not import Glibc.
public enum SignalNumber {
    /// SIGTERM.
    public static let terminate: Int32 = SIGTERM
    /// SIGKILL.
    public static let kill: Int32 = SIGKILL
}

extension FileDescriptor {
    /// Opens (creating it 0600 when absent) a file whose only use is to be locked with flock(2):
    /// O_RDWR | O_CREAT | O_CLOEXEC.
    public static func openLockFile(_ path: String) throws(SystemCallError) -> FileDescriptor {
        try open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o600)
    }
}

/// Standard input, output and error, for commands that do not import Glibc.
public enum StandardStreams {
    /// Reads standard input to its end; at most `limit` bytes (more is an error, EFBIG).
    public static func readInput(limit: Int) throws(SystemCallError) -> [UInt8] {
        let fd = FileDescriptor(rawValue: 0)
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = try chunk.withUnsafeMutableBytes { b in
                Result { () throws(SystemCallError) in try fd.read(into: b) ?? 0 }
            }.get()
            if n == 0 { return out }
            out += chunk[0..<n]
            guard out.count <= limit else { throw SystemCallError("read(standard input: more than \(limit) bytes)", Errno(rawValue: EFBIG)) }
        }
    }

    /// Writes all of `text` to descriptor `fd` (1 or 2); a failure is dropped (nowhere to report it).
    public static func write(_ text: String, to fd: Int32) {
        try? FileDescriptor(rawValue: fd).writeAll(Array(text.utf8))
    }
}
