import CMnl
import CNftnl
import LinuxSystem

/// A netfilter netlink socket bound to one nfnetlink_log group: it receives a copy of each packet an
/// nftables `log group G` statement (NftStatement.log) passes, up to the rule's snaplen. Reading
/// changes nothing: the packets themselves go on as the ruleset says.
///
/// Equivalent to: what `ulogd` or `tcpdump -i nflog:G` bind to (NFULNL_CFG_CMD_BIND, then
/// NFULNL_COPY_PACKET).
public final class NetfilterLogSocket {
    private let socket: OpaquePointer
    private let bufferSize = 1 << 16
    private let buffer: UnsafeMutableRawPointer
    public let group: UInt16

    /// Binds `group` in the calling thread's namespace (EBUSY when another socket holds it) and asks
    /// for `copyRange` bytes of each packet. Non-blocking.
    public init(group: UInt16, copyRange: UInt32 = 512) throws(NftablesError) {
        guard let s = mnl_socket_open2(NETLINK_NETFILTER, FileDescriptor.socketFlags(nonBlocking: true)) else {
            throw NftablesError(operation: "socket(AF_NETLINK, NETLINK_NETFILTER)", errno: .current)
        }
        guard mnl_socket_bind(s, 0, pid_t(MNL_SOCKET_AUTOPID)) == 0 else {
            let e = Errno.current
            mnl_socket_close(s)
            throw NftablesError(operation: "bind(NETLINK_NETFILTER)", errno: e)
        }
        socket = s
        self.group = group
        buffer = .allocate(byteCount: bufferSize, alignment: 8)
        do throws(NftablesError) {
            try configure("NFULNL_CFG_CMD_BIND group \(group)") { nlh in
                var command = nfulnl_msg_config_cmd(command: UInt8(NFULNL_CFG_CMD_BIND.rawValue))
                mnl_attr_put(nlh, UInt16(NFULA_CFG_CMD.rawValue), MemoryLayout<nfulnl_msg_config_cmd>.size, &command)
            }
            try configure("NFULNL_CFG_MODE copy packet \(copyRange)") { nlh in
                var mode = nfulnl_msg_config_mode(copy_range: copyRange.bigEndian, copy_mode: UInt8(NFULNL_COPY_PACKET), _pad: 0)
                mnl_attr_put(nlh, UInt16(NFULA_CFG_MODE.rawValue), MemoryLayout<nfulnl_msg_config_mode>.size, &mode)
            }
        } catch {
            mnl_socket_close(s)
            buffer.deallocate()
            throw error
        }
    }

    deinit {
        mnl_socket_close(socket)
        buffer.deallocate()
    }

    public var fileDescriptor: Int32 { mnl_socket_get_fd(socket) }

    /// A config request for the group, acknowledged (the socket is non-blocking: the kernel answers
    /// a config request before sendto returns, so the acknowledgement is already queued).
    private func configure(_ operation: String, _ fill: (UnsafeMutablePointer<nlmsghdr>) -> Void) throws(NftablesError) {
        let nlh = mnl_nlmsg_put_header(buffer)!
        nlh.pointee.nlmsg_type = UInt16(NFNL_SUBSYS_ULOG) << 8 | UInt16(NFULNL_MSG_CONFIG.rawValue)
        nlh.pointee.nlmsg_flags = UInt16(NLM_F_REQUEST | NLM_F_ACK)
        nlh.pointee.nlmsg_seq = UInt32(group) &+ 1
        let header = mnl_nlmsg_put_extra_header(nlh, MemoryLayout<nfgenmsg>.size)!.assumingMemoryBound(to: nfgenmsg.self)
        header.pointee.nfgen_family = UInt8(AF_UNSPEC)
        header.pointee.version = UInt8(NFNETLINK_V0)
        header.pointee.res_id = group.bigEndian
        fill(nlh)
        if mnl_socket_sendto(socket, nlh, Int(nlh.pointee.nlmsg_len)) < 0 {
            throw NftablesError(operation: operation, errno: .current)
        }
        while true {
            let received = mnl_socket_recvfrom(socket, buffer, bufferSize)
            if received < 0 {
                if Errno.current == .interrupted { continue }
                throw NftablesError(operation: operation, errno: .current)
            }
            var remaining = Int32(received)
            var msg = buffer.assumingMemoryBound(to: nlmsghdr.self)
            while mnl_nlmsg_ok(msg, remaining) {
                if Int32(msg.pointee.nlmsg_type) == NLMSG_ERROR {
                    let err = mnl_nlmsg_get_payload(msg)!.assumingMemoryBound(to: nlmsgerr.self).pointee.error
                    if err == 0 { return }
                    throw NftablesError(operation: operation, errno: Errno(rawValue: -err))
                }
                msg = mnl_nlmsg_next(msg, &remaining)
            }
        }
    }

    /// The payloads (from the network header on) of every packet waiting, without blocking; at most
    /// `limit` of them per call.
    public func receive(limit: Int = 256) -> [[UInt8]] {
        var packets: [[UInt8]] = []
        while packets.count < limit {
            let received = mnl_socket_recvfrom(socket, buffer, bufferSize)
            if received < 0 {
                if Errno.current == .interrupted { continue }
                return packets  // EAGAIN, or ENOBUFS (packets were lost: the next read goes on)
            }
            var remaining = Int32(received)
            var msg = buffer.assumingMemoryBound(to: nlmsghdr.self)
            while mnl_nlmsg_ok(msg, remaining) {
                if msg.pointee.nlmsg_type == UInt16(NFNL_SUBSYS_ULOG) << 8 | UInt16(NFULNL_MSG_PACKET.rawValue) {
                    var payload: [UInt8]?
                    var attr = mnl_nlmsg_get_payload_offset(msg, MemoryLayout<nfgenmsg>.size)!.assumingMemoryBound(to: nlattr.self)
                    let end = UnsafeRawPointer(msg) + Int(msg.pointee.nlmsg_len)
                    while mnl_attr_ok(attr, Int32(end - UnsafeRawPointer(attr))) {
                        if mnl_attr_get_type(attr) == UInt16(NFULA_PAYLOAD.rawValue) {
                            let length = Int(mnl_attr_get_payload_len(attr))
                            payload = Array(UnsafeRawBufferPointer(start: mnl_attr_get_payload(attr), count: length))
                        }
                        attr = mnl_attr_next(attr)
                    }
                    if let payload { packets.append(payload) }
                }
                msg = mnl_nlmsg_next(msg, &remaining)
            }
        }
        return packets
    }
}
