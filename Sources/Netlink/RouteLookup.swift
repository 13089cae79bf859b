import CMnl
import LinuxSystem
import TunnelgateSettings

/// The kernel's answer to a route lookup: the route a packet sent from this
/// host to one address would take, policy rules included. Equivalent to
/// what `ip route get ADDR mark M ipproto udp` prints.
public struct RouteLookup: Sendable, Hashable {
    /// rtm_type of the route found (RTN_*). A lookup that ends on an
    /// unreachable, blackhole or prohibit route is usually refused with an
    /// errno instead, but IPv6 may answer with the type.
    public struct Kind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        public static let unicast = Kind(rawValue: 1)      // RTN_UNICAST
        public static let local = Kind(rawValue: 2)        // RTN_LOCAL
        public static let blackhole = Kind(rawValue: 6)    // RTN_BLACKHOLE
        public static let unreachable = Kind(rawValue: 7)  // RTN_UNREACHABLE
        public static let prohibit = Kind(rawValue: 8)     // RTN_PROHIBIT
        public static let `throw` = Kind(rawValue: 9)      // RTN_THROW

        /// The name ip(8) gives the type.
        public var description: String {
            switch self {
            case .unicast: "unicast"
            case .local: "local"
            case .blackhole: "blackhole"
            case .unreachable: "unreachable"
            case .prohibit: "prohibit"
            case .throw: "throw"
            default: "type \(rawValue)"
            }
        }
    }

    public var destination: IPAddress
    public var kind: Kind
    /// RTA_OIF: the interface the packet leaves by.
    public var outputInterface: Int32?
    /// RTA_GATEWAY: the next hop, when the route has one.
    public var gateway: IPAddress?
    /// RTA_PREFSRC: the source address the kernel would choose; absent when it has none to give.
    public var preferredSource: IPAddress?
    /// RTA_TABLE: the table the route was found in.
    public var table: UInt32

    public init(destination: IPAddress, kind: Kind = .unicast, outputInterface: Int32? = nil, gateway: IPAddress? = nil,
                preferredSource: IPAddress? = nil, table: UInt32 = 254) {
        self.destination = destination
        self.kind = kind
        self.outputInterface = outputInterface
        self.gateway = gateway
        self.preferredSource = preferredSource
        self.table = table
    }
}

extension NetlinkSocket {
    /// Asks the kernel which route a UDP packet sent from this host to
    /// `destination` would take, carrying `mark` (SO_MARK) as a socket of
    /// the tunnel's runtime does, so that fwmark rules decide as they would
    /// for its packets. Throws the kernel's refusal: ENETUNREACH (no route),
    /// EHOSTUNREACH (an unreachable route), EINVAL (blackhole), EACCES
    /// (prohibit). Equivalent to: `ip route get ADDR [mark M] ipproto udp`.
    ///
    /// With `uid` (and `ipProtocol`, `destinationPort`) the lookup is the one a socket of that user sends
    /// with (`ip route get ADDR uid U ipproto P dport N`): for a carrier identity that is a packet
    /// plane's user, whose exemption rules match on all three.
    public func lookupRoute(to destination: IPAddress, mark: UInt32? = nil, uid: UInt32? = nil,
                            ipProtocol: UInt8 = 17, destinationPort: UInt16? = nil) throws(NetlinkError) -> RouteLookup {
        var found: RouteLookup?
        let family = destination.family
        let words = "ip \(family == .ipv6 ? "-6" : "-4") route get \(destination)"
            + (mark.map { " mark 0x\(String($0, radix: 16))" } ?? "") + (uid.map { " uid \($0)" } ?? "")
            + " ipproto \(ipProtocol == 6 ? "tcp" : ipProtocol == 17 ? "udp" : String(ipProtocol))"
            + (destinationPort.map { " dport \($0)" } ?? "")
        try get(type: Int32(RTM_GETROUTE), operation: words,
                header: { nlh in
                    var rtm = rtmsg()
                    rtm.rtm_family = family.addressFamily
                    rtm.rtm_dst_len = UInt8(family.bitWidth)
                    // IPv4 names the table the route was found in only when asked; IPv6 always
                    // does, and refuses the flag (EINVAL, "Invalid flags for get route request").
                    if family == .ipv4 { rtm.rtm_flags = UInt32(RTM_F_LOOKUP_TABLE) }
                    mnl_nlmsg_put_extra_header(nlh, MemoryLayout<rtmsg>.size)!.storeBytes(of: rtm, as: rtmsg.self)
                    destination.bytes.withUnsafeBytes { mnl_attr_put(nlh, u16(RTA_DST), $0.count, $0.baseAddress) }
                    if let mark { mnl_attr_put_u32(nlh, u16(RTA_MARK), mark) }
                    if let uid { mnl_attr_put_u32(nlh, u16(RTA_UID), uid) }
                    mnl_attr_put_u8(nlh, u16(RTA_IP_PROTO), ipProtocol)
                    if let destinationPort { mnl_attr_put_u16(nlh, u16(RTA_DPORT), destinationPort.bigEndian) }
                }) { nlh in
            guard nlh.pointee.nlmsg_type == UInt16(RTM_NEWROUTE) else { return }
            let (rtm, attrs, length) = messagePayload(nlh, rtmsg.self)
            var answer = RouteLookup(destination: destination, kind: RouteLookup.Kind(rawValue: rtm.rtm_type),
                                     table: UInt32(rtm.rtm_table))
            forEachAttribute(in: attrs, length: length) { t, data, len in
                switch t {
                case u16(RTA_TABLE): answer.table = data.loadUnaligned(as: UInt32.self)
                case u16(RTA_OIF): answer.outputInterface = data.loadUnaligned(as: Int32.self)
                case u16(RTA_GATEWAY): answer.gateway = attributeAddress(data, len)
                case u16(RTA_PREFSRC): answer.preferredSource = attributeAddress(data, len)
                default: break
                }
            }
            found = answer
        }
        guard let found else {
            // An ack without an answer: not something the kernel does for RTM_GETROUTE.
            throw NetlinkError(operation: words, errno: .noData)
        }
        return found
    }
}
