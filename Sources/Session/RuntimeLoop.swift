import CTunnelgateShims
import Engine
import RuntimeABI
import TUN
import Glibc
import LinuxSystem

/// Runs a tunnel until a termination signal, a `stop` on its control
/// socket, or its runtime's failure. Without a runtime (`"kind": "none"`)
/// packets read from the TUN are counted and dropped.
///
/// Callback path: packets are read from the TUN in batches of up to 64 and
/// sent in with one packet_in_batch call per batch when the runtime has it,
/// else with packet_in one by one. On QUEUE_FULL the packet and the rest of its batch
/// are kept and sent again after a short, growing pause (20 µs doubling to
/// 2 ms, timed with ppoll's nanoseconds); meanwhile the TUN is
/// not read, so the kernel's queue pushes back on the senders. Nothing is
/// dropped for backpressure. Packets the runtime writes arrive through the
/// writer callback (TunWriter) on its own threads.
public final class RuntimeLoop {
    public enum Exit: Sendable, Equatable {
        case signal(Int32)
        case runtimeFailed(String)
    }

    let tunnel: ActiveTunnel
    let host: HostedRuntime?
    var counters = PacketCounters()
    /// Packets from the host over the MTU (the writer counts the runtime's).
    private var hostOverMTU: UInt64 = 0
    /// Hand-offs to the runtime and the time spent inside them (published as handOffs, handOffSeconds).
    private var handOffs: UInt64 = 0
    private var handOffSeconds: Double = 0
    private var published: PacketCounters?
    private var publishedRuntimeStatus: String?
    private var lastState: RuntimeState?

    static let batch = 64
    static let slotSize = 65536

    public init(tunnel: ActiveTunnel, host: HostedRuntime?, initialState: RuntimeState?) {
        self.tunnel = tunnel
        self.host = host
        self.lastState = initialState
    }

    public func run(signals: FileDescriptor, monitor: Monitor?, control: ControlServer?, log: (String) -> Void) -> Exit {
        let tun = tunnel.tun.descriptor
        let mtu = tunnel.plan.mtu
        let readsTun = host?.packetPath != .fd
        let slots = UnsafeMutableRawPointer.allocate(byteCount: Self.batch * Self.slotSize, alignment: 16)
        defer { slots.deallocate() }
        // The batch as packet_in_batch takes it: slot addresses (fixed) and lengths, allocated once.
        let packets = UnsafeMutablePointer<UnsafePointer<UInt8>?>.allocate(capacity: Self.batch)
        defer { packets.deallocate() }
        for i in 0..<Self.batch {
            packets[i] = UnsafePointer((slots + i * Self.slotSize).assumingMemoryBound(to: UInt8.self))
        }
        let lengths = UnsafeMutablePointer<Int>.allocate(capacity: Self.batch)
        defer { lengths.deallocate() }
        lengths.initialize(repeating: 0, count: Self.batch)
        var pendingStart = 0, pendingEnd = 0
        var retryAt: Double?
        /// Set once the monitor failed the tunnel closed.
        var closed = false
        // Backpressure retries start at 20 µs: a runtime's sender drains its queue fast.
        var backoff = 0.00002
        var nextStatusPoll = ProcessControl.monotonicSeconds()
        var nextPublish = ProcessControl.monotonicSeconds() + 1

        var fds = [pollfd(fd: tun.rawValue, events: 0, revents: 0),
                   pollfd(fd: signals.rawValue, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: control?.descriptor ?? -1, events: Int16(POLLIN), revents: 0)]
        fds += (monitor?.descriptors ?? []).map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        var messages: (([UInt8]) -> Result<[UInt8], ControlFailure>)?
        if let host {
            messages = { (bytes: [UInt8]) -> Result<[UInt8], ControlFailure> in
                do throws(RuntimeError) { return .success(try host.appMessage(bytes)) } catch { return .failure(ControlFailure(error.description)) }
            }
        }

        /// NEVPNStatus: the runtime's (connected without one), reasserting while no carrier endpoint has a path.
        func status(runtime: TunnelStatus) -> TunnelStatus {
            CarrierPath.tunnelStatus(runtime: runtime, carrierPathGone: monitor?.carrierPathGone ?? false)
        }

        /// Whether the host sends this packet in at all; when not, it is dropped and counted here.
        func passesHostChecks(_ i: Int) -> Bool {
            let version = packets[i]![0] >> 4
            if version != 4 && version != 6 {
                counters.droppedNotIP += 1
                return false
            }
            if lengths[i] > mtu {
                hostOverMTU += 1
                return false
            }
            return true
        }

        /// Sends pending packets in, in order, as one batch per call, until one has to wait.
        func deliver() {
            while pendingStart < pendingEnd {
                guard let host else {
                    counters.droppedNoRuntime += UInt64(pendingEnd - pendingStart)
                    break
                }
                let began = ProcessControl.monotonicSeconds()
                let result = host.packetIn(batch: packets + pendingStart, lengths: lengths + pendingStart,
                                           count: pendingEnd - pendingStart)
                handOffSeconds += ProcessControl.monotonicSeconds() - began
                handOffs += 1
                pendingStart += result.accepted
                switch result.next {
                case .accepted:
                    break
                case .retryLater:
                    counters.queueFull += 1
                    retryAt = ProcessControl.monotonicSeconds() + backoff
                    backoff = min(backoff * 2, 0.002)
                    return
                case .refused:
                    counters.droppedRefused += 1
                    pendingStart += 1
                }
            }
            pendingStart = 0
            pendingEnd = 0
            retryAt = nil
            backoff = 0.00002
        }

        while true {
            let now = ProcessControl.monotonicSeconds()
            // Read the TUN only when nothing is waiting for the runtime's queue (and never once failed closed).
            fds[0].events = readsTun && pendingEnd == 0 && !closed ? Int16(POLLIN) : 0
            var timeout = nextStatusPoll - now
            if let retryAt { timeout = min(timeout, retryAt - now) }
            if let monitor, monitor.timeoutMilliseconds() >= 0 { timeout = min(timeout, Double(monitor.timeoutMilliseconds()) / 1000) }
            let ready = CTunnelgateShims_poll_nanoseconds(&fds, UInt(fds.count), Int64(max(0, timeout * 1e9)))
            if ready < 0 && errno != EINTR { return .signal(SIGTERM) }

            if fds[1].revents != 0 {
                let signal = CTunnelgateShims_signalfd_read(signals.rawValue)
                if signal != 0 { publish(); return .signal(signal) }
            }
            if fds[2].revents != 0, control?.serve(message: messages) == .stop {
                publish()
                return .signal(SIGTERM)
            }
            if let retryAt, ProcessControl.monotonicSeconds() >= retryAt {
                counters.retries += 1
                deliver()
            }
            if fds[0].revents & Int16(POLLIN) != 0, pendingEnd == 0 {
                // Up to a batch of reads per wake-up; a packet the host drops leaves its slot to the next read.
                // Every packet read is counted here, before any drop: packetsFromHost less the drops
                // (not IP, over the MTU, refused, no runtime) is what the runtime took, so a packet lost
                // in between would show.
                var count = 0
                for _ in 0..<Self.batch {
                    let n = read(tun.rawValue, slots + count * Self.slotSize, Self.slotSize)
                    if n <= 0 { break }
                    counters.packetsFromHost += 1
                    counters.bytesFromHost += UInt64(n)
                    lengths[count] = n
                    if passesHostChecks(count) { count += 1 }
                }
                pendingStart = 0
                pendingEnd = count
                deliver()
            }
            if let monitor {
                if fds[3...].contains(where: { $0.revents != 0 }) { monitor.notificationsArrived() }
                let pass = monitor.runDueCheck(tunnel: tunnel)
                if !pass.repaired.isEmpty { log("repaired after an outside change: \(pass.repaired.joined(separator: "; "))") }
                for line in pass.problems { log(line) }
                if !pass.isEmpty {
                    counters.repairs = UInt64(monitor.repairs)
                    counters.lastRepair = monitor.lastRepair
                    counters.failedClosed = monitor.failedClosed
                    publish()
                }
                if pass.failedClosed, !closed {
                    // Failed closed: the runtime stops, the tunnel is disconnected, and this loop only
                    // keeps the block-all table in place (the monitor) until SIGTERM, `down` or `stop`.
                    closed = true
                    host?.stop()
                    pendingStart = 0
                    pendingEnd = 0
                    retryAt = nil
                    messages = nil
                    tunnel.publish(status: .disconnected)
                }
                // Lines come with every change of an endpoint's path, so with every change of the verdict.
                let carrier = closed ? [] : monitor.runDueCarrierCheck(tunnel: tunnel)
                if !carrier.isEmpty {
                    for line in carrier { log(line) }
                    let combined = status(runtime: lastState?.tunnelStatus ?? .connected)
                    if combined != tunnel.record.status { tunnel.publish(status: combined) }
                }
            }
            let after = ProcessControl.monotonicSeconds()
            if let host, !closed, after >= nextStatusPoll {
                nextStatusPoll = after + 0.25
                do {
                    let state = try host.status()
                    if state.phase != lastState?.phase || state.interface != lastState?.interface {
                        log("runtime: \(state.phase.rawValue)\(state.error.map { ": \($0)" } ?? "")")
                        tunnel.publish(status: status(runtime: state.tunnelStatus), runtimeStatus: state.json)
                    }
                    lastState = state
                    if state.phase == .failed { publish(); return .runtimeFailed(state.error ?? "the runtime reported failed") }
                    if state.phase == .stopped { publish(); return .runtimeFailed("the runtime stopped by itself") }
                } catch {
                    return .runtimeFailed(error.description)
                }
            }
            if host == nil || closed { nextStatusPoll = after + 1 }
            if after >= nextPublish {
                nextPublish = after + 1
                publish()
            }
        }
    }

    /// Folds the writer's counters in and publishes them, with the runtime's
    /// last status JSON (for `tunnelgate status`), when either changed.
    func publish() {
        counters.droppedOverMTU = hostOverMTU
        if host != nil, host?.packetPath != .fd {
            counters.handOffs = handOffs
            counters.handOffSeconds = handOffSeconds
        }
        if let w = host?.tunWriter {
            counters.packetsToHost = w.packets.load(ordering: .relaxed)
            counters.bytesToHost = w.bytes.load(ordering: .relaxed)
            counters.droppedMalformed = w.malformed.load(ordering: .relaxed)
            counters.droppedOverMTU = hostOverMTU + w.overMTU.load(ordering: .relaxed)
            counters.droppedWriteFailed = w.writeFailed.load(ordering: .relaxed)
        }
        let runtimeStatus = lastState?.json
        guard counters != published || runtimeStatus != publishedRuntimeStatus else { return }
        published = counters
        publishedRuntimeStatus = runtimeStatus
        tunnel.publish(counters: counters, runtimeStatus: runtimeStatus)
    }
}
