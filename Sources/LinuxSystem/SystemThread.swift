import Glibc

/// A joinable POSIX thread (pthread_create / pthread_join). The new thread
/// inherits the creator's network namespace and signal mask, so a thread
/// started from a thread that entered a namespace runs in that namespace.
public struct SystemThread: Sendable {
    private let handle: pthread_t

    /// Starts `body` on a new thread.
    public static func spawn(_ body: @escaping @Sendable () -> Void) throws(SystemCallError) -> SystemThread {
        let box = Unmanaged.passRetained(Box(body))
        var handle = pthread_t()
        let rc = pthread_create(&handle, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            box.body()
            return nil
        }, box.toOpaque())
        guard rc == 0 else {
            box.release()
            throw SystemCallError("pthread_create", Errno(rawValue: rc))
        }
        return SystemThread(handle: handle)
    }

    /// Waits for the thread to return. Must be called exactly once.
    public func join() {
        let rc = pthread_join(handle, nil)
        precondition(rc == 0, "pthread_join: \(Errno(rawValue: rc)): a bug in Tunnelgate")
    }

    private final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
}
