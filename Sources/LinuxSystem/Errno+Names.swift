import Glibc

extension Errno {
    public static let outOfMemory = Errno(rawValue: ENOMEM)                  // ENOMEM
    public static let familyNotSupported = Errno(rawValue: EAFNOSUPPORT)     // EAFNOSUPPORT
    public static let notASocket = Errno(rawValue: ENOTSOCK)                 // ENOTSOCK
    public static let noData = Errno(rawValue: ENODATA)                      // ENODATA
    public static let noBufferSpace = Errno(rawValue: ENOBUFS)               // ENOBUFS
    public static let timedOut = Errno(rawValue: ETIMEDOUT)                  // ETIMEDOUT
    public static let inputOutput = Errno(rawValue: EIO)                     // EIO
    public static let connectionReset = Errno(rawValue: ECONNRESET)          // ECONNRESET
    public static let connectionAborted = Errno(rawValue: ECONNABORTED)      // ECONNABORTED
    public static let networkUnreachable = Errno(rawValue: ENETUNREACH)      // ENETUNREACH
    public static let hostUnreachable = Errno(rawValue: EHOSTUNREACH)        // EHOSTUNREACH
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)            // ENAMETOOLONG
    public static let notATerminal = Errno(rawValue: ENOTTY)                 // ENOTTY (an ioctl the file does not know)
}
