import Glibc

/// poll(2) on one descriptor.
public enum Poll {
    /// True when `fd` becomes readable within `timeoutMilliseconds` (negative: no limit).
    public static func readable(_ fd: FileDescriptor, timeoutMilliseconds: Int32) throws(SystemCallError) -> Bool {
        var pfd = pollfd(fd: fd.rawValue, events: Int16(POLLIN), revents: 0)
        return try syscall("poll") { poll(&pfd, 1, timeoutMilliseconds) } > 0
    }
}
