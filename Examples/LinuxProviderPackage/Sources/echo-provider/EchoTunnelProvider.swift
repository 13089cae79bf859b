import NetworkExtension

/// A packet tunnel with no server: it answers every ICMP echo request (IPv4) that enters the tunnel
/// itself, by writing the reply to packetFlow. `ping` through the tunnel is answered by this provider.
///
/// providerConfiguration (as NETunnelProviderManager saves it and hands it to the host) or the
/// environment names the addresses (the provider's packet plane starts with an empty environment:
/// these variables reach it only when the host passes them on, as the tests do):
///   address  the tunnel's own address (ECHO_ADDRESS, default 10.9.0.2/24 as "10.9.0.2")
///   routes   prefixes sent into the tunnel, "A.B.C.D/LEN" (ECHO_ROUTES, comma-separated, default 10.9.0.0/24)
///   remote   tunnelRemoteAddress (ECHO_REMOTE, default 198.18.0.10)
final class EchoTunnelProvider: NEPacketTunnelProvider, @unchecked Sendable {
    // @unchecked Sendable: `answered`/`ignored` are touched only on the flow's one delivery queue.
    private var answered = 0
    private var ignored = 0
    private let environment = ProcessInfo.processInfo.environment

    override func startTunnel(options: [String: NSObject]? = nil) async throws {
        let configuration = TunnelgateHostConfiguration.providerConfigurationFromManager() ?? [:]
        let remote = configuration["remote"] as? String ?? environment["ECHO_REMOTE"] ?? "198.18.0.10"
        let address = configuration["address"] as? String ?? environment["ECHO_ADDRESS"] ?? "10.9.0.2"
        let routes = configuration["routes"] as? [String]
            ?? (environment["ECHO_ROUTES"] ?? "10.9.0.0/24").split(separator: ",").map(String.init)

        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: remote)
        settings.mtu = 1400
        let ipv4 = NEIPv4Settings(addresses: [address], subnetMasks: ["255.255.255.0"])
        ipv4.includedRoutes = try routes.map { prefix in
            let parts = prefix.split(separator: "/")
            guard parts.count == 2, let length = Int(parts[1]), (0...32).contains(length) else {
                throw NSError(domain: "EchoTunnelProvider", code: 1, userInfo: [NSLocalizedDescriptionKey: "not a prefix: \(prefix)"])
            }
            return NEIPv4Route(destinationAddress: String(parts[0]), subnetMask: Self.mask(length))
        }
        settings.ipv4Settings = ipv4
        try await setTunnelNetworkSettings(settings)
        readPackets()
    }

    override func stopTunnel(with reason: NEProviderStopReason) async {
        FileHandle.standardError.write(Data("echo-provider: stopTunnel(\(reason.rawValue)) after \(answered) replies\n".utf8))
    }

    /// "answered N ignored M"
    override func handleAppMessage(_ messageData: Data) async -> Data? {
        Data("answered \(answered) ignored \(ignored)".utf8)
    }

    private func readPackets() {
        packetFlow.readPacketObjects { [weak self] packets in
            guard let self else { return }
            var replies: [NEPacket] = []
            for packet in packets {
                if let reply = Self.echoReply(to: packet.data) {
                    replies.append(NEPacket(data: reply, protocolFamily: sa_family_t(AF_INET)))
                } else {
                    ignored += 1
                }
            }
            if !replies.isEmpty, packetFlow.writePacketObjects(replies) {
                answered += replies.count
                if let path = environment["ECHO_COUNT_FILE"] {
                    try? "\(answered)\n".write(toFile: path, atomically: true, encoding: .utf8)
                }
            }
            readPackets()
        }
    }

    /// The echo reply to an IPv4 ICMP echo request, or nil for any other packet: source and destination
    /// swapped, type 0, the ICMP checksum recomputed (the IP header's sum does not change with the swap).
    static func echoReply(to request: Data) -> Data? {
        var p = [UInt8](request)
        guard p.count >= 28, p[0] >> 4 == 4 else { return nil }
        let headerLength = Int(p[0] & 0x0f) * 4
        let totalLength = Int(p[2]) << 8 | Int(p[3])
        guard headerLength >= 20, totalLength <= p.count, totalLength >= headerLength + 8,
              p[9] == 1 /* ICMP */, p[headerLength] == 8 /* echo request */, p[headerLength + 1] == 0 else { return nil }
        p.removeSubrange(totalLength...)
        for i in 0..<4 { p.swapAt(12 + i, 16 + i) }
        p[headerLength] = 0
        p[headerLength + 2] = 0
        p[headerLength + 3] = 0
        let sum = checksum(p[headerLength...])
        p[headerLength + 2] = UInt8(sum >> 8)
        p[headerLength + 3] = UInt8(sum & 0xff)
        return Data(p)
    }

    /// The Internet checksum (RFC 1071).
    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var sum: UInt32 = 0
        var i = bytes.startIndex
        while i + 1 < bytes.endIndex {
            sum += UInt32(bytes[i]) << 8 | UInt32(bytes[i + 1])
            i += 2
        }
        if i < bytes.endIndex { sum += UInt32(bytes[i]) << 8 }
        while sum >> 16 != 0 { sum = (sum & 0xffff) + (sum >> 16) }
        return ~UInt16(sum)
    }

    static func mask(_ length: Int) -> String {
        let m: UInt32 = length == 0 ? 0 : ~UInt32(0) << (32 - length)
        return "\(m >> 24).\(m >> 16 & 0xff).\(m >> 8 & 0xff).\(m & 0xff)"
    }
}
