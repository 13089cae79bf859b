import CTunnelgateShims
import Glibc

extension ProcessControl {
    /// For a process that holds a key or secret, called once before (or right after) it reads one:
    ///
    /// - prctl(PR_SET_DUMPABLE, 0): the kernel writes no core dump of it, and only a tracer with
    ///   CAP_SYS_PTRACE may attach to it or read its memory (/proc/PID/mem); its /proc/PID files
    ///   belong to root;
    /// - setrlimit(RLIMIT_CORE, {0, 0}): no core file either way, and the process cannot raise the
    ///   limit again.
    ///
    /// execve resets the dumpable flag, so every process that holds a secret calls this itself (the
    /// detached `tunnelgate up`, a provider host, a packet plane). Idempotent.
    public static func protectSecrets() throws(SystemCallError) {
        _ = try syscall("setrlimit(RLIMIT_CORE, 0)") { CTunnelgateShims_disable_core_dumps() }
        _ = try syscall("prctl(PR_SET_DUMPABLE, 0)") { CTunnelgateShims_set_not_dumpable() }
    }

    /// prctl(PR_GET_DUMPABLE) != 0: whether the kernel would dump this process's core.
    public static var isDumpable: Bool {
        CTunnelgateShims_dumpable() != 0
    }
}
