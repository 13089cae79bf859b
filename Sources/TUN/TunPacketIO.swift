import LinuxSystem

/// `PacketIO` over a TUN's descriptor (IFF_TUN | IFF_NO_PI), with or without IFF_VNET_HDR: one
/// read(2) per packet (with a virtio_net_hdr, a packet may be a TCP super-packet of up to 64 KB), one
/// write(2) per packet with its header written into the headroom before it, so that neither needs a
/// copy. The descriptor is not owned (the engine's `TunDevice` or the descriptor a packet plane was
/// handed keeps the interface alive) and must be non-blocking.
public final class TunPacketIO: PacketIO {
    public let descriptor: FileDescriptor
    public let mtu: Int
    public let carriesVirtioHeader: Bool

    /// `virtioHeader` nil asks the kernel (TUNGETIFF) whether the TUN was made with IFF_VNET_HDR; a
    /// descriptor that is not a TUN has none.
    public init(descriptor: FileDescriptor, mtu: Int, virtioHeader: Bool? = nil) {
        self.descriptor = descriptor
        self.mtu = mtu
        carriesVirtioHeader = virtioHeader ?? TunDevice.carriesVirtioHeader(descriptor)
    }

    public var readiness: FileDescriptor { descriptor }
    public var largestRead: Int { carriesVirtioHeader ? VirtioNetHeader.largestPacket : mtu }

    public func read(into batch: PacketBatch) throws(SystemCallError) -> Int {
        batch.removeAll()
        let header = headerSize
        precondition(batch.slotSize > 0 && batch.headroom >= header, "a read needs a batch with slots and room for the header")
        // At most `capacity` reads, dropped ones included: the loop ends even if every read were bad.
        for _ in 0..<batch.capacity {
            let slot = batch.nextSlot
            // The header lands at the end of the headroom, the packet at its start.
            let buffer = UnsafeMutableRawBufferPointer(rebasing: slot[(batch.headroom - header)...])
            let n: Int
            do throws(SystemCallError) {
                guard let read = try descriptor.read(into: buffer) else { break }
                n = read
            } catch {
                if batch.count > 0 || batch.droppedReads > 0 { break }
                throw error
            }
            if n == 0 { break }
            // A TUN reports a packet's whole length even when it copied only what fitted.
            guard n > header, n <= buffer.count else {
                batch.droppedReads += 1
                continue
            }
            batch.commit(length: n - header,
                         header: header > 0 ? VirtioNetHeader(loadingFrom: buffer.baseAddress!) : VirtioNetHeader())
        }
        return batch.count
    }

    public func write(_ batch: PacketBatch) -> PacketBatch.Written {
        let header = headerSize
        precondition(batch.headroom >= header, "a write to a TUN with a virtio_net_hdr needs headroom for it")
        var written = PacketBatch.Written()
        for i in 0..<batch.count {
            let packet = batch.packet(i)
            let start = packet.baseAddress! - header
            if header > 0 { batch.header(i).store(to: start) }
            let total = header + packet.count
            if (try? descriptor.write(UnsafeRawBufferPointer(start: start, count: total))) == total {
                written.packets += 1
                written.bytes += packet.count
            }
        }
        return written
    }

    public func write(_ pieces: IOVectors, header: VirtioNetHeader) -> Bool {
        guard pieces.count > 0 else { return false }
        let size = headerSize
        if size > 0 {
            header.store(to: UnsafeMutableRawPointer(mutating: pieces[0].baseAddress! - size))
            pieces.extendFirst(before: size)
        }
        defer { if size > 0 { pieces.extendFirst(before: -size) } }
        let total = pieces.byteCount
        return (try? descriptor.write(pieces)) == total
    }

    public func write(_ packet: UnsafeRawBufferPointer) throws(SystemCallError) -> Int {
        guard carriesVirtioHeader else { return try descriptor.write(packet) }
        var zero: (UInt64, UInt16) = (0, 0)  // the first 10 bytes: a GSO_NONE header
        let result = withUnsafeBytes(of: &zero) { header in
            Result { () throws(SystemCallError) in
                try descriptor.write(UnsafeRawBufferPointer(rebasing: header[0..<VirtioNetHeader.size]), packet)
            }
        }
        return max(0, try result.get() - VirtioNetHeader.size)
    }
}

extension TunDevice {
    /// This TUN's packet I/O (the descriptor stays this device's).
    public func packetIO(mtu: Int) -> TunPacketIO {
        TunPacketIO(descriptor: descriptor, mtu: mtu, virtioHeader: carriesVirtioHeader)
    }
}
