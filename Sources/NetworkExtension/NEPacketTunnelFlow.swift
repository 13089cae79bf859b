import Foundation
import LinuxSystem

/// NEPacketTunnelFlow: the provider's side of the TUN.
///
/// Each `readPackets`/`readPacketObjects` call arms exactly one delivery: the
/// reader thread waits until the TUN is readable, reads until EAGAIN (at most
/// `maximumBatch` packets), and hands the batch to that one handler. As on iOS,
/// the provider re-arms by calling again. Handlers run on the flow's serial
/// delivery queue, in the order they were armed. Reads armed before the
/// settings are applied (or while they are re-applied) wait for the TUN.
open class NEPacketTunnelFlow: NSObject, @unchecked Sendable {
    // @unchecked Sendable: every mutable field is guarded by `condition`.
    /// Packets per delivery at most.
    public static let maximumBatch = 64

    private let condition = NSCondition()
    /// The bound TUN descriptor (not owned: the engine's ActiveTunnel owns it), -1 when none.
    private var descriptor: Int32 = -1
    /// Bumped on every bind/unbind, so a poll on an old descriptor never reads.
    private var generation = 0
    /// The generation whose descriptor failed a read (EBADFD once its interface is deleted, before the
    /// host unbinds it): not polled again, so the reader waits instead of spinning, and says so once.
    private var failedGeneration = -1
    private var pending: [([Data], [NSNumber]) -> Void] = []
    /// Of `pending`, the async reads' handlers by position: a continuation must be resumed once, so at
    /// close these get an empty batch (a completion handler's read is simply never delivered, as on iOS).
    private var asyncArmed: [Bool] = []
    private var reader: Thread?
    private var closed = false
    private let delivery = DispatchQueue(label: "NetworkExtension.NEPacketTunnelFlow.delivery")

    public override init() { super.init() }

    // MARK: Reading

    /// Arms one delivery of a batch of packets and their protocol numbers (AF_INET, AF_INET6).
    open func readPackets(completionHandler: @escaping ([Data], [NSNumber]) -> Void) {
        arm(completionHandler)
    }

    /// Arms one delivery of a batch of packets as NEPacket objects.
    open func readPacketObjects(completionHandler: @escaping ([NEPacket]) -> Void) {
        arm { packets, protocols in
            completionHandler(zip(packets, protocols).map {
                NEPacket(data: $0, protocolFamily: UInt16($1.intValue), direction: .outbound)
            })
        }
    }

    /// The async form; once the flow closes (the tunnel stops), a read still waiting returns an empty
    /// batch instead of never returning (its continuation would leak).
    open func readPackets() async -> ([Data], [NSNumber]) {
        await withCheckedContinuation { c in arm({ c.resume(returning: ($0, $1)) }, async: true) }
    }

    open func readPacketObjects() async -> [NEPacket] {
        let (packets, protocols) = await readPackets()
        return zip(packets, protocols).map { NEPacket(data: $0, protocolFamily: UInt16($1.intValue), direction: .outbound) }
    }

    private func arm(_ handler: @escaping ([Data], [NSNumber]) -> Void, async: Bool = false) {
        condition.lock()
        if closed {
            condition.unlock()
            if async {
                let call = Unchecked(handler)
                delivery.async { call.value([], []) }
            }
            return
        }
        pending.append(handler)
        asyncArmed.append(async)
        if reader == nil && !closed {
            let thread = Thread { [weak self] in self?.readLoop() }
            thread.name = "NEPacketTunnelFlow.reader"
            reader = thread
            thread.start()
        }
        condition.signal()
        condition.unlock()
    }

    private func readLoop() {
        let bufferSize = 65_536
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            condition.lock()
            while !closed && (descriptor < 0 || pending.isEmpty || generation == failedGeneration) { condition.wait() }
            if closed { condition.unlock(); return }
            let fd = descriptor, seen = generation
            condition.unlock()

            guard Self.waitReadable(fd, timeoutMilliseconds: 100) else { continue }

            // Read under the lock: unbind cannot return while a read of its descriptor runs.
            condition.lock()
            guard seen == generation, descriptor >= 0, !pending.isEmpty else { condition.unlock(); continue }
            var packets: [Data] = []
            var protocols: [NSNumber] = []
            let tun = FileDescriptor(rawValue: fd)
            while packets.count < Self.maximumBatch {
                let n: Int?
                do throws(SystemCallError) { n = try tun.read(into: buffer) } catch {
                    FileHandle.standardError.write(Data("NEPacketTunnelFlow: \(error); waiting for the host to bind another TUN\n".utf8))
                    failedGeneration = generation
                    break
                }
                guard let n, n > 0 else { break }
                let packet = Data(bytes: buffer.baseAddress!, count: n)
                guard let family = Self.protocolFamily(of: packet) else { continue }
                packets.append(packet)
                protocols.append(NSNumber(value: family))
            }
            guard !packets.isEmpty else { condition.unlock(); continue }
            let handler = pending.removeFirst()
            asyncArmed.removeFirst()
            condition.unlock()
            let call = Unchecked((handler, packets, protocols))
            delivery.async { call.value.0(call.value.1, call.value.2) }
        }
    }

    /// poll(2) for POLLIN; false when the time ran out or poll failed.
    private static func waitReadable(_ fd: Int32, timeoutMilliseconds: Int32) -> Bool {
        (try? Poll.readable(FileDescriptor(rawValue: fd), timeoutMilliseconds: timeoutMilliseconds)) ?? false
    }

    /// AF_INET or AF_INET6 from the IP version in the first nibble; nil for anything else.
    static func protocolFamily(of packet: Data) -> Int32? {
        guard let first = packet.first else { return nil }
        switch first >> 4 {
        case 4 where packet.count >= 20: return SocketFamily.ipv4
        case 6 where packet.count >= 40: return SocketFamily.ipv6
        default: return nil
        }
    }

    // MARK: Writing

    /// Writes each packet to the TUN. False — and nothing more is written — when
    /// the counts differ, a packet's version does not match its protocol number
    /// (AF_INET/AF_INET6), no TUN is bound, or the kernel refuses a write.
    @discardableResult
    open func writePackets(_ packets: [Data], withProtocols protocols: [NSNumber]) -> Bool {
        guard packets.count == protocols.count else { return false }
        for (packet, proto) in zip(packets, protocols) {
            guard packet.count <= 65_535, Self.protocolFamily(of: packet) == proto.int32Value else { return false }
        }
        condition.lock()
        defer { condition.unlock() }
        guard descriptor >= 0 else { return false }
        let tun = FileDescriptor(rawValue: descriptor)
        for packet in packets {
            let ok = packet.withUnsafeBytes { bytes -> Bool in
                do throws(SystemCallError) { return try tun.write(bytes) == bytes.count } catch { return false }
            }
            guard ok else { return false }
        }
        return true
    }

    @discardableResult
    open func writePacketObjects(_ packets: [NEPacket]) -> Bool {
        writePackets(packets.map(\.data), withProtocols: packets.map { NSNumber(value: Int32($0.protocolFamily)) })
    }

    // MARK: The host's side

    /// Binds the flow to a TUN descriptor (made non-blocking); armed reads start.
    func bind(_ fd: FileDescriptor) {
        try? fd.setNonBlocking(true)
        condition.lock()
        descriptor = fd.rawValue
        generation += 1
        condition.signal()
        condition.unlock()
    }

    /// Unbinds; on return no read or write of the old descriptor runs or will run.
    func unbind() {
        condition.lock()
        descriptor = -1
        generation += 1
        condition.unlock()
    }

    /// Stops the reader thread; armed reads are never delivered, but async ones return an empty batch.
    func close() {
        condition.lock()
        closed = true
        descriptor = -1
        generation += 1
        let waiting = zip(pending, asyncArmed).filter { $0.1 }.map(\.0)
        pending.removeAll()
        asyncArmed.removeAll()
        condition.broadcast()
        condition.unlock()
        for handler in waiting {
            let call = Unchecked(handler)
            delivery.async { call.value([], []) }
        }
    }
}
