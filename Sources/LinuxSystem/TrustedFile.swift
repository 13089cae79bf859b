import CTunnelgateShims
import Glibc

/// A file opened once, the way sshd's StrictModes would trust it, and checked on the descriptors it
/// was opened through, never on a path that could be swapped between a check and a use.
///
/// The path is walked from `/` one component at a time: each is opened relative to its parent's
/// descriptor (openat, O_PATH | O_NOFOLLOW), and fstat(2) of that descriptor decides:
///
/// - every directory on the way is owned by root or by the trusted user (the effective uid by
///   default) and is not writable by its group or by others, except a root-owned sticky directory
///   (like /tmp, mode 1777), whose entries only their owners can rename or remove: the next component
///   in it must then be owned by root or the trusted user;
/// - a symbolic link is followed only out of a directory that passed those checks (and, in a sticky
///   directory, only a link root or the trusted user owns); its target is walked the same way, from `/`
///   or from the directory holding the link; at most 40 links;
/// - the file at the end is a regular file (or, when asked, a directory), owned by root or the trusted
///   user, and not writable by its group or by others. It is opened for reading (O_RDONLY | O_NOFOLLOW |
///   O_CLOEXEC) from its parent's descriptor and must be the very file the walk checked (device and
///   inode).
///
/// Anything else is refused with one line that names the file or directory, what is wrong, its mode
/// and owner: `/etc/tunnelgate/tg0.json: writable by others (mode 0666, owner root); refusing it`.
/// Callers read from `descriptor` (or load the file through `procPath`), never from the path again.
public struct TrustedFile: Sendable {
    /// What the walk must end at.
    public enum Expecting: Sendable {
        case regularFile
        case directory
    }

    public enum Failure: Error, Sendable, CustomStringConvertible, Equatable {
        /// Nothing exists at the path (a component is missing, or a link points nowhere): the path.
        case notFound(String)
        /// The file, or a directory or link on the way, can be changed by someone other than root or
        /// the trusted user, or is not what was expected: one line naming it, its mode and owner.
        case refused(String)
        /// A call failed for another reason (EACCES, ENOTDIR, ELOOP, …).
        case system(SystemCallError)

        public var description: String {
            switch self {
            case .notFound(let path): return "\(path): no such file"
            case .refused(let line): return line
            case .system(let e): return e.description
            }
        }

        public static func == (a: Failure, b: Failure) -> Bool { a.description == b.description }
    }

    /// The path as the caller gave it.
    public let path: String
    /// Where the walk ended: absolute, every symbolic link on the way replaced by its target.
    public let resolvedPath: String
    /// The checked file, open for reading (a directory: O_RDONLY | O_DIRECTORY), close-on-exec. Owned
    /// by the caller, who closes it (`close()`).
    public let descriptor: FileDescriptor
    /// What fstat(2) said of `descriptor` when it was checked.
    public let status: FileStatus

    /// `/proc/self/fd/N`: the opened file, for the calls that take only a path (dlopen, execve). Valid
    /// while `descriptor` is open.
    public var procPath: String { "/proc/self/fd/\(descriptor.rawValue)" }

    public func close() { descriptor.close() }

    /// For a file that holds a key or secret, on top of the walk's checks: why it may not be used
    /// (readable by its group or others; not the effective user's), or nil. `holding` says what is in
    /// it ("a private key"). Names the path as the caller gave it.
    public func ownerOnlyProblem(holding: String? = nil) -> String? {
        let subject = holding.map { "\(path) holds \($0) and" } ?? path
        if status.permissions & 0o077 != 0 {
            return "\(subject) can be read by others (mode \(String(status.permissions & 0o777, radix: 8))); "
                + "make it owner-only: chmod 600 \(path)"
        }
        if status.owner != geteuid() {
            return "\(subject) belongs to uid \(status.owner), not to uid \(geteuid()) that runs tunnelgate"
        }
        return nil
    }

    /// The most symbolic links one walk follows (the kernel's own limit, ELOOP).
    static let maximumLinks = 40

    /// Walks `path` (relative paths from the working directory, whose own ancestors are checked too)
    /// and opens what it ends at. `trusting` is the user besides root whose files and directories are
    /// trusted: the effective uid, so root trusts only root.
    public static func open(_ path: String, expecting: Expecting = .regularFile,
                            trusting uid: uid_t = geteuid()) throws(Failure) -> TrustedFile {
        guard !path.isEmpty else { throw .notFound(path) }
        var absolute = path
        if !path.hasPrefix("/") {
            guard let cwd = workingDirectory() else { throw .system(SystemCallError("getcwd", .current)) }
            absolute = cwd + "/" + path
        }
        var walk = Walk(given: path, uid: uid)
        defer { walk.closeAll() }
        try walk.start()
        var pending = components(absolute)
        var links = 0
        while !pending.isEmpty {
            let name = pending.removeFirst()
            if name == "." { continue }
            if name == ".." { walk.up(); continue }
            let isLast = pending.isEmpty
            let child = try walk.look(at: name)
            switch child.status.kind {
            case .symbolicLink:
                links += 1
                guard links <= maximumLinks else {
                    Glibc.close(child.fd)
                    throw .refused("\(child.path): more than \(maximumLinks) symbolic links on the way to \(path); refusing it")
                }
                let target: String
                do { target = try readLink(child.fd, child.path) } catch {
                    Glibc.close(child.fd)
                    throw error
                }
                Glibc.close(child.fd)
                walk.followedLink = true
                if target.hasPrefix("/") { try walk.restartAtRoot() }
                pending = components(target) + pending
            case .directory where !isLast:
                walk.enter(child)
            case .directory, .regular, .other:
                guard isLast else {
                    Glibc.close(child.fd)
                    throw .system(SystemCallError("openat(\(child.path)/…)", Errno.notADirectory))
                }
                defer { Glibc.close(child.fd) }
                return try walk.finish(child, name: name, expecting: expecting)
            }
        }
        // The path named the root directory itself (or only . and ..).
        return try walk.finishAtCurrentDirectory(expecting: expecting)
    }

    /// In a directory opened as a TrustedFile: creates `name` there (O_CREAT | O_EXCL | O_NOFOLLOW,
    /// never an existing file or a link) with `mode`, open for writing. The caller closes it.
    public func createFile(named name: String, mode: mode_t) throws(SystemCallError) -> FileDescriptor {
        precondition(status.kind == .directory, "createFile(named:) is for a directory")
        let fd = try syscall("openat(\(resolvedPath)/\(name), O_CREAT | O_EXCL)") {
            CTunnelgateShims_openat(descriptor.rawValue, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        }
        return FileDescriptor(rawValue: fd)
    }

    /// In a directory opened as a TrustedFile: unlinkat(2) of `name`.
    public func removeFile(named name: String) {
        _ = unlinkat(descriptor.rawValue, name, 0)
    }

    // MARK: Reading

    /// The whole file into secure memory (SecureBytes: locked, out of core dumps, zeroed on release):
    /// for files that hold a key or secret. At most `limit` bytes: a longer file is refused with its
    /// size (`nil`, the caller says so). Read through the descriptor, from offset 0.
    public func readSecret(limit: Int) throws(SystemCallError) -> SecureBytes? {
        guard status.size <= Int64(limit) else { return nil }
        let size = Int(status.size)
        let buffer = try SecureBytes(count: size)
        var filled = 0
        let fd = descriptor.rawValue
        while filled < size {
            let result = buffer.withUnsafeMutableBytes { b in
                Result { () throws(SystemCallError) in
                    try syscall("pread") { pread(fd, b.baseAddress! + filled, size - filled, off_t(filled)) }
                }
            }
            let n = try result.get()
            if n == 0 { break }
            filled += n
        }
        // A file that shrank or grew while it was read is not the one that was checked.
        var extra: UInt8 = 0
        let more = try syscall("pread") { pread(descriptor.rawValue, &extra, 1, off_t(size)) }
        CTunnelgateShims_wipe(&extra, 1)
        guard filled == size, more == 0 else {
            throw SystemCallError("reading \(resolvedPath) (it changed size while it was read)", Errno(rawValue: EAGAIN))
        }
        return buffer
    }

    /// The whole file (for files that hold nothing secret), at most `limit` bytes: nil when longer.
    public func readAll(limit: Int) throws(SystemCallError) -> [UInt8]? {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var offset = 0
        let fd = descriptor.rawValue
        while true {
            let n = try chunk.withUnsafeMutableBytes { b in
                Result { () throws(SystemCallError) in try syscall("pread") { pread(fd, b.baseAddress, b.count, off_t(offset)) } }
            }.get()
            if n == 0 { return out }
            out += chunk[0..<n]
            offset += n
            if out.count > limit { return nil }
        }
    }

    // MARK: The walk

    /// A directory the walk stands in (or the component it looks at).
    struct Entry {
        var fd: Int32
        var path: String
        var status: FileStatus
        /// Why this directory cannot be trusted: whatever the walk finds in it next is refused.
        var problem: String?
    }

    /// The directories from `/` to where the walk stands, each an O_PATH descriptor already checked.
    struct Walk {
        let given: String
        let uid: uid_t
        var stack: [Entry] = []
        /// A symbolic link was followed: the file's own path is not the one given.
        var followedLink = false

        init(given: String, uid: uid_t) {
            self.given = given
            self.uid = uid
        }

        mutating func closeAll() {
            for e in stack { Glibc.close(e.fd) }
            stack.removeAll()
        }

        mutating func start() throws(Failure) {
            let fd = CTunnelgateShims_openat(AT_FDCWD, "/", CTunnelgateShims_o_path() | O_DIRECTORY | O_CLOEXEC, 0)
            guard fd >= 0 else { throw .system(SystemCallError("open(/)", .current)) }
            let st = try fstatus(fd, "/")
            if let problem = directoryProblem(st) {
                Glibc.close(fd)
                throw .refused("/: \(problem) (\(describe(st))); refusing it")
            }
            stack = [Entry(fd: fd, path: "", status: st, problem: nil)]
        }

        mutating func restartAtRoot() throws(Failure) {
            closeAll()
            try start()
        }

        /// `..`: back to the directory this one was entered from (at `/`, `/` itself).
        mutating func up() {
            guard stack.count > 1 else { return }
            Glibc.close(stack.removeLast().fd)
        }

        mutating func enter(_ directory: Entry) {
            stack.append(directory)
        }

        var current: Entry { stack[stack.count - 1] }

        /// Opens `name` in the current directory without following it, and checks that the directory
        /// may hold it: every directory the walk entered passed `directoryProblem`, but a root-owned
        /// sticky one only holds what root or the trusted user owns.
        func look(at name: String) throws(Failure) -> Entry {
            let parent = current
            let path = parent.path + "/" + name
            let fd = CTunnelgateShims_openat(parent.fd, name, CTunnelgateShims_o_path() | O_NOFOLLOW | O_CLOEXEC, 0)
            guard fd >= 0 else {
                let e = Errno.current
                if e == .noSuchEntry { throw .notFound(path) }
                throw .system(SystemCallError("openat(\(path), O_PATH | O_NOFOLLOW)", e))
            }
            let st: FileStatus
            do { st = try fstatus(fd, path) } catch {
                Glibc.close(fd)
                throw error
            }
            if let problem = parent.problem {
                // Refused here rather than when the directory was entered, to say what was in it.
                Glibc.close(fd)
                if st.kind == .symbolicLink {
                    throw .refused("\(path): a symbolic link in \(parent.path), \(problem) (\(describe(parent.status))); "
                                   + "refusing it")
                }
                throw .refused("\(parent.path): \(problem), on the way to \(given) (\(describe(parent.status))); refusing it")
            }
            if isWritableSticky(parent.status), !isTrustedOwner(st.owner) {
                Glibc.close(fd)
                let what = st.kind == .symbolicLink ? "a symbolic link" : "owned by another user"
                throw .refused("\(path): \(what) in the sticky directory \(display(parent)) "
                               + "(\(describe(st))); refusing it")
            }
            return Entry(fd: fd, path: path, status: st, problem: st.kind == .directory ? directoryProblem(st) : nil)
        }

        /// The file the walk ends at: checked, then opened for reading from its parent and compared
        /// with what was checked.
        func finish(_ child: Entry, name: String, expecting: Expecting) throws(Failure) -> TrustedFile {
            try checkFinal(child, expecting: expecting)
            let flags = expecting == .directory ? O_RDONLY | O_DIRECTORY : O_RDONLY | O_NONBLOCK | O_NOCTTY
            let fd = CTunnelgateShims_openat(current.fd, name, flags | O_NOFOLLOW | O_CLOEXEC, 0)
            guard fd >= 0 else { throw .system(SystemCallError("openat(\(child.path), O_RDONLY | O_NOFOLLOW)", .current)) }
            return try opened(fd, as: child)
        }

        func finishAtCurrentDirectory(expecting: Expecting) throws(Failure) -> TrustedFile {
            let here = current
            let entry = Entry(fd: here.fd, path: here.path.isEmpty ? "/" : here.path, status: here.status, problem: nil)
            try checkFinal(entry, expecting: expecting)
            let fd = CTunnelgateShims_openat(here.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)
            guard fd >= 0 else { throw .system(SystemCallError("openat(\(entry.path), O_RDONLY)", .current)) }
            return try opened(fd, as: entry)
        }

        private func opened(_ fd: Int32, as checked: Entry) throws(Failure) -> TrustedFile {
            let st: FileStatus
            do { st = try fstatus(fd, checked.path) } catch {
                Glibc.close(fd)
                throw error
            }
            guard st.device == checked.status.device, st.inode == checked.status.inode else {
                Glibc.close(fd)
                throw .refused("\(checked.path): replaced while it was being opened; refusing it")
            }
            if st.kind == .regular {
                // Opened O_NONBLOCK only so that a FIFO swapped in could not block the open.
                let flags = fcntl(fd, F_GETFL)
                if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
            }
            return TrustedFile(path: given, resolvedPath: checked.path, descriptor: FileDescriptor(rawValue: fd), status: st)
        }

        private func checkFinal(_ entry: Entry, expecting: Expecting) throws(Failure) {
            let st = entry.status
            let name = !followedLink ? given : "\(entry.path) (reached from \(given))"
            switch (expecting, st.kind) {
            case (.regularFile, .regular), (.directory, .directory): break
            case (.regularFile, _):
                throw .refused("\(name): not a regular file (\(kindName(st.kind))); refusing it")
            case (.directory, _):
                throw .refused("\(name): not a directory (\(kindName(st.kind))); refusing it")
            }
            if let problem = writableProblem(st.permissions) {
                throw .refused("\(name): \(problem) (\(describe(st))); refusing it")
            }
            if !isTrustedOwner(st.owner) {
                throw .refused("\(name): owned by another user (\(describe(st))); refusing it")
            }
        }

        // MARK: Rules

        func isTrustedOwner(_ owner: uid_t) -> Bool { owner == 0 || owner == uid }

        /// Root-owned, sticky and writable by others or its group (/tmp): entries only their owner
        /// (or root) can rename or remove.
        func isWritableSticky(_ st: FileStatus) -> Bool {
            st.owner == 0 && st.permissions & mode_t(S_ISVTX) != 0 && st.permissions & 0o022 != 0
        }

        /// Why a directory on the way cannot be trusted, or nil.
        func directoryProblem(_ st: FileStatus) -> String? {
            if !isTrustedOwner(st.owner) { return "a directory owned by another user" }
            if isWritableSticky(st) { return nil }
            return writableProblem(st.permissions).map { "a directory \($0)" }
        }

        func writableProblem(_ permissions: mode_t) -> String? {
            if permissions & 0o002 != 0 { return "writable by others" }
            if permissions & 0o020 != 0 { return "writable by its group" }
            return nil
        }

        func display(_ entry: Entry) -> String { entry.path.isEmpty ? "/" : entry.path }
    }

    // MARK: Helpers

    static func components(_ path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    static func workingDirectory() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func readLink(_ fd: Int32, _ path: String) throws(Failure) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = CTunnelgateShims_readlink_fd(fd, &buffer, buffer.count)
        guard n >= 0 else { throw .system(SystemCallError("readlinkat(\(path))", .current)) }
        guard n < buffer.count else { throw .refused("\(path): a symbolic link longer than PATH_MAX; refusing it") }
        guard n > 0 else { throw .notFound(path) }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

private func fstatus(_ fd: Int32, _ path: String) throws(TrustedFile.Failure) -> FileStatus {
    var st = stat()
    guard fstat(fd, &st) == 0 else { throw .system(SystemCallError("fstat(\(path))", .current)) }
    return FileStatus(st)
}

/// "mode 0644, owner root" / "mode 1777, owner uid 65534".
func describe(_ st: FileStatus) -> String {
    let digits = String(st.permissions & 0o7777, radix: 8)
    return "mode \(String(repeating: "0", count: max(0, 4 - digits.count)))\(digits), owner \(st.owner == 0 ? "root" : "uid \(st.owner)")"
}

private func kindName(_ kind: FileStatus.Kind) -> String {
    switch kind {
    case .regular: "a regular file"
    case .directory: "a directory"
    case .symbolicLink: "a symbolic link"
    case .other: "a device, socket or FIFO"
    }
}
