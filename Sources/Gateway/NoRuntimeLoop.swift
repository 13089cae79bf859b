import CTunnelgateShims
import Glibc
import LinuxSystem

/// Keeps a tunnel up with the `none` runtime: reads every packet the host
/// sends into the TUN, in batches, counts and drops it, until SIGINT,
/// SIGTERM or SIGHUP. Counters are published at most once a second.
public struct NoRuntimeLoop {
    public let tunnel: ActiveTunnel
    /// Blocks the termination signals and returns the descriptor that reports
    /// them. Call before any thread starts, so no thread takes them instead.
    public static func blockTerminationSignals() throws(SystemCallError) -> FileDescriptor {
        FileDescriptor(rawValue: try syscall("signalfd") { CTunnelgateShims_termination_signalfd() })
    }

    public init(tunnel: ActiveTunnel) { self.tunnel = tunnel }

    /// Runs until a termination signal; returns the signal number. With a
    /// monitor, changes others make to the tunnel are repaired as they come
    /// (`log` says what was repaired).
    public func run(signals: FileDescriptor, monitor: Monitor? = nil, log: (String) -> Void = { _ in }) -> Int32 {
        let tun = tunnel.tun.descriptor
        let mtu = tunnel.plan.mtu
        var counters = PacketCounters()
        var published = counters
        let bufferSize = 65536
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
        defer { buffer.deallocate() }
        var fds = [pollfd(fd: tun.rawValue, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: signals.rawValue, events: Int16(POLLIN), revents: 0)]
        fds += (monitor?.descriptors ?? []).map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        while true {
            let monitorTimeout = monitor?.timeoutMilliseconds() ?? -1
            let ready = poll(&fds, nfds_t(fds.count), monitorTimeout >= 0 ? min(monitorTimeout, 1000) : 1000)
            if let monitor {
                if fds[2...].contains(where: { $0.revents != 0 }) { monitor.notificationsArrived() }
                let repaired = monitor.runDueCheck(tunnel: tunnel)
                if !repaired.isEmpty {
                    log("repaired after an outside change: \(repaired.joined(separator: "; "))")
                    counters.repairs = UInt64(monitor.repairs)
                    counters.lastRepair = monitor.lastRepair
                    tunnel.publish(counters: counters)
                    published = counters
                }
            }
            if ready < 0 && errno != EINTR { return SIGTERM }
            if fds[1].revents != 0 {
                let signal = CTunnelgateShims_signalfd_read(signals.rawValue)
                if signal != 0 { tunnel.publish(counters: counters); return signal }
            }
            if fds[0].revents & Int16(POLLIN) != 0 {
                // Drain a batch: up to 256 packets per wake-up.
                for _ in 0..<256 {
                    guard let n = try? tun.read(into: buffer), n > 0 else { break }
                    counters.packetsFromHost += 1
                    counters.bytesFromHost += UInt64(n)
                    let version = buffer[0] >> 4
                    if version != 4 && version != 6 { counters.droppedNotIP += 1 }
                    else if n > mtu { counters.droppedOverMTU += 1 }
                    else { counters.droppedNoRuntime += 1 }
                }
            }
            if fds[0].revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { return SIGTERM }
            if counters != published, ready == 0 || counters.packetsFromHost - published.packetsFromHost >= 4096 {
                tunnel.publish(counters: counters)
                published = counters
            }
        }
    }
}
