import CTunnelgateShims
import LinuxSystem

/// SIGINT, SIGTERM and SIGHUP as a descriptor to poll (signalfd).
public enum TerminationSignals {
    /// Blocks the signals and returns the descriptor that reports them. Call
    /// before any thread starts, so no thread takes them instead.
    public static func block() throws(SystemCallError) -> FileDescriptor {
        FileDescriptor(rawValue: try syscall("signalfd") { CTunnelgateShims_termination_signalfd() })
    }

    /// The next pending signal on a descriptor `block` returned; 0 when none.
    public static func read(_ descriptor: FileDescriptor) -> Int32 {
        CTunnelgateShims_signalfd_read(descriptor.rawValue)
    }
}
