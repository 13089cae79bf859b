import LinuxSystem
import Synchronization

/// Writes the runtime's packets to the TUN, through its `PacketIO`. Called on runtime threads
/// through the C writer callback, so its counters are atomic. A packet that is not one complete IPv4
/// or IPv6 packet, or is larger than the MTU, is dropped and counted; nothing the runtime sends can
/// crash the host.
public final class TunWriter: Sendable {
    let io: any PacketIO
    let mtu: Int
    public let packets = Atomic<UInt64>(0)
    public let bytes = Atomic<UInt64>(0)
    public let malformed = Atomic<UInt64>(0)
    public let overMTU = Atomic<UInt64>(0)
    public let writeFailed = Atomic<UInt64>(0)
    /// Set by stop(): after it, packets are refused (the runtime must not call, but if it does, nothing happens).
    public let closed = Atomic<Bool>(false)

    public init(io: any PacketIO) {
        self.io = io
        mtu = io.mtu
    }

    /// A writer to the TUN open on `descriptor` (not owned).
    public convenience init(descriptor: Int32, mtu: Int) {
        self.init(io: TunPacketIO(descriptor: FileDescriptor(rawValue: descriptor), mtu: mtu))
    }

    /// Why `packet` is not a complete IP packet, or nil when it is one.
    public static func malformation(_ p: UnsafePointer<UInt8>, _ len: Int) -> String? {
        guard len >= 1 else { return "empty" }
        switch p[0] >> 4 {
        case 4:
            guard len >= 20 else { return "truncated IPv4 header" }
            let headerLength = Int(p[0] & 0x0f) * 4
            let totalLength = Int(p[2]) << 8 | Int(p[3])
            guard headerLength >= 20, headerLength <= totalLength else { return "bad IPv4 header length" }
            guard totalLength == len else { return "IPv4 total length \(totalLength) for \(len) bytes" }
            return nil
        case 6:
            guard len >= 40 else { return "truncated IPv6 header" }
            let payloadLength = Int(p[4]) << 8 | Int(p[5])
            guard payloadLength + 40 == len else { return "IPv6 payload length \(payloadLength) for \(len) bytes" }
            return nil
        default:
            return "IP version \(p[0] >> 4)"
        }
    }

    public func write(_ packet: UnsafePointer<UInt8>, _ len: Int) -> Bool {
        guard !closed.load(ordering: .acquiring) else { return false }
        if len > mtu {
            overMTU.add(1, ordering: .relaxed)
            return false
        }
        if Self.malformation(packet, len) != nil {
            malformed.add(1, ordering: .relaxed)
            return false
        }
        guard (try? io.write(UnsafeRawBufferPointer(start: packet, count: len))) == len else {
            writeFailed.add(1, ordering: .relaxed)
            return false
        }
        packets.add(1, ordering: .relaxed)
        bytes.add(UInt64(len), ordering: .relaxed)
        return true
    }
}
