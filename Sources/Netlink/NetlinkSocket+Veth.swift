import CMnl
import LinuxSystem
import TunnelgateSettings

extension NetlinkSocket {
    /// Creates a veth pair: `name` in this socket's namespace and `peerName` in the namespace
    /// `peerNamespace` refers to (a descriptor of /run/netns/NAME; nil: this namespace too).
    /// Both ends start down. Equivalent to: `ip link add NAME type veth peer name PEER netns NS`.
    public func addVethPair(name: String, peerName: String, peerNamespace: FileDescriptor?,
                            peerNamespaceName: String? = nil) throws(NetlinkError) {
        let words = "ip link add \(name) type veth peer name \(peerName)"
            + (peerNamespace == nil ? "" : " netns \(peerNamespaceName ?? "fd\(peerNamespace!.rawValue)")")
        try request(type: Int32(RTM_NEWLINK), flags: NLM_F_CREATE | NLM_F_EXCL, operation: words) { nlh in
            var ifi = ifinfomsg()
            ifi.ifi_family = UInt8(SocketFamily.unspecified)
            putHeader(nlh, ifi)
            mnl_attr_put_strz(nlh, u16(IFLA_IFNAME), name)
            let linkinfo = mnl_attr_nest_start(nlh, u16(IFLA_LINKINFO))
            mnl_attr_put_strz(nlh, u16(IFLA_INFO_KIND), "veth")
            let data = mnl_attr_nest_start(nlh, u16(IFLA_INFO_DATA))
            let peer = mnl_attr_nest_start(nlh, u16(VETH_INFO_PEER))
            // VETH_INFO_PEER carries an ifinfomsg of its own before the peer's attributes.
            var peerInfo = ifinfomsg()
            peerInfo.ifi_family = 0
            withUnsafeBytes(of: peerInfo) { raw in
                let dst = mnl_nlmsg_get_payload_tail(nlh)!
                dst.copyMemory(from: raw.baseAddress!, byteCount: raw.count)
                nlh.pointee.nlmsg_len += UInt32((raw.count + 3) & ~3)
            }
            mnl_attr_put_strz(nlh, u16(IFLA_IFNAME), peerName)
            if let peerNamespace { mnl_attr_put_u32(nlh, u16(IFLA_NET_NS_FD), UInt32(bitPattern: peerNamespace.rawValue)) }
            mnl_attr_nest_end(nlh, peer)
            mnl_attr_nest_end(nlh, data)
            mnl_attr_nest_end(nlh, linkinfo)
        }
    }

    /// Sets a link administratively up or down. Equivalent to: `ip link set dev DEV up|down`.
    public func setLink(_ name: String, up: Bool) throws(NetlinkError) {
        guard let link = try link(named: name) else {
            throw NetlinkError(operation: "ip link set dev \(name) \(up ? "up" : "down")", errno: .noSuchDevice)
        }
        do {
            try execute([.setLink(index: link.index, name: name, mtu: nil, up: up)])
        } catch {
            throw error.failures[0].error
        }
    }

    /// Adds addresses and routes (in order), stopping at the first refusal. Equivalent to a run of
    /// `ip addr add` and `ip route add`.
    public func apply(_ operations: [NetlinkOperation]) throws(NetlinkError) {
        for operation in operations {
            do {
                try execute([operation])
            } catch {
                throw error.failures[0].error
            }
        }
    }
}
