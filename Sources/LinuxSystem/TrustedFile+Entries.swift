import Glibc

/// Changes to the entries of a directory opened as a TrustedFile, each relative to its descriptor
/// (never by a path that could be swapped): for stores that keep files in a checked directory.
extension TrustedFile {
    /// linkat(2): `name` becomes another name of the file `existing`, both in this directory. Fails
    /// with EEXIST when `name` exists: the atomic "create only if missing" of a file written under a
    /// temporary name.
    public func link(_ existing: String, as name: String) throws(SystemCallError) {
        precondition(status.kind == .directory, "link(_:as:) is for a directory")
        _ = try syscall("linkat(\(resolvedPath)/\(existing), \(resolvedPath)/\(name))") {
            linkat(descriptor.rawValue, existing, descriptor.rawValue, name, 0)
        }
    }

    /// renameat(2) within this directory: `name` replaced atomically by `existing`.
    public func rename(_ existing: String, to name: String) throws(SystemCallError) {
        precondition(status.kind == .directory, "rename(_:to:) is for a directory")
        _ = try syscall("renameat(\(resolvedPath)/\(existing), \(resolvedPath)/\(name))") {
            renameat(descriptor.rawValue, existing, descriptor.rawValue, name)
        }
    }

    /// unlinkat(2) of `name` in this directory, with its error (ENOENT when it does not exist).
    public func unlink(named name: String) throws(SystemCallError) {
        precondition(status.kind == .directory, "unlink(named:) is for a directory")
        _ = try syscall("unlinkat(\(resolvedPath)/\(name))") { unlinkat(descriptor.rawValue, name, 0) }
    }
}
