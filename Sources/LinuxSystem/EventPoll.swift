import CTunnelgateShims
import Glibc

/// An epoll(7) set watching descriptors for input, level-triggered: its own descriptor is readable
/// while any of theirs is, so a loop that polls one descriptor hears of many.
public struct EventPoll: Sendable {
    public let descriptor: FileDescriptor

    /// epoll_create1(EPOLL_CLOEXEC).
    public init() throws(SystemCallError) {
        descriptor = FileDescriptor(rawValue: try syscall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) })
    }

    /// epoll_ctl(EPOLL_CTL_ADD, EPOLLIN): `fd` is watched for input.
    public func watch(_ fd: FileDescriptor) throws(SystemCallError) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = fd.rawValue
        _ = try syscall("epoll_ctl(EPOLL_CTL_ADD)") { epoll_ctl(descriptor.rawValue, EPOLL_CTL_ADD, fd.rawValue, &event) }
    }

    /// epoll_ctl(EPOLL_CTL_DEL): `fd` is no longer watched (closing it also removes it).
    public func unwatch(_ fd: FileDescriptor) throws(SystemCallError) {
        _ = try syscall("epoll_ctl(EPOLL_CTL_DEL)") { epoll_ctl(descriptor.rawValue, EPOLL_CTL_DEL, fd.rawValue, nil) }
    }

    /// epoll_wait without waiting, for up to `maximum` events: reads the set's readiness so that the
    /// set's descriptor reports only what is still pending after the caller has handled it. How many
    /// descriptors were ready.
    @discardableResult
    public func drain(maximum: Int) throws(SystemCallError) -> Int {
        var events = [epoll_event](repeating: epoll_event(), count: maximum)
        return Int(try syscall("epoll_wait") { epoll_wait(descriptor.rawValue, &events, Int32(events.count), 0) })
    }

    public func close() { descriptor.close() }
}
