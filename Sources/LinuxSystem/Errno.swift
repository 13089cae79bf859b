import Glibc

/// An errno value with its C name and the C library's message.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's errno.
    public static var current: Errno { Errno(rawValue: errno) }

    public static let noSuchEntry = Errno(rawValue: ENOENT)        // ENOENT
    public static let noSuchProcess = Errno(rawValue: ESRCH)       // ESRCH
    public static let interrupted = Errno(rawValue: EINTR)         // EINTR
    public static let wouldBlock = Errno(rawValue: EAGAIN)         // EAGAIN / EWOULDBLOCK
    public static let exists = Errno(rawValue: EEXIST)             // EEXIST
    public static let noSuchDevice = Errno(rawValue: ENODEV)       // ENODEV
    public static let addressNotAvailable = Errno(rawValue: EADDRNOTAVAIL) // EADDRNOTAVAIL
    public static let busy = Errno(rawValue: EBUSY)                // EBUSY
    public static let permissionDenied = Errno(rawValue: EPERM)    // EPERM
    public static let accessDenied = Errno(rawValue: EACCES)       // EACCES
    public static let noChild = Errno(rawValue: ECHILD)            // ECHILD

    /// "File exists (17)".
    public var description: String {
        let message = strerror(rawValue).map { String(cString: $0) } ?? "errno"
        return "\(message) (\(rawValue))"
    }
}

/// A failed system call: "open(/dev/net/tun) failed: No such device (19)".
public struct SystemCallError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let errno: Errno
    /// Set when no call failed but a check of what the calls found refused it (TrustedFile, the state
    /// directory): the one line shown instead of "CALL failed: ERRNO".
    public let refusal: String?
    public init(_ call: String, _ errno: Errno) {
        self.call = call
        self.errno = errno
        refusal = nil
    }
    /// A refusal (EACCES): `line` names the file, what is wrong, its mode and owner.
    public init(refusing line: String) {
        call = line
        errno = Errno(rawValue: EACCES)
        refusal = line
    }
    public var description: String { refusal ?? "\(call) failed: \(errno)" }
}

/// Runs a libc call that returns -1 and sets errno on failure, retrying
/// EINTR. EBADF and EFAULT are bugs in this program, not conditions to
/// report: they trap.
@inline(__always)
public func syscall<T: FixedWidthInteger>(_ name: @autoclosure () -> String,
                                          _ body: () -> T) throws(SystemCallError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let e = Errno.current
        if e == .interrupted { continue }
        precondition(e.rawValue != EBADF && e.rawValue != EFAULT, "\(name()): \(e): a bug in Tunnelgate")
        throw SystemCallError(name(), e)
    }
}
