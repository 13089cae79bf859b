import CMnl
import LinuxSystem
import TunnelgateSettings

/// A message's fixed header, and where its attributes start and how long they are.
func messagePayload<Header>(_ nlh: UnsafeMutablePointer<nlmsghdr>, _: Header.Type) -> (Header, UnsafeMutableRawPointer, Int) {
    let base = mnl_nlmsg_get_payload(nlh)!
    let header = base.loadUnaligned(as: Header.self)
    let aligned = (MemoryLayout<Header>.size + 3) & ~3
    let length = Int(nlh.pointee.nlmsg_len) - MemoryLayout<nlmsghdr>.size - aligned
    return (header, base + aligned, length)
}

/// An attribute holding an IPv4 or IPv6 address.
func attributeAddress(_ data: UnsafeMutableRawPointer, _ length: Int) -> IPAddress? {
    let bytes = UnsafeRawBufferPointer(start: data, count: length)
    switch length {
    case 4: return .v4(IPv4Address(bytes: bytes))
    case 16: return .v6(IPv6Address(bytes: bytes))
    default: return nil
    }
}

extension NetlinkSocket {
    /// Every link in the namespace. Equivalent to: `ip -s -d link show`.
    public func links() throws(NetlinkError) -> [LinkInfo] {
        var out: [LinkInfo] = []
        try dump(type: Int32(RTM_GETLINK), operation: "ip link show",
                 header: { nlh in
                     var ifi = ifinfomsg()
                     ifi.ifi_family = UInt8(SocketFamily.unspecified)
                     mnl_nlmsg_put_extra_header(nlh, MemoryLayout<ifinfomsg>.size)!.storeBytes(of: ifi, as: ifinfomsg.self)
                 }) { nlh in
            if let link = Self.parseLink(nlh) { out.append(link) }
        }
        return out
    }

    /// One link, asked for by index (no dump); nil when there is none.
    /// Equivalent to: `ip -s -d link show dev DEV`.
    public func link(index: Int32) throws(NetlinkError) -> LinkInfo? {
        var found: LinkInfo?
        do {
            try get(type: Int32(RTM_GETLINK), operation: "ip link show dev if\(index)",
                    header: { nlh in
                        var ifi = ifinfomsg()
                        ifi.ifi_family = UInt8(SocketFamily.unspecified)
                        ifi.ifi_index = index
                        mnl_nlmsg_put_extra_header(nlh, MemoryLayout<ifinfomsg>.size)!.storeBytes(of: ifi, as: ifinfomsg.self)
                    }) { nlh in
                if let link = Self.parseLink(nlh), link.index == index { found = link }
            }
        } catch {
            if error.errno == .noSuchDevice { return nil }
            throw error
        }
        return found
    }

    /// A link from an RTM_NEWLINK message.
    private static func parseLink(_ nlh: UnsafeMutablePointer<nlmsghdr>) -> LinkInfo? {
        guard nlh.pointee.nlmsg_type == UInt16(RTM_NEWLINK) else { return nil }
        let (ifi, attrs, length) = messagePayload(nlh, ifinfomsg.self)
        var link = LinkInfo(index: ifi.ifi_index, name: "", mtu: 0, flags: ifi.ifi_flags, kind: nil, statistics: nil)
        forEachAttribute(in: attrs, length: length) { type, data, len in
            switch type {
            case u16(IFLA_IFNAME): link.name = String(cString: data.assumingMemoryBound(to: CChar.self))
            case u16(IFLA_MTU): link.mtu = data.loadUnaligned(as: UInt32.self)
            case u16(IFLA_STATS64) where len >= MemoryLayout<rtnl_link_stats64>.size:
                let s = data.loadUnaligned(as: rtnl_link_stats64.self)
                link.statistics = LinkStatistics(rxPackets: s.rx_packets, txPackets: s.tx_packets,
                                                 rxBytes: s.rx_bytes, txBytes: s.tx_bytes,
                                                 rxDropped: s.rx_dropped, txDropped: s.tx_dropped)
            case u16(IFLA_LINKINFO):
                forEachAttribute(in: data, length: len) { t, d, _ in
                    if t == u16(IFLA_INFO_KIND) {
                        link.kind = String(cString: d.assumingMemoryBound(to: CChar.self))
                    }
                }
            default: break
            }
        }
        return link
    }

    public func link(named name: String) throws(NetlinkError) -> LinkInfo? {
        try links().first { $0.name == name }
    }

    /// The addresses of one interface. Equivalent to: `ip addr show dev DEV`.
    public func addresses(interfaceIndex: Int32) throws(NetlinkError) -> [AddressInfo] {
        var out: [AddressInfo] = []
        try dump(type: Int32(RTM_GETADDR), operation: "ip addr show",
                 header: { nlh in
                     var ifa = ifaddrmsg()
                     ifa.ifa_family = UInt8(SocketFamily.unspecified)
                     ifa.ifa_index = UInt32(interfaceIndex)
                     mnl_nlmsg_put_extra_header(nlh, MemoryLayout<ifaddrmsg>.size)!.storeBytes(of: ifa, as: ifaddrmsg.self)
                 }) { nlh in
            guard nlh.pointee.nlmsg_type == UInt16(RTM_NEWADDR) else { return }
            let (ifa, attrs, length) = messagePayload(nlh, ifaddrmsg.self)
            guard Int32(bitPattern: ifa.ifa_index) == interfaceIndex else { return }
            var local: IPAddress?, addr: IPAddress?
            forEachAttribute(in: attrs, length: length) { type, data, len in
                if type == u16(IFA_LOCAL) { local = attributeAddress(data, len) }
                if type == u16(IFA_ADDRESS) { addr = attributeAddress(data, len) }
            }
            if let a = local ?? addr, let prefix = IPPrefix(address: a, length: Int(ifa.ifa_prefixlen)) {
                out.append(AddressInfo(interfaceIndex: interfaceIndex, prefix: prefix))
            }
        }
        return out
    }

    /// The routes of one table. Equivalent to: `ip [-6] route show table T`.
    public func routes(family: IPFamily, table: UInt32) throws(NetlinkError) -> [RouteSpec] {
        var out: [RouteSpec] = []
        try dump(type: Int32(RTM_GETROUTE),
                 operation: "ip \(family == .ipv6 ? "-6" : "-4") route show table \(table)",
                 header: { nlh in
                     var rtm = rtmsg()
                     rtm.rtm_family = family.addressFamily
                     mnl_nlmsg_put_extra_header(nlh, MemoryLayout<rtmsg>.size)!.storeBytes(of: rtm, as: rtmsg.self)
                     mnl_attr_put_u32(nlh, u16(RTA_TABLE), table)
                 }) { nlh in
            guard nlh.pointee.nlmsg_type == UInt16(RTM_NEWROUTE) else { return }
            let (rtm, attrs, length) = messagePayload(nlh, rtmsg.self)
            guard let type = RouteType(rawValue: rtm.rtm_type) else { return }
            var routeTable = UInt32(rtm.rtm_table)
            var dst: IPAddress?, oif: Int32?, gateway: IPAddress?
            forEachAttribute(in: attrs, length: length) { t, data, len in
                switch t {
                case u16(RTA_TABLE): routeTable = data.loadUnaligned(as: UInt32.self)
                case u16(RTA_DST): dst = attributeAddress(data, len)
                case u16(RTA_OIF): oif = data.loadUnaligned(as: Int32.self)
                case u16(RTA_GATEWAY): gateway = attributeAddress(data, len)
                default: break
                }
            }
            guard routeTable == table else { return }
            let zero: IPAddress = family == .ipv4 ? .v4(IPv4Address(0)) : .v6(IPv6Address(high: 0, low: 0))
            guard let prefix = IPPrefix(address: dst ?? zero, length: Int(rtm.rtm_dst_len)) else { return }
            out.append(RouteSpec(destination: prefix, type: type, table: routeTable,
                                 outputInterface: type == .unicast ? oif : nil,
                                 gateway: gateway, protocolID: rtm.rtm_protocol))
        }
        return out
    }

    /// Every rule of one family. Equivalent to: `ip [-6] rule show`.
    public func rules(family: IPFamily) throws(NetlinkError) -> [RuleInfo] {
        var out: [RuleInfo] = []
        try dump(type: Int32(RTM_GETRULE),
                 operation: "ip \(family == .ipv6 ? "-6" : "-4") rule show",
                 header: { nlh in
                     var frh = fib_rule_hdr()
                     frh.family = family.addressFamily
                     mnl_nlmsg_put_extra_header(nlh, MemoryLayout<fib_rule_hdr>.size)!.storeBytes(of: frh, as: fib_rule_hdr.self)
                 }) { nlh in
            guard nlh.pointee.nlmsg_type == UInt16(RTM_NEWRULE) else { return }
            let (frh, attrs, length) = messagePayload(nlh, fib_rule_hdr.self)
            guard IPFamily(addressFamily: frh.family) == family else { return }
            var spec = RuleSpec(family: family, priority: 0, table: UInt32(frh.table),
                                invert: frh.flags & UInt32(FIB_RULE_INVERT) != 0, protocolID: 0)
            switch Int32(frh.action) {
            case Int32(FR_ACT_GOTO): spec.action = .goto(0)
            case Int32(FR_ACT_NOP): spec.action = .nop
            default: spec.action = .lookup
            }
            forEachAttribute(in: attrs, length: length) { t, data, size in
                switch t {
                case u16(FRA_PRIORITY): spec.priority = data.loadUnaligned(as: UInt32.self)
                case u16(FRA_TABLE): spec.table = data.loadUnaligned(as: UInt32.self)
                case u16(FRA_GOTO): spec.action = .goto(data.loadUnaligned(as: UInt32.self))
                case u16(FRA_DST):
                    if let address = attributeAddress(data, size) {
                        spec.destination = IPPrefix(address: address, length: Int(frh.dst_len))
                    }
                case u16(FRA_FWMARK): spec.fwmark = data.loadUnaligned(as: UInt32.self)
                case u16(FRA_FWMASK): spec.fwmask = data.loadUnaligned(as: UInt32.self)
                case u16(FRA_IP_PROTO): spec.ipProtocol = data.load(as: UInt8.self)
                case u16(FRA_DPORT_RANGE):
                    let r = data.loadUnaligned(as: fib_rule_port_range.self)
                    if r.start <= r.end { spec.destinationPorts = r.start...r.end }
                case u16(FRA_UID_RANGE):
                    let r = data.loadUnaligned(as: fib_rule_uid_range.self)
                    if r.start <= r.end { spec.uidRange = r.start...r.end }
                case u16(FRA_SUPPRESS_PREFIXLEN):
                    let v = data.loadUnaligned(as: UInt32.self)
                    spec.suppressPrefixLength = v == UInt32.max ? nil : v
                case u16(FRA_PROTOCOL): spec.protocolID = data.load(as: UInt8.self)
                default: break
                }
            }
            if spec.action != .lookup { spec.table = 0 }
            out.append(RuleInfo(spec: spec, action: frh.action))
        }
        return out
    }
}
