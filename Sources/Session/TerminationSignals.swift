import LinuxSystem

/// SIGINT, SIGTERM and SIGHUP as a descriptor to poll (signalfd; LinuxSystem's
/// TerminationSignalDescriptor).
public enum TerminationSignals {
    /// Blocks the signals and returns the descriptor that reports them. Call
    /// before any thread starts, so no thread takes them instead.
    public static func block() throws(SystemCallError) -> FileDescriptor {
        try TerminationSignalDescriptor().descriptor
    }

    /// The next pending signal on a descriptor `block` returned; 0 when none.
    public static func read(_ descriptor: FileDescriptor) -> Int32 {
        TerminationSignalDescriptor(descriptor).next() ?? 0
    }
}
