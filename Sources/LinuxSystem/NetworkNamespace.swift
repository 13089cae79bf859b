import CTunnelgateShims
import Glibc

/// A network namespace held open by a descriptor (of /run/netns/NAME or
/// /proc/thread-self/ns/net). Equivalent to what `ip netns exec` enters.
public final class NetworkNamespace {
    public let descriptor: FileDescriptor
    /// What it is called: the name under /run/netns, or the argument it was opened by (a path,
    /// `pid:PID`, `docker:NAME`); nil for `current()`.
    public let name: String?

    /// The namespace `ip netns add NAME` made.
    public init(named name: String) throws(SystemCallError) {
        descriptor = try FileDescriptor.open("/run/netns/\(name)", O_RDONLY)
        self.name = name
    }

    /// The calling thread's namespace.
    public static func current() throws(SystemCallError) -> NetworkNamespace {
        NetworkNamespace(try FileDescriptor.open("/proc/thread-self/ns/net", O_RDONLY))
    }

    private init(_ fd: FileDescriptor) {
        descriptor = fd
        name = nil
    }

    /// A namespace whose descriptor was opened and checked by the caller (`init(path:label:)`).
    init(descriptor: FileDescriptor, name: String) {
        self.descriptor = descriptor
        self.name = name
    }

    deinit { descriptor.close() }

    /// Moves the calling thread into this namespace.
    public func enter() throws(SystemCallError) {
        _ = try syscall("setns(\(name ?? "netns"), CLONE_NEWNET)") { CTunnelgateShims_setns_network(descriptor.rawValue) }
    }

    /// Runs `body` with the calling thread in this namespace, then returns
    /// the thread to the namespace it was in. Sockets opened inside stay
    /// bound to this namespace for their whole life.
    public func perform<T, E: Error>(_ body: () throws(E) -> T) throws(NamespaceError<E>) -> T {
        let home: NetworkNamespace
        do { home = try .current() } catch { throw .enter(error) }
        do { try enter() } catch { throw .enter(error) }
        defer {
            // Failing to return would leave the thread in the wrong namespace: a bug we cannot recover from.
            do { try home.enter() } catch { preconditionFailure("cannot return to the original network namespace: \(error)") }
        }
        do { return try body() } catch { throw .body(error) }
    }
}

public enum NamespaceError<E: Error>: Error, CustomStringConvertible {
    case enter(SystemCallError)
    case body(E)

    public var description: String {
        switch self {
        case .enter(let e): return e.description
        case .body(let e): return "\(e)"
        }
    }
}
