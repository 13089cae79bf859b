import LinuxSystem

/// The programs installed with tunnelgate that it runs for a part of its work: the packet plane
/// (tunnelgate-plane, handed a tunnel's keys) and the on-demand watcher (tunnelgate-on-demand, which
/// links NetworkExtension and Foundation so that tunnelgate itself links neither). Each is found
/// beside tunnelgate's own executable (a build tree, a copy in /opt/tunnelgate/bin) or in its prefix's
/// lib/tunnelgate (an installed system: /usr/lib/tunnelgate), and is trusted only as tunnelgate's own
/// executable is: every directory on the way and the file itself owned by root or by the owner of
/// tunnelgate's executable, writable by nobody else (TrustedFile).
public enum CompanionExecutable {
    /// Where `name` is looked for, in order: `DIR/NAME`, then `DIR/../lib/tunnelgate/NAME`, DIR being
    /// the directory of `executable` (absolute: /proc/self/exe's target).
    public static func candidates(_ name: String, besides executable: String) -> [String] {
        /// The path without its last component ("" for one in /).
        func parent(_ path: String) -> String { String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }
        let directory = parent(executable)
        return ["\(directory)/\(name)", "\(parent(directory))/lib/tunnelgate/\(name)"]
    }

    /// The first of `candidates` that exists, opened (read-only, close-on-exec) for execveat, or why
    /// not; `role` names it in errors ("the packet plane's executable").
    public static func open(_ name: String, role: String) throws(SessionError) -> FileDescriptor {
        guard let own = ProcessControl.executablePath() else {
            throw SessionError("cannot read /proc/self/exe: \(role) is found beside tunnelgate's own")
        }
        let ownStatus: FileStatus?
        do throws(SystemCallError) { ownStatus = try FileSystem.status(own, followingSymbolicLinks: true) } catch {
            throw SessionError("tunnelgate's own executable \(own): \(error)")
        }
        guard let ownOwner = ownStatus?.owner else { throw SessionError("tunnelgate's own executable \(own) is gone") }
        let paths = candidates(name, besides: own)
        for path in paths {
            let file: TrustedFile
            do throws(TrustedFile.Failure) { file = try TrustedFile.open(path, trusting: ownOwner) } catch {
                if case .notFound = error { continue }
                throw SessionError("\(role): \(error)")
            }
            guard file.status.permissions & 0o111 != 0 else {
                file.close()
                throw SessionError("\(role) \(path) is not executable (mode 0\(String(file.status.permissions, radix: 8)))")
            }
            return file.descriptor
        }
        throw SessionError("\(role) is missing: neither \(paths.joined(separator: " nor ")) exists "
                           + "(it is built and installed with tunnelgate: swift build, Scripts/install.sh)")
    }
}
