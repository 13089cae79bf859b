import CTunnelgateShims
import Glibc

/// An anonymous file (memfd_create) whose content can never change once written (F_SEAL_WRITE,
/// SHRINK, GROW and SEAL): how a process hands data to a child it spawns through a descriptor, instead
/// of through the environment or the command line, which other processes can read for as long as the
/// child lives. The file exists only while a descriptor names it; it never touches a disk.
public enum SealedFile {
    /// A new sealed file named `name` (as /proc shows it: `/memfd:NAME`) holding `contents`, open for
    /// reading, close-on-exec. The caller passes it on (posix_spawn's dup2) and closes it.
    public static func make(name: String, contents: [UInt8]) throws(SystemCallError) -> FileDescriptor {
        let fd = FileDescriptor(rawValue: try syscall("memfd_create(\(name))") { CTunnelgateShims_memfd_create(name) })
        do throws(SystemCallError) {
            try fd.writeAll(contents)
            _ = try syscall("fcntl(F_ADD_SEALS)") { CTunnelgateShims_seal_memfd(fd.rawValue) }
        } catch {
            fd.close()
            throw error
        }
        return fd
    }

    /// The content of `descriptor` when it is a file `make` made with this `name` (a memfd of that
    /// name with every seal, so nobody changed it since), at most `limit` bytes; nil otherwise (also
    /// when nothing is open there). Reads from offset 0 without moving the file offset.
    public static func read(_ descriptor: FileDescriptor, named name: String, limit: Int) -> [UInt8]? {
        let all = CTunnelgateShims_all_seals()
        guard CTunnelgateShims_memfd_seals(descriptor.rawValue) & all == all else { return nil }
        var target = [CChar](repeating: 0, count: 256)
        let n = readlink("/proc/self/fd/\(descriptor.rawValue)", &target, target.count - 1)
        guard n > 0 else { return nil }
        let link = String(decoding: target[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard link == "/memfd:\(name)" || link == "/memfd:\(name) (deleted)" else { return nil }
        var st = stat()
        guard fstat(descriptor.rawValue, &st) == 0, st.st_size >= 0, Int(st.st_size) <= limit else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var filled = 0
        while filled < bytes.count {
            let got = bytes.withUnsafeMutableBytes { pread(descriptor.rawValue, $0.baseAddress! + filled, $0.count - filled, off_t(filled)) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { return nil }
            filled += got
        }
        return bytes
    }
}

extension FileDescriptor {
    /// fcntl(F_DUPFD_CLOEXEC): a close-on-exec copy numbered `atLeast` or more (out of the way of the
    /// numbers a spawn's file actions give the child: 0–3).
    public func duplicate(atLeast minimum: Int32) throws(SystemCallError) -> FileDescriptor {
        FileDescriptor(rawValue: try syscall("fcntl(F_DUPFD_CLOEXEC)") { fcntl(rawValue, F_DUPFD_CLOEXEC, minimum) })
    }
}
