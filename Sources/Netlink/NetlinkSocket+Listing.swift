import CMnl
import LinuxSystem
import TunnelgateSettings

/// Text listings of a namespace's links, addresses, routes and rules, one line per object, for
/// snapshots that are compared line by line. Every field the kernel reports is shown except those
/// that change without anyone changing the configuration (statistics, timestamps, carrier-change
/// counts, lifetimes' clocks) and those that depend on the observer (a veth peer's netns id).
extension NetlinkSocket {
    /// Equivalent to: `ip -d link show`, without statistics.
    public func linkListing() throws(NetlinkError) -> [String] {
        var names: [Int32: String] = [:]
        var lines: [(Int32, String)] = []
        try dump(type: Int32(RTM_GETLINK), operation: "ip link show", header: { nlh in
            var ifi = ifinfomsg()
            ifi.ifi_family = 0
            putHeader(nlh, ifi)
        }) { nlh in
            guard nlh.pointee.nlmsg_type == UInt16(RTM_NEWLINK) else { return }
            let (ifi, attrs, length) = messagePayload(nlh, ifinfomsg.self)
            var fields: [String] = []
            var name = ""
            forEachAttribute(in: attrs, length: length) { t, data, len in
                switch t {
                case u16(IFLA_IFNAME): name = cString(data)
                case u16(IFLA_MTU): fields.append("mtu \(data.loadUnaligned(as: UInt32.self))")
                case u16(IFLA_ADDRESS): fields.append("address \(hexBytes(data, len, separator: ":"))")
                case u16(IFLA_BROADCAST): fields.append("brd \(hexBytes(data, len, separator: ":"))")
                case u16(IFLA_OPERSTATE): fields.append("operstate \(data.load(as: UInt8.self))")
                case u16(IFLA_LINKMODE): fields.append("linkmode \(data.load(as: UInt8.self))")
                case u16(IFLA_QDISC): fields.append("qdisc \(cString(data))")
                case u16(IFLA_MASTER): fields.append("master if\(data.loadUnaligned(as: UInt32.self))")
                case u16(IFLA_TXQLEN): fields.append("txqlen \(data.loadUnaligned(as: UInt32.self))")
                case u16(IFLA_GROUP): fields.append("group \(data.loadUnaligned(as: UInt32.self))")
                case u16(IFLA_PROMISCUITY): fields.append("promiscuity \(data.loadUnaligned(as: UInt32.self))")
                case u16(IFLA_IFALIAS): fields.append("alias \(cString(data))")
                case u16(IFLA_LINKINFO):
                    forEachAttribute(in: data, length: len) { k, d, _ in
                        if k == u16(IFLA_INFO_KIND) { fields.append("kind \(cString(d))") }
                    }
                default: break
                }
            }
            let flags = "<\(linkFlagNames(ifi.ifi_flags).joined(separator: ","))>"
            names[ifi.ifi_index] = name
            lines.append((ifi.ifi_index, "\(name) \(flags) " + fields.joined(separator: " ")))
        }
        return lines.sorted { $0.1 < $1.1 }.map(\.1)
    }

    /// Equivalent to: `ip addr show` (addresses only), by interface name.
    public func addressListing() throws(NetlinkError) -> [String] {
        let names = Dictionary(uniqueKeysWithValues: try links().map { ($0.index, $0.name) })
        var lines: [String] = []
        try dump(type: Int32(RTM_GETADDR), operation: "ip addr show", header: { nlh in
            var ifa = ifaddrmsg()
            ifa.ifa_family = 0
            putHeader(nlh, ifa)
        }) { nlh in
            guard nlh.pointee.nlmsg_type == UInt16(RTM_NEWADDR) else { return }
            let (ifa, attrs, length) = messagePayload(nlh, ifaddrmsg.self)
            var local: IPAddress?, address: IPAddress?, extra: [String] = []
            var flags = UInt32(ifa.ifa_flags)
            forEachAttribute(in: attrs, length: length) { t, data, len in
                switch t {
                case u16(IFA_LOCAL): local = attributeAddress(data, len)
                case u16(IFA_ADDRESS): address = attributeAddress(data, len)
                case u16(IFA_BROADCAST): extra.append("brd \(attributeAddress(data, len).map(\.description) ?? "?")")
                case u16(IFA_LABEL): extra.append("label \(cString(data))")
                case u16(IFA_FLAGS): flags = data.loadUnaligned(as: UInt32.self)
                case u16(IFA_RT_PRIORITY): extra.append("metric \(data.loadUnaligned(as: UInt32.self))")
                default: break
                }
            }
            let shown = local ?? address
            var line = "\(names[Int32(bitPattern: ifa.ifa_index)] ?? "if\(ifa.ifa_index)") "
                + "\(ifa.ifa_family == 10 ? "inet6" : "inet") \(shown.map(\.description) ?? "?")/\(ifa.ifa_prefixlen)"
            if let local, let address, local != address { line += " peer \(address)" }
            line += " scope \(ifa.ifa_scope) flags 0x\(String(flags, radix: 16))"
            if !extra.isEmpty { line += " " + extra.joined(separator: " ") }
            lines.append(line)
        }
        return lines.sorted()
    }

    /// Every route of every table. Equivalent to: `ip [-6] route show table all`.
    public func routeListing(family: IPFamily) throws(NetlinkError) -> [String] {
        let names = Dictionary(uniqueKeysWithValues: try links().map { ($0.index, $0.name) })
        var lines: [String] = []
        try dump(type: Int32(RTM_GETROUTE), operation: "ip \(family == .ipv6 ? "-6" : "-4") route show table all",
                 header: { nlh in
                     var rtm = rtmsg()
                     rtm.rtm_family = family.addressFamily
                     putHeader(nlh, rtm)
                 }) { nlh in
            guard nlh.pointee.nlmsg_type == UInt16(RTM_NEWROUTE) else { return }
            let (rtm, attrs, length) = messagePayload(nlh, rtmsg.self)
            var table = UInt32(rtm.rtm_table)
            var dst: IPAddress?, src: IPAddress?, extra: [String] = []
            forEachAttribute(in: attrs, length: length) { t, data, len in
                switch t {
                case u16(RTA_TABLE): table = data.loadUnaligned(as: UInt32.self)
                case u16(RTA_DST): dst = attributeAddress(data, len)
                case u16(RTA_SRC): src = attributeAddress(data, len)
                case u16(RTA_OIF):
                    let oif = data.loadUnaligned(as: Int32.self)
                    extra.append("dev \(names[oif] ?? "if\(oif)")")
                case u16(RTA_IIF):
                    let iif = data.loadUnaligned(as: Int32.self)
                    extra.append("iif \(names[iif] ?? "if\(iif)")")
                case u16(RTA_GATEWAY): extra.append("via \(attributeAddress(data, len).map(\.description) ?? "?")")
                case u16(RTA_PREFSRC): extra.append("src \(attributeAddress(data, len).map(\.description) ?? "?")")
                case u16(RTA_PRIORITY): extra.append("metric \(data.loadUnaligned(as: UInt32.self))")
                case u16(RTA_PREF): extra.append("pref \(data.load(as: UInt8.self))")
                case u16(RTA_MARK): extra.append("mark 0x\(String(data.loadUnaligned(as: UInt32.self), radix: 16))")
                case u16(RTA_MULTIPATH): extra.append("multipath \(hexBytes(data, len, separator: ""))")
                case u16(RTA_METRICS):
                    forEachAttribute(in: data, length: len) { m, d, _ in
                        extra.append("metric\(m) \(d.loadUnaligned(as: UInt32.self))")
                    }
                default: break
                }
            }
            let destination = dst.map { "\($0)/\(rtm.rtm_dst_len)" } ?? (rtm.rtm_dst_len == 0 ? "default" : "?/\(rtm.rtm_dst_len)")
            var line = "table \(table) type \(rtm.rtm_type) \(destination)"
            if let src { line += " from \(src)/\(rtm.rtm_src_len)" }
            if !extra.isEmpty { line += " " + extra.joined(separator: " ") }
            line += " proto \(rtm.rtm_protocol) scope \(rtm.rtm_scope) tos \(rtm.rtm_tos) flags 0x\(String(rtm.rtm_flags, radix: 16))"
            lines.append(line)
        }
        return lines.sorted()
    }

    /// Every policy rule. Equivalent to: `ip [-6] rule show`.
    public func ruleListing(family: IPFamily) throws(NetlinkError) -> [String] {
        var lines: [(UInt32, String)] = []
        try dump(type: Int32(RTM_GETRULE), operation: "ip \(family == .ipv6 ? "-6" : "-4") rule show",
                 header: { nlh in
                     var frh = fib_rule_hdr()
                     frh.family = family.addressFamily
                     putHeader(nlh, frh)
                 }) { nlh in
            guard nlh.pointee.nlmsg_type == UInt16(RTM_NEWRULE) else { return }
            let (frh, attrs, length) = messagePayload(nlh, fib_rule_hdr.self)
            var priority: UInt32 = 0
            var table = UInt32(frh.table)
            var fields: [String] = []
            forEachAttribute(in: attrs, length: length) { t, data, len in
                switch t {
                case u16(FRA_PRIORITY): priority = data.loadUnaligned(as: UInt32.self)
                case u16(FRA_TABLE): table = data.loadUnaligned(as: UInt32.self)
                case u16(FRA_SRC): fields.append("from \(attributeAddress(data, len).map(\.description) ?? "?")/\(frh.src_len)")
                case u16(FRA_DST): fields.append("to \(attributeAddress(data, len).map(\.description) ?? "?")/\(frh.dst_len)")
                case u16(FRA_IIFNAME): fields.append("iif \(cString(data))")
                case u16(FRA_OIFNAME): fields.append("oif \(cString(data))")
                case u16(FRA_FWMARK): fields.append("fwmark 0x\(String(data.loadUnaligned(as: UInt32.self), radix: 16))")
                case u16(FRA_FWMASK): fields.append("fwmask 0x\(String(data.loadUnaligned(as: UInt32.self), radix: 16))")
                case u16(FRA_SUPPRESS_PREFIXLEN):
                    let v = data.loadUnaligned(as: UInt32.self)
                    if v != UInt32.max { fields.append("suppress_prefixlength \(v)") }
                case u16(FRA_SUPPRESS_IFGROUP):
                    let v = data.loadUnaligned(as: UInt32.self)
                    if v != UInt32.max { fields.append("suppress_ifgroup \(v)") }
                case u16(FRA_GOTO): fields.append("goto \(data.loadUnaligned(as: UInt32.self))")
                case u16(FRA_L3MDEV): fields.append("l3mdev \(data.load(as: UInt8.self))")
                case u16(FRA_UID_RANGE): fields.append("uidrange \(hexBytes(data, len, separator: ""))")
                case u16(FRA_PROTOCOL): fields.append("proto \(data.load(as: UInt8.self))")
                case u16(FRA_IP_PROTO): fields.append("ipproto \(data.load(as: UInt8.self))")
                case u16(FRA_SPORT_RANGE): fields.append("sport \(hexBytes(data, len, separator: ""))")
                case u16(FRA_DPORT_RANGE): fields.append("dport \(hexBytes(data, len, separator: ""))")
                default: break
                }
            }
            let invert = frh.flags & UInt32(FIB_RULE_INVERT) != 0 ? " not" : ""
            lines.append((priority, "\(priority):\(invert) \(fields.joined(separator: " ")) lookup \(table) action \(frh.action) tos \(frh.tos)"))
        }
        return lines.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.1)
    }
}

private func cString(_ data: UnsafeMutableRawPointer) -> String {
    String(cString: data.assumingMemoryBound(to: CChar.self))
}

private func hexBytes(_ data: UnsafeMutableRawPointer, _ length: Int, separator: String) -> String {
    let bytes = UnsafeRawBufferPointer(start: data, count: length)
    return bytes.map { b in (b < 16 ? "0" : "") + String(b, radix: 16) }.joined(separator: separator)
}

/// IFF_* names, as ip(8) prints them.
private func linkFlagNames(_ flags: UInt32) -> [String] {
    let names: [(UInt32, String)] = [
        (0x1, "UP"), (0x2, "BROADCAST"), (0x8, "LOOPBACK"), (0x10, "POINTOPOINT"), (0x40, "RUNNING"),
        (0x80, "NOARP"), (0x100, "PROMISC"), (0x200, "ALLMULTI"), (0x1000, "MULTICAST"),
        (0x10000, "LOWER_UP"), (0x20000, "DORMANT"),
    ]
    return names.filter { flags & $0.0 != 0 }.map(\.1)
}
