extension VirtioNetHeader {
    /// What becomes of the packet that followed a header in a TUN read.
    public enum Offload: Equatable, Sendable {
        /// One packet, to send as it is (a partial checksum has been completed in place).
        case packet
        /// A TCP super-packet, to send as the segments the plan describes.
        case segments(TCPSegmentation)
        /// To drop: a GSO type Tunnelgate does not ask for (UDP, UDP_L4, the ECN bit, unknown).
        case unsupported
        /// To drop: the header does not fit the packet (hdr_len or a checksum position beyond it,
        /// gso_size 0, a super-packet that is not the TCP its type says, segments over the MTU).
        case malformed
    }

    /// Decides what `packet` (what followed this header in a TUN read) is. A single packet that
    /// NEEDS_CSUM gets its checksum completed in place: the sum of everything from csum_start on
    /// (the field holds the pseudo-header's sum), complemented, 0 sent as 0xFFFF as a stack does.
    /// Segments are at most `maxSegmentLength` bytes.
    public func prepare(_ packet: UnsafeMutableRawBufferPointer, maxSegmentLength: Int) -> Offload {
        guard Int(headerLength) <= packet.count else { return .malformed }
        guard gsoType & Self.ecnBit == 0 else { return .unsupported }
        switch GSOType(rawValue: gsoType) {
        case .none?:
            if flags & Self.needsChecksum != 0 {
                let start = Int(checksumStart), field = start + Int(checksumOffset)
                guard start < packet.count, field + 2 <= packet.count else { return .malformed }
                let sum = InternetChecksum.add(UnsafeRawBufferPointer(rebasing: packet[start...]))
                let checksum = InternetChecksum.checksum(sum)
                packet.storeBytes(of: checksum == 0 ? 0xFFFF : checksum, toByteOffset: field, as: UInt16.self)
            }
            return .packet
        case .tcpv4?, .tcpv6?:
            guard let plan = TCPSegmentation(header: self, packet: UnsafeRawBufferPointer(packet),
                                             maxSegmentLength: maxSegmentLength) else { return .malformed }
            return .segments(plan)
        case .udp?, .udpL4?, nil:
            return .unsupported
        }
    }
}
