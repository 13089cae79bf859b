import Glibc

extension ProcessControl {
    /// setenv(3): sets `name` for this process and the processes it starts from now on. Never for a
    /// secret (the environment is readable in /proc/PID/environ and inherited by every child).
    public static func setEnvironmentValue(_ name: String, _ value: String) throws(SystemCallError) {
        _ = try syscall("setenv(\(name))") { setenv(name, value, 1) }
    }
}
