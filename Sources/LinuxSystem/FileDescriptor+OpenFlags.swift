import Glibc

extension FileDescriptor {
    /// open(2)'s flags; `open` adds O_CLOEXEC to every set.
    public struct OpenFlags: OptionSet, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// O_RDONLY (0): the empty set.
        public static let readOnly = OpenFlags([])
        public static let writeOnly = OpenFlags(rawValue: O_WRONLY)   // O_WRONLY
        public static let readWrite = OpenFlags(rawValue: O_RDWR)     // O_RDWR
        public static let create = OpenFlags(rawValue: O_CREAT)       // O_CREAT
        /// With `create`: fail (EEXIST) when the file exists.
        public static let exclusive = OpenFlags(rawValue: O_EXCL)     // O_EXCL
        public static let truncate = OpenFlags(rawValue: O_TRUNC)     // O_TRUNC
        public static let append = OpenFlags(rawValue: O_APPEND)      // O_APPEND
        /// Fail (ELOOP) when the last component of the path is a symbolic link.
        public static let noFollow = OpenFlags(rawValue: O_NOFOLLOW)  // O_NOFOLLOW
    }

    /// open(2) with `flags` | O_CLOEXEC; `mode` is the new file's permissions with `create`.
    public static func open(_ path: String, _ flags: OpenFlags, mode: mode_t = 0) throws(SystemCallError) -> FileDescriptor {
        try open(path, flags.rawValue, mode: mode)
    }
}
