import CMnl
import LinuxSystem
import TunnelgateSettings

extension NetlinkSocket {
    /// Sends one request built by `build` (which writes the fixed header and attributes after the
    /// netlink header) with NLM_F_REQUEST | NLM_F_ACK | `flags`, and waits for its acknowledgement.
    /// For the requests `NetlinkOperation` has no case for (veth pairs, qdiscs, classes).
    func request(type: Int32, flags: Int32, operation: String,
                 _ build: (UnsafeMutablePointer<nlmsghdr>) -> Void) throws(NetlinkError) {
        try get(type: type, operation: operation, header: { nlh in
            nlh.pointee.nlmsg_flags = UInt16(NLM_F_REQUEST | NLM_F_ACK | flags)
            build(nlh)
        }) { _ in }
    }
}

/// Appends `header` as the fixed part of the message.
func putHeader<Header>(_ nlh: UnsafeMutablePointer<nlmsghdr>, _ header: Header) {
    mnl_nlmsg_put_extra_header(nlh, MemoryLayout<Header>.size)!.storeBytes(of: header, as: Header.self)
}

/// Appends an attribute holding the bytes of a C struct.
func putStruct<T>(_ nlh: UnsafeMutablePointer<nlmsghdr>, _ type: UInt16, _ value: T) {
    withUnsafeBytes(of: value) { mnl_attr_put(nlh, type, $0.count, $0.baseAddress) }
}
