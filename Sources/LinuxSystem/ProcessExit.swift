import CTunnelgateShims
import Glibc

/// A process followed through a pidfd (pidfd_open(2)): its descriptor becomes readable when the
/// process exits, whoever its parent is. The pidfd names that one process, so a pid reused later
/// is never mistaken for it.
public struct ProcessExit: Sendable {
    public let pid: Int32
    public let descriptor: FileDescriptor

    /// pidfd_open(PID). ESRCH when there is no such process.
    public init(pid: Int32) throws(SystemCallError) {
        let fd = try syscall("pidfd_open(\(pid))") { CTunnelgateShims_pidfd_open(pid) }
        self.pid = pid
        descriptor = FileDescriptor(rawValue: fd)
    }

    /// True once the process has exited (the pidfd is readable; a zombie counts as exited).
    public var hasExited: Bool { (try? Poll.readable(descriptor, timeoutMilliseconds: 0)) ?? false }

    public func close() { descriptor.close() }
}

/// inotify(7) on the directory holding one file: readable when that directory sees an entry removed
/// or moved away (IN_DELETE | IN_MOVED_FROM), or is itself removed, moved or unmounted
/// (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT). As `DirectoryChanges`, the events only say "look
/// again": whether the file is still the one watched is the caller's to check.
public struct EntryRemovals: Sendable {
    public let descriptor: FileDescriptor

    public init(inDirectoryOf path: String) throws(SystemCallError) {
        let directory = path.lastIndex(of: "/").map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let fd = FileDescriptor(rawValue: try syscall("inotify_init1") { inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK)) })
        do throws(SystemCallError) {
            _ = try syscall("inotify_add_watch(\(directory))") {
                inotify_add_watch(fd.rawValue, directory,
                                  UInt32(IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT))
            }
        } catch {
            fd.close()
            throw error
        }
        descriptor = fd
    }

    /// Reads and drops every pending event.
    public func drain() { DirectoryChanges(descriptor: descriptor).drain() }

    public func close() { descriptor.close() }
}

extension DirectoryChanges {
    init(descriptor: FileDescriptor) { self.descriptor = descriptor }
}
