import CPlaneSeccomp
import LinuxSystem

/// What every packet plane does first, before it reads a byte of its channel: it makes itself not
/// dumpable (no core file, no ptrace by its own uid: keys come next) and installs the seccomp
/// allow-list (CPlaneSeccomp), so that nothing the channel brings ever runs without it. The rest of
/// the sandbox (uid, capabilities, no_new_privs, mounts) is in place before exec (SandboxedProcess).
public enum PlaneLockDown {
    /// Both steps, or the first failure (the plane then exits before it reads anything).
    public static func apply() throws(SystemCallError) {
        try ProcessControl.protectSecrets()
        var message = [CChar](repeating: 0, count: 256)
        let rc = CPlaneSeccomp_install(Int32(CPlaneSeccomp_refuse_eperm.rawValue), ProcessControl.id, &message, message.count)
        guard rc == 0 else {
            let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw SystemCallError("seccomp (\(text))", Errno(rawValue: -rc))
        }
    }
}
