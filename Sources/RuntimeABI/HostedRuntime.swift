import LinuxSystem
import TUN
import TunnelgateSettings

/// What the owner's loop needs of a runtime it hosts. The callback ABI host
/// is one; the MeshGuard adapter and the built-in WireGuard are others.
public protocol HostedRuntime: AnyObject {
    /// Whether the loop reads the TUN and calls `packetIn` (callback), or the
    /// runtime reads and writes the TUN itself (fd).
    var packetPath: PacketPath { get }
    /// One line for `up`'s summary: what runs and how.
    var summary: String { get }
    /// How long `up` waits for the runtime to become ready.
    var startTimeout: Double { get }
    /// Whether the TUN should be made with checksum and TCP segmentation
    /// offload (a virtio_net_hdr before every packet read and written; see
    /// `TunDevice`): a runtime that reads the TUN itself and handles the header
    /// (the built-in WireGuard), or the callback path, where the plane's loop
    /// cuts super-packets before the runtime sees them. The default is no.
    var wantsTunOffloads: Bool { get }

    /// Tells the runtime what it may know of the tunnel (interface name, MTU, the pinned carriers and
    /// the carrier identity's fwmark) before start. Runtimes that need none of it ignore it.
    func attach(to context: RuntimeContext)
    /// Starts the runtime on the tunnel's TUN (after the kernel state is applied).
    func start(tun: FileDescriptor, mtu: Int) throws(RuntimeError)
    /// The runtime's state, polled by the loop.
    func status() throws(RuntimeError) -> RuntimeState
    /// Hands one packet from the host to the runtime.
    func packetIn(_ packet: UnsafePointer<UInt8>, _ len: Int) -> PacketDelivery
    /// Hands `count` packets to the runtime, in order, in as few calls as the runtime allows; it takes a
    /// prefix. The default sends them one by one through `packetIn(_:_:)`.
    func packetIn(batch packets: UnsafePointer<UnsafePointer<UInt8>?>, lengths: UnsafePointer<Int>, count: Int) -> BatchDelivery
    /// An app message (`tunnelgate message`), answered by the runtime.
    func appMessage(_ bytes: [UInt8]) throws(RuntimeError) -> [UInt8]
    /// Stops the runtime; exactly once takes effect, later calls do nothing.
    func stop()
    /// The writer of the runtime's packets to the TUN, for its counters.
    var tunWriter: TunWriter? { get }
}

/// What became of a packet handed to a runtime.
public enum PacketDelivery: Sendable {
    case accepted
    /// The runtime's queue is full (or it is not ready): keep the packet, send it again later.
    case retryLater
    /// Refused for good (counted as dropped).
    case refused
}

/// What became of a batch handed to a runtime: the first `accepted` packets were taken; when that is
/// not all of them, `next` says what became of the packet after them.
public struct BatchDelivery: Sendable, Equatable {
    public var accepted: Int
    /// `.accepted` when the whole batch was taken.
    public var next: PacketDelivery

    public init(accepted: Int, next: PacketDelivery) {
        self.accepted = accepted
        self.next = next
    }
}

extension HostedRuntime {
    public func attach(to context: RuntimeContext) {}
    public var wantsTunOffloads: Bool { false }

    public func packetIn(batch packets: UnsafePointer<UnsafePointer<UInt8>?>, lengths: UnsafePointer<Int>, count: Int) -> BatchDelivery {
        packetInOneByOne(batch: packets, lengths: lengths, count: count)
    }

    /// A batch as single packetIn calls, stopping at the first packet not accepted.
    public func packetInOneByOne(batch packets: UnsafePointer<UnsafePointer<UInt8>?>, lengths: UnsafePointer<Int>, count: Int) -> BatchDelivery {
        for i in 0..<count {
            guard let packet = packets[i] else { return BatchDelivery(accepted: i, next: .refused) }
            let delivery = packetIn(packet, lengths[i])
            if delivery != .accepted { return BatchDelivery(accepted: i, next: delivery) }
        }
        return BatchDelivery(accepted: count, next: .accepted)
    }

    /// Polls status until the runtime reports an interface (ready for
    /// packets), fails, or `timeout` passes.
    public func waitUntilReady(timeout: Double, interrupted: () -> Bool) throws(RuntimeError) -> RuntimeState {
        let deadline = ProcessControl.monotonicSeconds() + timeout
        var interval = 0.002
        while true {
            let state = try status()
            if state.phase == .failed { throw RuntimeError("the runtime failed while starting: \(state.error ?? "no message")") }
            // Started once it has an interface, as MEHS's contract says; one already reconnecting (its
            // carrier not answering yet) takes packets too, and the tunnel starts out reasserting.
            if state.phase == .ready || state.phase == .reconnecting, state.interface != nil { return state }
            if state.phase == .stopped { throw RuntimeError("the runtime stopped while starting") }
            if ProcessControl.monotonicSeconds() > deadline {
                throw RuntimeError("the runtime did not become ready within \(Int(timeout)) s (state \(state.phase.rawValue))")
            }
            if interrupted() { throw RuntimeError("interrupted while the runtime was starting") }
            ProcessControl.sleep(seconds: interval)
            interval = min(interval * 2, 0.05)
        }
    }
}
