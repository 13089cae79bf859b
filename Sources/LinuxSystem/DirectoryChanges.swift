import Glibc

/// inotify(7) on one directory: its descriptor becomes readable when an entry is created, moved in
/// or removed there (IN_CREATE | IN_MOVED_TO | IN_DELETE). The events only say "look again".
public struct DirectoryChanges: Sendable {
    public let descriptor: FileDescriptor

    /// inotify_init1(IN_CLOEXEC | IN_NONBLOCK) and inotify_add_watch of `path`.
    public init(watching path: String) throws(SystemCallError) {
        let fd = FileDescriptor(rawValue: try syscall("inotify_init1") { inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK)) })
        do throws(SystemCallError) {
            _ = try syscall("inotify_add_watch(\(path))") {
                inotify_add_watch(fd.rawValue, path, UInt32(IN_CREATE | IN_MOVED_TO | IN_DELETE))
            }
        } catch {
            fd.close()
            throw error
        }
        descriptor = fd
    }

    /// Reads and drops every pending event.
    public func drain() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { b in Result { () throws(SystemCallError) in try descriptor.read(into: b) } }
            guard case .success(let count?) = n, count > 0 else { return }
        }
    }

    public func close() { descriptor.close() }
}
