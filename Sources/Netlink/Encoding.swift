import CMnl
import LinuxSystem
import TunnelgateSettings

extension IPFamily {
    /// AF_INET / AF_INET6.
    var addressFamily: UInt8 { self == .ipv4 ? UInt8(SocketFamily.ipv4) : UInt8(SocketFamily.ipv6) }

    init?(addressFamily: UInt8) {
        switch Int32(addressFamily) {
        case SocketFamily.ipv4: self = .ipv4
        case SocketFamily.ipv6: self = .ipv6
        default: return nil
        }
    }
}

private func putAddress(_ nlh: UnsafeMutablePointer<nlmsghdr>, _ type: UInt16, _ address: IPAddress) {
    address.bytes.withUnsafeBytes { mnl_attr_put(nlh, type, $0.count, $0.baseAddress) }
}

private func put<Header>(_ nlh: UnsafeMutablePointer<nlmsghdr>, _ header: Header) {
    let extra = mnl_nlmsg_put_extra_header(nlh, MemoryLayout<Header>.size)!
    extra.storeBytes(of: header, as: Header.self)
}

extension NetlinkSocket {
    /// Writes one request (header, fixed part, attributes) at `nlh`.
    func encode(_ operation: NetlinkOperation, into nlh: UnsafeMutablePointer<nlmsghdr>, sequence: UInt32) {
        nlh.pointee.nlmsg_seq = sequence
        var flags = Int32(NLM_F_REQUEST | NLM_F_ACK)
        switch operation {
        case .setLink(let index, _, let mtu, let up):
            nlh.pointee.nlmsg_type = UInt16(RTM_NEWLINK)
            var ifi = ifinfomsg()
            ifi.ifi_family = UInt8(SocketFamily.unspecified)
            ifi.ifi_index = index
            if let up {
                ifi.ifi_change = LinkInfo.upFlag
                ifi.ifi_flags = up ? LinkInfo.upFlag : 0
            }
            put(nlh, ifi)
            if let mtu { mnl_attr_put_u32(nlh, u16(IFLA_MTU), mtu) }

        case .moveLink(let index, _, let namespace, _):
            nlh.pointee.nlmsg_type = UInt16(RTM_NEWLINK)
            var ifi = ifinfomsg()
            ifi.ifi_family = UInt8(SocketFamily.unspecified)
            ifi.ifi_index = index
            put(nlh, ifi)
            mnl_attr_put_u32(nlh, u16(IFLA_NET_NS_FD), UInt32(bitPattern: namespace))

        case .deleteLink(let index, _):
            nlh.pointee.nlmsg_type = UInt16(RTM_DELLINK)
            var ifi = ifinfomsg()
            ifi.ifi_family = UInt8(SocketFamily.unspecified)
            ifi.ifi_index = index
            put(nlh, ifi)

        case .addAddress(let a), .deleteAddress(let a):
            let add: Bool
            if case .addAddress = operation { add = true } else { add = false }
            nlh.pointee.nlmsg_type = UInt16(add ? RTM_NEWADDR : RTM_DELADDR)
            if add { flags |= Int32(NLM_F_CREATE | NLM_F_EXCL) }
            var ifa = ifaddrmsg()
            ifa.ifa_family = a.prefix.family.addressFamily
            ifa.ifa_prefixlen = UInt8(a.prefix.length)
            ifa.ifa_index = UInt32(a.interfaceIndex)
            ifa.ifa_scope = u8(RT_SCOPE_UNIVERSE)
            put(nlh, ifa)
            putAddress(nlh, u16(IFA_LOCAL), a.prefix.address)
            putAddress(nlh, u16(IFA_ADDRESS), a.prefix.address)
            // No duplicate address detection on a point-to-point TUN: usable at once.
            let addressFlags = (a.prefix.family == .ipv6 ? UInt32(IFA_F_NODAD) : 0) | (a.noPrefixRoute ? UInt32(IFA_F_NOPREFIXROUTE) : 0)
            if add, addressFlags != 0 { mnl_attr_put_u32(nlh, u16(IFA_FLAGS), addressFlags) }

        case .addRoute(let r), .deleteRoute(let r):
            let add: Bool
            if case .addRoute = operation { add = true } else { add = false }
            nlh.pointee.nlmsg_type = UInt16(add ? RTM_NEWROUTE : RTM_DELROUTE)
            if add { flags |= Int32(NLM_F_CREATE | NLM_F_EXCL) }
            var rtm = rtmsg()
            rtm.rtm_family = r.family.addressFamily
            rtm.rtm_dst_len = UInt8(r.destination.length)
            rtm.rtm_table = r.table < 256 ? UInt8(r.table) : u8(RT_TABLE_UNSPEC)
            rtm.rtm_protocol = r.protocolID
            rtm.rtm_type = r.type.rawValue
            rtm.rtm_scope = r.type == .unicast && r.gateway == nil && !r.globalScope ? u8(RT_SCOPE_LINK) : u8(RT_SCOPE_UNIVERSE)
            if r.gateway != nil { rtm.rtm_flags = UInt32(RTNH_F_ONLINK) }
            put(nlh, rtm)
            mnl_attr_put_u32(nlh, u16(RTA_TABLE), r.table)
            if r.destination.length > 0 || r.family == .ipv6 {
                putAddress(nlh, u16(RTA_DST), r.destination.address)
            }
            if r.type == .unicast, let oif = r.outputInterface {
                mnl_attr_put_u32(nlh, u16(RTA_OIF), UInt32(bitPattern: oif))
            }
            if r.type == .unicast, let gateway = r.gateway {
                putAddress(nlh, u16(RTA_GATEWAY), gateway)
            }

        case .addRule(let r), .deleteRule(let r):
            let add: Bool
            if case .addRule = operation { add = true } else { add = false }
            nlh.pointee.nlmsg_type = UInt16(add ? RTM_NEWRULE : RTM_DELRULE)
            if add { flags |= Int32(NLM_F_CREATE | NLM_F_EXCL) }
            var frh = fib_rule_hdr()
            frh.family = r.family.addressFamily
            switch r.action {
            case .lookup:
                frh.table = r.table < 256 ? UInt8(r.table) : 0
                frh.action = u8(FR_ACT_TO_TBL)
            case .goto: frh.action = u8(FR_ACT_GOTO)
            case .nop: frh.action = u8(FR_ACT_NOP)
            }
            if let destination = r.destination { frh.dst_len = UInt8(destination.length) }
            if r.invert { frh.flags = UInt32(FIB_RULE_INVERT) }
            put(nlh, frh)
            mnl_attr_put_u32(nlh, u16(FRA_PRIORITY), r.priority)
            switch r.action {
            case .lookup: mnl_attr_put_u32(nlh, u16(FRA_TABLE), r.table)
            case .goto(let target): mnl_attr_put_u32(nlh, u16(FRA_GOTO), target)
            case .nop: break
            }
            if let destination = r.destination { putAddress(nlh, u16(FRA_DST), destination.network.address) }
            if let mark = r.fwmark { mnl_attr_put_u32(nlh, u16(FRA_FWMARK), mark) }
            if let mask = r.fwmask { mnl_attr_put_u32(nlh, u16(FRA_FWMASK), mask) }
            if let proto = r.ipProtocol { mnl_attr_put_u8(nlh, u16(FRA_IP_PROTO), proto) }
            if let ports = r.destinationPorts {
                var range = fib_rule_port_range(start: ports.lowerBound, end: ports.upperBound)
                withUnsafeBytes(of: &range) { mnl_attr_put(nlh, u16(FRA_DPORT_RANGE), $0.count, $0.baseAddress) }
            }
            if let uids = r.uidRange {
                var range = fib_rule_uid_range(start: uids.lowerBound, end: uids.upperBound)
                withUnsafeBytes(of: &range) { mnl_attr_put(nlh, u16(FRA_UID_RANGE), $0.count, $0.baseAddress) }
            }
            if let n = r.suppressPrefixLength { mnl_attr_put_u32(nlh, u16(FRA_SUPPRESS_PREFIXLEN), n) }
            mnl_attr_put_u8(nlh, u16(FRA_PROTOCOL), r.protocolID)
        }
        nlh.pointee.nlmsg_flags = UInt16(flags)
    }
}
