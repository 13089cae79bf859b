import LinuxSystem
import PlaneProtocol
import RuntimeABI
import TUN

/// The plane's loop: the runtime's packet path and its channel to the engine.
///
/// Callback path: packets are read from the TUN in batches (`HostPackets`: up to 64 packets, or with
/// the TUN's TCP segmentation offload up to 8 reads of which each may be a super-packet, cut into its
/// segments) and sent in with one packet_in_batch call per 64 packets when the runtime has it, else
/// with packet_in one by one. On QUEUE_FULL the packet and the rest of its batch are kept and sent
/// again after a short, growing pause (20 µs doubling to 2 ms, timed with ppoll's nanoseconds);
/// meanwhile the TUN is not read, so the kernel's queue pushes back on the senders. Nothing is dropped
/// for backpressure. Packets the runtime writes arrive through the writer callback (TunWriter, with a
/// GSO_NONE virtio_net_hdr on such a TUN) on its own threads. The fd path (the runtime reads and writes
/// the TUN itself) and no runtime at all (packets counted and dropped) use the same loop.
///
/// The runtime's status is polled every 250 ms; a change is reported to the engine at once, and the
/// counters with the last status once a second (which is also how the engine knows the plane is alive).
/// App messages are answered here; `stop` stops the runtime and ends the loop.
final class PlaneLoop {
    let host: HostedRuntime?
    let tun: FileDescriptor
    let mtu: Int
    let channel: ChannelEndpoint<PlaneMessage, EngineMessage>
    let log: PlaneLog
    var counters = PacketCounters()
    private var hostOverMTU: UInt64 = 0
    private var handOffs: UInt64 = 0
    private var handOffSeconds: Double = 0
    private var lastState: RuntimeState?

    init(host: HostedRuntime?, tun: FileDescriptor, mtu: Int, channel: ChannelEndpoint<PlaneMessage, EngineMessage>, log: PlaneLog) {
        self.host = host
        self.tun = tun
        self.mtu = mtu
        self.channel = channel
        self.log = log
    }

    /// Runs until stop (0), a runtime failure or the engine's going (1).
    func run() -> Int32 {
        let readsTun = host?.packetPath != .fd
        if readsTun { try? tun.setNonBlocking(true) }
        // The TUN's packet I/O; the engine made it with a virtio_net_hdr (TSO) for the callback path.
        let packets = HostPackets(io: TunPacketIO(descriptor: tun, mtu: mtu))
        var pendingStart = 0
        var retryAt: Double?
        var backoff = 0.00002
        var nextStatusPoll = ProcessControl.monotonicSeconds()
        var nextReport = ProcessControl.monotonicSeconds()
        var poll = PollSet()
        poll.add(tun, [])
        poll.add(channel.descriptor, .readable)

        /// Hands in what is pending, fill after fill, until the read is drained or the runtime pushes back.
        func deliver() {
            while true {
                while pendingStart < packets.count {
                    guard let host else {
                        counters.droppedNoRuntime += UInt64(packets.count - pendingStart)
                        pendingStart = packets.count
                        break
                    }
                    let began = ProcessControl.monotonicSeconds()
                    let result = host.packetIn(batch: packets.pointers + pendingStart, lengths: packets.lengths + pendingStart,
                                               count: packets.count - pendingStart)
                    handOffSeconds += ProcessControl.monotonicSeconds() - began
                    handOffs += 1
                    pendingStart += result.accepted
                    switch result.next {
                    case .accepted: break
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
                retryAt = nil
                backoff = 0.00002
                pendingStart = 0
                packets.fill(counters: &counters)
                if packets.count == 0 { return }
            }
        }

        while true {
            let now = ProcessControl.monotonicSeconds()
            let idle = packets.count == 0 && packets.isDrained
            poll.setEvents(readsTun && idle ? .readable : [], at: 0)
            var timeout = min(nextStatusPoll, nextReport) - now
            if let retryAt { timeout = min(timeout, retryAt - now) }
            do throws(SystemCallError) {
                _ = try poll.wait(timeoutNanoseconds: Int64(max(0, timeout * 1e9)))
            } catch {
                return fail("poll: \(error.errno)")
            }

            if !poll.events(at: 1).isEmpty, let exit = serveChannel() { return exit }
            if let retryAt, ProcessControl.monotonicSeconds() >= retryAt {
                counters.retries += 1
                deliver()
            }
            if readsTun, poll.events(at: 0).contains(.readable), packets.count == 0, packets.isDrained {
                // Nothing more (EAGAIN), or a read that failed: the batch ends there.
                if let n = try? packets.read(counters: &counters), n > 0 {
                    pendingStart = 0
                    packets.fill(counters: &counters)
                    deliver()
                }
            }
            hostOverMTU = packets.overMTU
            let after = ProcessControl.monotonicSeconds()
            if let host, after >= nextStatusPoll {
                nextStatusPoll = after + 0.25
                do throws(RuntimeError) {
                    let state = try host.status()
                    let changed = state.phase != lastState?.phase || state.interface != lastState?.interface
                    lastState = state
                    if changed { report() }
                    if state.phase == .failed { return fail(state.error ?? "the runtime reported failed") }
                    if state.phase == .stopped { return fail("the runtime stopped by itself") }
                } catch {
                    return fail(error.description)
                }
            }
            if host == nil { nextStatusPoll = after + 1 }
            if after >= nextReport {
                nextReport = after + 1
                report()
            }
        }
    }

    /// Serves what the engine sent; an exit status when the loop ends.
    private func serveChannel() -> Int32? {
        while true {
            let event: ChannelEndpoint<PlaneMessage, EngineMessage>.Event?
            do throws(SystemCallError) { event = try channel.receive() } catch { return fail("the channel: \(error)") }
            guard let event else { return nil }
            switch event {
            case .closed:
                // The engine is gone: nothing may run without it.
                host?.stop()
                return 1
            case .garbage(let why):
                log.write("garbage from the engine: \(why)")
            case .message(.stop, _, _):
                host?.stop()
                report()
                return 0
            case .message(.message(let id, let data), _, let fds):
                for fd in fds { fd.close() }
                guard let host else {
                    try? channel.send(.reply(id: id, data: nil, error: "this tunnel has no runtime"))
                    continue
                }
                let answer: PlaneMessage
                do throws(RuntimeError) { answer = .reply(id: id, data: try host.appMessage(data), error: nil) } catch {
                    answer = .reply(id: id, data: nil, error: error.description)
                }
                try? channel.send(answer)
            case .message(_, _, let fds):
                for fd in fds { fd.close() }
                log.write("an engine message the plane does not take here; ignored")
            }
        }
    }

    private func fail(_ reason: String) -> Int32 {
        host?.stop()
        report()
        try? channel.send(.failed(reason: reason))
        return 1
    }

    /// The counters (the writer's folded in) and the runtime's last state, to the engine.
    private func report() {
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
        let state = lastState ?? RuntimeState(phase: host == nil ? .ready : .starting, interface: host == nil ? "" : nil,
                                              json: "{}")
        try? channel.send(.state(PlaneReport(state: state, counters: counters)))
    }
}
