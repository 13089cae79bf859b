/// The question of a DNS query as the DNS watch sees it: a copy of an outgoing IPv4 or IPv6 packet to
/// port 53 (UDP, or TCP with the message's 2-byte length first), from the network header on. Pure.
enum LoggedDNSQuery {
    /// The QNAME, lowercased, without the root's dot; nil for anything else: a reply, a fragment, a
    /// packet without a question (a TCP SYN), a compressed or malformed name, a label with a byte
    /// other than a letter, a digit, `-` or `_` (such a name is no host an app connects to, and it
    /// never reaches a log).
    static func name(inPacket p: [UInt8]) -> String? {
        guard let first = p.first else { return nil }
        var offset: Int, proto: UInt8
        switch first >> 4 {
        case 4:
            let headerLength = Int(first & 0x0f) * 4
            guard headerLength >= 20, p.count >= headerLength else { return nil }
            // Not a later fragment (offset) and not a first one either (more fragments): no whole UDP.
            guard p[6] & 0x3f == 0, p[7] == 0 else { return nil }
            offset = headerLength
            proto = p[9]
        case 6:
            guard p.count >= 40 else { return nil }
            offset = 40
            proto = p[6]
        default:
            return nil
        }
        switch proto {
        case 17:
            guard p.count >= offset + 8, port(p, offset + 2) == 53 else { return nil }
            offset += 8
        case 6:
            guard p.count >= offset + 20, port(p, offset + 2) == 53 else { return nil }
            offset += Int(p[offset + 12] >> 4) * 4 + 2   // the TCP header, then the message's length
        default:
            return nil
        }
        return questionName(Array(p[min(offset, p.count)...]))
    }

    /// The first question's name of a DNS message that is a query (QR 0, opcode QUERY, one question
    /// or more).
    static func questionName(_ m: [UInt8]) -> String? {
        guard m.count >= 12, m[2] & 0xf8 == 0, port(m, 4) >= 1 else { return nil }
        var labels: [String] = []
        var i = 12, total = 0
        while true {
            guard i < m.count else { return nil }
            let length = Int(m[i])
            if length == 0 { break }
            guard length <= 63, i + 1 + length <= m.count else { return nil }  // 0xc0: compressed, refused
            let label = m[(i + 1)...(i + length)]
            guard label.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x2d || $0 == 0x5f })
            else { return nil }
            labels.append(String(decoding: label, as: UTF8.self).lowercased())
            total += length + 1
            guard total <= 254 else { return nil }
            i += 1 + length
        }
        return labels.isEmpty ? nil : labels.joined(separator: ".")
    }

    private static func port(_ p: [UInt8], _ at: Int) -> Int { Int(p[at]) << 8 | Int(p[at + 1]) }
}
