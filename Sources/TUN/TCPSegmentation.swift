/// How a TCP super-packet from a TUN with TSO (gso_type TCPV4 or TCPV6) becomes the segments a
/// NIC would have sent: every segment carries a copy of the IP and TCP headers and at most
/// `segmentSize` bytes of the payload, with, per segment, the IPv4 total length, identification
/// (the first one's plus the segment's number) and header checksum, or the IPv6 payload length;
/// the sequence number advanced by the payload before it; FIN and PSH only on the last, CWR only
/// on the first; and the whole TCP checksum (pseudo-header, header, payload) computed anew.
///
/// A value made once per super-packet by `init?` (which checks everything a segment relies on);
/// `writeSegment` then writes each segment wherever the caller wants it sealed. No allocation.
public struct TCPSegmentation: Equatable, Sendable {
    /// IPv6 (else IPv4).
    public let isIPv6: Bool
    /// Where the TCP header starts: the IP header's length (IPv4 options included; IPv6 extension
    /// headers included).
    public let tcpOffset: Int
    /// The IP and TCP headers (options included): what every segment starts with.
    public let headerLength: Int
    /// Payload bytes per segment (gso_size); the last segment may carry fewer.
    public let segmentSize: Int
    /// The super-packet's payload after the headers.
    public let payloadLength: Int
    /// The unfolded one's-complement sum of the source and destination addresses.
    let addressSum: UInt64

    static let fin: UInt8 = 0x01, psh: UInt8 = 0x08, cwr: UInt8 = 0x80
    static let tcp: UInt8 = 6

    /// The plan for `packet` (what followed `header` in the TUN read), or nil when they do not
    /// describe a TCP super-packet Tunnelgate can cut: the IP version or protocol disagrees with
    /// the GSO type, an IPv6 extension header it cannot carry (`tcpOffsetIPv6`), a header beyond the packet, gso_size 0, a checksum
    /// position other than TCP's, or segments longer than `maxSegmentLength` (the MTU).
    public init?(header: VirtioNetHeader, packet: UnsafeRawBufferPointer, maxSegmentLength: Int) {
        let count = packet.count
        guard header.gsoSize > 0, Int(header.headerLength) <= count, count >= 20, let base = packet.baseAddress else {
            return nil
        }
        let version = packet[0] >> 4
        switch VirtioNetHeader.GSOType(rawValue: header.gsoType) {
        case .tcpv4?:
            let ipHeaderLength = Int(packet[0] & 0x0F) * 4
            guard version == 4, ipHeaderLength >= 20, packet[9] == Self.tcp else { return nil }
            isIPv6 = false
            tcpOffset = ipHeaderLength
            addressSum = InternetChecksum.add(UnsafeRawBufferPointer(start: base + 12, count: 8))
        case .tcpv6?:
            guard version == 6, count >= 40, let offset = Self.tcpOffsetIPv6(packet) else { return nil }
            isIPv6 = true
            tcpOffset = offset
            addressSum = InternetChecksum.add(UnsafeRawBufferPointer(start: base + 8, count: 32))
        default:
            return nil
        }
        if header.flags & VirtioNetHeader.needsChecksum != 0 {
            guard Int(header.checksumStart) == tcpOffset, header.checksumOffset == 16 else { return nil }
        }
        guard tcpOffset + 20 <= count else { return nil }
        let tcpHeaderLength = Int(packet[tcpOffset + 12] >> 4) * 4
        guard tcpHeaderLength >= 20, tcpOffset + tcpHeaderLength <= count else { return nil }
        headerLength = tcpOffset + tcpHeaderLength
        segmentSize = Int(header.gsoSize)
        payloadLength = count - headerLength
        guard headerLength + min(segmentSize, payloadLength) <= maxSegmentLength else { return nil }
    }

    /// Where TCP starts in an IPv6 packet: after the fixed header and the extension headers every
    /// segment carries unchanged (hop-by-hop options, destination options, and a routing header with
    /// no segments left, so the pseudo-header's destination is the packet's own). nil for anything
    /// else before TCP (a fragment header, AH, ESP, a routing header still to be processed, an unknown
    /// header), a header beyond the packet, or more than 8 of them.
    static func tcpOffsetIPv6(_ packet: UnsafeRawBufferPointer) -> Int? {
        var next = packet[6], offset = 40
        for _ in 0..<8 {
            if next == Self.tcp { return offset }
            guard offset + 8 <= packet.count else { return nil }
            switch next {
            case 0, 60:  // hop-by-hop options, destination options
                break
            case 43:     // routing: only one whose segments are all done
                guard packet[offset + 3] == 0 else { return nil }
            default:
                return nil
            }
            next = packet[offset]
            offset += (Int(packet[offset + 1]) + 1) * 8
        }
        return nil
    }

    /// How many segments (at least one).
    public var count: Int { payloadLength == 0 ? 1 : (payloadLength + segmentSize - 1) / segmentSize }

    /// The length of segment `i`, headers included.
    public func length(ofSegment i: Int) -> Int {
        headerLength + min(segmentSize, payloadLength - i * segmentSize)
    }

    /// Writes segment `i` (0 ..< count) of `packet` (the super-packet this plan was made for) at
    /// `out`, which must hold `length(ofSegment: i)` bytes and not overlap `packet`; returns that length.
    public func writeSegment(_ i: Int, of packet: UnsafeRawBufferPointer, to out: UnsafeMutableRawPointer) -> Int {
        precondition(i >= 0 && i < count && packet.count == headerLength + payloadLength)
        let base = packet.baseAddress!
        let offset = i * segmentSize
        let payload = min(segmentSize, payloadLength - offset)
        let length = headerLength + payload
        out.copyMemory(from: base, byteCount: headerLength)
        // The payload copied and summed in one pass; the headers are summed once they are final.
        // headerLength - tcpOffset is TCP's data offset, a multiple of 4, so the chained sum starts even.
        let payloadSum = InternetChecksum.copy(UnsafeRawBufferPointer(start: base + headerLength + offset, count: payload),
                                               to: out + headerLength)

        if isIPv6 {
            out.storeBytes(of: UInt16(truncatingIfNeeded: length - 40).bigEndian, toByteOffset: 4, as: UInt16.self)
        } else {
            out.storeBytes(of: UInt16(truncatingIfNeeded: length).bigEndian, toByteOffset: 2, as: UInt16.self)
            let id = UInt16(bigEndian: base.loadUnaligned(fromByteOffset: 4, as: UInt16.self)) &+ UInt16(truncatingIfNeeded: i)
            out.storeBytes(of: id.bigEndian, toByteOffset: 4, as: UInt16.self)
            out.storeBytes(of: 0 as UInt16, toByteOffset: 10, as: UInt16.self)
            let sum = InternetChecksum.add(UnsafeRawBufferPointer(start: out, count: tcpOffset))
            out.storeBytes(of: InternetChecksum.checksum(sum), toByteOffset: 10, as: UInt16.self)
        }

        let tcp = out + tcpOffset
        let sequence = UInt32(bigEndian: base.loadUnaligned(fromByteOffset: tcpOffset + 4, as: UInt32.self))
            &+ UInt32(truncatingIfNeeded: offset)
        tcp.storeBytes(of: sequence.bigEndian, toByteOffset: 4, as: UInt32.self)
        var flags = tcp.load(fromByteOffset: 13, as: UInt8.self)
        if i != count - 1 { flags &= ~(Self.fin | Self.psh) }
        if i != 0 { flags &= ~Self.cwr }
        tcp.storeBytes(of: flags, toByteOffset: 13, as: UInt8.self)
        tcp.storeBytes(of: 0 as UInt16, toByteOffset: 16, as: UInt16.self)
        let tcpLength = length - tcpOffset
        var sum = InternetChecksum.addCarrying(addressSum, UInt64(UInt16(Self.tcp).bigEndian))
        sum = InternetChecksum.addCarrying(sum, UInt64(UInt32(truncatingIfNeeded: tcpLength).bigEndian))
        sum = InternetChecksum.add(UnsafeRawBufferPointer(start: tcp, count: headerLength - tcpOffset), to: sum)
        sum = InternetChecksum.addCarrying(sum, payloadSum)
        tcp.storeBytes(of: InternetChecksum.checksum(sum), toByteOffset: 16, as: UInt16.self)
        return length
    }
}
