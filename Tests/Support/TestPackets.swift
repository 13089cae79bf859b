/// Packets built byte by byte for tests of the TUN offloads and of what reads them (the WireGuard
/// device, the plane's callback loop), and an RFC 1071 checksum written independently of
/// `InternetChecksum`: bytes taken pairwise, big-endian, folded at the end.
public enum TestPackets {
    /// The 16-bit one's-complement sum of `bytes` as big-endian words (an odd last byte padded).
    public static func rfc1071(_ bytes: [UInt8], initial: UInt32 = 0) -> UInt16 {
        var sum = initial
        var i = 0
        while i < bytes.count {
            let high = UInt32(bytes[i]), low = i + 1 < bytes.count ? UInt32(bytes[i + 1]) : 0
            sum += high << 8 | low
            i += 2
        }
        while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
        return UInt16(sum)
    }

    /// The pseudo-header's sum for a TCP/UDP packet of `length` transport bytes.
    public static func pseudo(source: [UInt8], destination: [UInt8], protocol number: UInt8, length: Int) -> UInt32 {
        var bytes = source + destination
        if source.count == 4 {
            bytes += [0, number, UInt8(length >> 8), UInt8(length & 0xFF)]
        } else {
            bytes += [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF),
                      0, 0, 0, number]
        }
        return UInt32(rfc1071(bytes))
    }

    /// Whether the transport checksum of an IP packet (no IPv6 extension headers) verifies.
    public static func transportChecksumVerifies(_ packet: [UInt8]) -> Bool {
        let v6 = packet[0] >> 4 == 6
        let offset = v6 ? 40 : Int(packet[0] & 0x0F) * 4
        let source = v6 ? Array(packet[8..<24]) : Array(packet[12..<16])
        let destination = v6 ? Array(packet[24..<40]) : Array(packet[16..<20])
        let proto = v6 ? packet[6] : packet[9]
        let segment = Array(packet[offset...])
        let initial = pseudo(source: source, destination: destination, protocol: proto, length: segment.count)
        return rfc1071(segment, initial: initial) == 0xFFFF
    }

    public static func ipv4HeaderChecksumVerifies(_ packet: [UInt8]) -> Bool {
        rfc1071(Array(packet[0..<Int(packet[0] & 0x0F) * 4])) == 0xFFFF
    }

    public static func be16(_ p: [UInt8], _ at: Int) -> Int { Int(p[at]) << 8 | Int(p[at + 1]) }
    public static func be32(_ p: [UInt8], _ at: Int) -> UInt32 {
        UInt32(p[at]) << 24 | UInt32(p[at + 1]) << 16 | UInt32(p[at + 2]) << 8 | UInt32(p[at + 3])
    }


    public static let fin: UInt8 = 0x01, psh: UInt8 = 0x08, ack: UInt8 = 0x10, cwr: UInt8 = 0x80

    /// A TCP packet: IPv4 (20-byte header) or IPv6 (40), a TCP header with 12 bytes of options
    /// (data offset 8), sequence `sequence`, `flags`, and the checksum field holding the
    /// pseudo-header's sum as a stack leaves it for NEEDS_CSUM.
    public static func tcpPacket(v6: Bool, payload: [UInt8], sequence: UInt32 = 0xFFFF_F000, flags: UInt8) -> [UInt8] {
        var tcp: [UInt8] = [0x9C, 0x40, 0x14, 0x51]                                   // ports 40000 → 5201
        tcp += [UInt8(sequence >> 24), UInt8((sequence >> 16) & 0xFF), UInt8((sequence >> 8) & 0xFF), UInt8(sequence & 0xFF)]
        tcp += [0x01, 0x02, 0x03, 0x04]                                               // acknowledgement
        tcp += [0x80, flags, 0x01, 0xF6, 0, 0, 0, 0]                                  // offset 8, window, checksum, urgent
        tcp += [0x01, 0x01, 0x08, 0x0A, 0xAA, 0xBB, 0xCC, 0xDD, 0x11, 0x22, 0x33, 0x44] // NOP NOP timestamps
        let transport = tcp + payload
        let source: [UInt8], destination: [UInt8]
        var ip: [UInt8]
        if v6 {
            source = [0xFD, 0x70] + [UInt8](repeating: 0, count: 13) + [1]
            destination = [0xFD, 0x70] + [UInt8](repeating: 0, count: 13) + [2]
            ip = [0x60, 0x00, 0x00, 0x00, UInt8(transport.count >> 8), UInt8(transport.count & 0xFF), 6, 64] + source + destination
        } else {
            source = [10, 70, 0, 1]
            destination = [10, 70, 0, 2]
            let total = 20 + transport.count
            ip = [0x45, 0x00, UInt8(total >> 8), UInt8(total & 0xFF), 0xFF, 0xFE, 0x40, 0x00, 64, 6, 0, 0] + source + destination
            let c = ~rfc1071(ip)
            ip[10] = UInt8(c >> 8); ip[11] = UInt8(c & 0xFF)
        }
        var packet = ip + transport
        let partial = UInt16(pseudo(source: source, destination: destination, protocol: 6, length: transport.count))
        packet[ip.count + 16] = UInt8(partial >> 8)
        packet[ip.count + 17] = UInt8(partial & 0xFF)
        return packet
    }

    public static func payload(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) } }

}
