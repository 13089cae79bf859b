import LinuxSystem

/// The plugin's state directory (`stateDirectory`, /run/tunnelgate-cni by default): root's, 0700.
/// For the attachment whose tunnel is NAME it holds NAME.record (AttachmentRecord), NAME.lock
/// (flock'ed while an operation on it runs), and the configuration `tunnelgate up` was given
/// (NAME.json, or NAME.conf linking to a wg-quick file).
public struct PluginState: Sendable {
    public let path: String

    /// Creates the directory (and its parents) when absent and checks it as a trusted directory:
    /// tunnelgate follows the links to wg-quick files kept in it only out of such a directory.
    public init(_ path: String) throws(CNIError) {
        self.path = path
        var prefix = ""
        for component in path.split(separator: "/") {
            prefix += "/" + component
            do { try FileSystem.makeDirectory(prefix, mode: prefix == path ? 0o700 : 0o755) } catch {
                throw CNIError(.ioFailure, "cannot create the state directory \(path)", details: error.description)
            }
        }
        let directory: TrustedFile
        do { directory = try TrustedFile.open(path, expecting: .directory) } catch {
            throw CNIError(.ioFailure, "the state directory \(path) cannot be used", details: error.description)
        }
        defer { directory.close() }
        guard directory.status.permissions & 0o077 == 0 else {
            throw CNIError(.ioFailure, "the state directory \(path) is open to others (mode \(String(directory.status.permissions & 0o777, radix: 8)))",
                           details: "it must be 0700: chmod 700 \(path)")
        }
    }

    public func recordPath(_ tunnel: String) -> String { "\(path)/\(tunnel).record" }
    public func lockPath(_ tunnel: String) -> String { "\(path)/\(tunnel).lock" }
    public func scratchPath(_ tunnel: String) -> String { "\(path)/\(tunnel).command" }
    public func configurationPath(_ tunnel: String, wgQuick: Bool) -> String { "\(path)/\(tunnel).\(wgQuick ? "conf" : "json")" }

    public func record(_ tunnel: String) throws(CNIError) -> AttachmentRecord? {
        let bytes: [UInt8]?
        do { bytes = try FileSystem.read(recordPath(tunnel)) } catch {
            throw CNIError(.ioFailure, "cannot read \(recordPath(tunnel))", details: error.description)
        }
        guard let bytes else { return nil }
        guard let record = AttachmentRecord.decode(bytes) else {
            throw CNIError(.ioFailure, "\(recordPath(tunnel)) is not a record tunnelgate-cni wrote")
        }
        return record
    }

    public func write(_ record: AttachmentRecord) throws(CNIError) {
        do { try FileSystem.writeAtomically(recordPath(record.tunnel), record.encoded(), mode: 0o600) } catch {
            throw CNIError(.ioFailure, "cannot write \(recordPath(record.tunnel))", details: error.description)
        }
    }

    public func removeRecord(_ tunnel: String) {
        FileSystem.remove(recordPath(tunnel))
    }

    /// Takes the attachment's lock, waiting at most `timeout` seconds for another operation on it.
    public func lock(_ tunnel: String, timeout: Double = 60) throws(CNIError) -> AttachmentLock {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.openLockFile(lockPath(tunnel)) } catch {
            throw CNIError(.ioFailure, "cannot open \(lockPath(tunnel))", details: error.description)
        }
        let deadline = ProcessControl.monotonicSeconds() + timeout
        while true {
            let held: Bool
            do { held = try fd.tryLockExclusive() } catch {
                fd.close()
                throw CNIError(.ioFailure, "cannot lock \(lockPath(tunnel))", details: error.description)
            }
            if held { return AttachmentLock(descriptor: fd, path: lockPath(tunnel)) }
            guard ProcessControl.monotonicSeconds() < deadline else {
                fd.close()
                throw CNIError(.tryAgainLater, "another operation on this attachment holds \(lockPath(tunnel))")
            }
            ProcessControl.sleep(seconds: 0.02)
        }
    }
}

/// An attachment's lock, held until `release` (or the process's end: the kernel drops flock locks).
public struct AttachmentLock: Sendable {
    let descriptor: FileDescriptor
    let path: String

    public func release(removing: Bool = false) {
        // Unlinked while still held, so that nobody locks the name between the two.
        if removing { FileSystem.remove(path) }
        descriptor.close()
    }
}
