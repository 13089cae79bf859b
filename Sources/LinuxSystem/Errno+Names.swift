import Glibc

extension Errno {
    public static let outOfMemory = Errno(rawValue: ENOMEM)                  // ENOMEM
    public static let familyNotSupported = Errno(rawValue: EAFNOSUPPORT)     // EAFNOSUPPORT
    public static let notASocket = Errno(rawValue: ENOTSOCK)                 // ENOTSOCK
}
