import CMnl
import LinuxSystem
import TunnelgateSettings

/// An rtnetlink socket bound in the network namespace the calling thread was
/// in when it was opened; every request on it acts in that namespace.
///
/// Requests are sent in batches (many messages per sendmsg), each with
/// NLM_F_ACK, and every acknowledgement is read and checked.
public final class NetlinkSocket {
    private let socket: OpaquePointer
    private let portID: UInt32
    private var sequence: UInt32
    /// Outgoing batch buffer. The kernel's send limit is sk_sndbuf (raised
    /// below); batches are flushed before they reach `batchLimit`.
    private let sendBuffer: UnsafeMutableRawPointer
    private let sendCapacity = 1 << 18
    private let batchLimit = 1 << 17
    private let receiveBuffer: UnsafeMutableRawPointer
    private let receiveCapacity = 1 << 18

    /// Changes to links, addresses, rules and routes, for `NetlinkSocket(monitoring:)`.
    public static let linkAddressRuleAndRouteGroups: [UInt32] = [
        UInt32(RTNLGRP_LINK.rawValue), UInt32(RTNLGRP_IPV4_IFADDR.rawValue), UInt32(RTNLGRP_IPV6_IFADDR.rawValue),
        UInt32(RTNLGRP_IPV4_RULE.rawValue), UInt32(RTNLGRP_IPV6_RULE.rawValue),
        UInt32(RTNLGRP_IPV4_ROUTE.rawValue), UInt32(RTNLGRP_IPV6_ROUTE.rawValue),
    ]

    /// A socket for requests; with `monitoring` groups (RTNLGRP_*), one that
    /// also receives the kernel's change notifications for them.
    public init(monitoring groups: [UInt32] = []) throws(SystemCallError) {
        guard let s = mnl_socket_open2(NETLINK_ROUTE, FileDescriptor.socketFlags(nonBlocking: !groups.isEmpty)) else {
            throw SystemCallError("socket(AF_NETLINK, NETLINK_ROUTE)", .current)
        }
        let mask = groups.reduce(UInt32(0)) { $0 | (1 << ($1 - 1)) }
        guard mnl_socket_bind(s, mask, pid_t(MNL_SOCKET_AUTOPID)) == 0 else {
            let e = Errno.current
            mnl_socket_close(s)
            throw SystemCallError("bind(AF_NETLINK)", e)
        }
        do throws(SystemCallError) {
            try Self.setOptions(FileDescriptor(rawValue: mnl_socket_get_fd(s)))
        } catch {
            mnl_socket_close(s)
            throw error
        }
        socket = s
        portID = mnl_socket_get_portid(s)
        sequence = UInt32(truncatingIfNeeded: ProcessControl.wallClock().seconds)
        sendBuffer = .allocate(byteCount: sendCapacity, alignment: 8)
        receiveBuffer = .allocate(byteCount: receiveCapacity, alignment: 8)
    }

    /// The options every request socket needs; each refusal is an error naming the option.
    private static func setOptions(_ fd: FileDescriptor) throws(SystemCallError) {
        // Acks carry only the header of the request, not all of it.
        try fd.enable(.capAcknowledgements)
        // Errors carry the kernel's reason as text.
        try fd.enable(.extendedAcknowledgements)
        // Dump requests are checked strictly and filtered in the kernel (by table, by interface).
        try fd.enable(.strictChecking)
        // 4 MiB each way, past net.core.wmem_max/rmem_max with CAP_NET_ADMIN (SO_SNDBUFFORCE); a
        // process without it (EPERM) gets the most those limits allow, which holds a batch
        // (`batchLimit`) too.
        for buffer in [FileDescriptor.SocketBuffer.send, .receive] {
            do throws(SystemCallError) {
                try fd.setBufferSize(buffer, bytes: 1 << 22, force: true)
            } catch where error.errno == .permissionDenied {
                try fd.setBufferSize(buffer, bytes: 1 << 22, force: false)
            }
        }
    }

    deinit {
        mnl_socket_close(socket)
        sendBuffer.deallocate()
        receiveBuffer.deallocate()
    }

    /// The descriptor, to poll a monitoring socket.
    public var fileDescriptor: Int32 { mnl_socket_get_fd(socket) }

    /// Reads every pending notification of a monitoring socket without
    /// blocking; returns how many messages there were.
    public func drainNotifications() -> Int {
        drainNetlinkNotifications(socket, receiveBuffer, receiveCapacity)
    }

    private func nextSequence() -> UInt32 {
        sequence &+= 1
        return sequence
    }

    // MARK: - Batched requests

    /// Sends `operations` in as few sendmsg calls as fit, in order, and checks
    /// every acknowledgement. Errors whose errno is in `tolerated` (for
    /// example ENOENT when deleting) count as success. All operations are
    /// attempted even when some fail; the failures are thrown together.
    public func execute(_ operations: [NetlinkOperation],
                        tolerating tolerated: Set<Errno> = []) throws(NetlinkBatchError) {
        var failures: [(index: Int, error: NetlinkError)] = []
        var start = 0
        while start < operations.count {
            var batchEnd = start
            var offset = 0
            var firstSequence: UInt32 = 0
            while batchEnd < operations.count, offset < batchLimit {
                let seq = nextSequence()
                if batchEnd == start { firstSequence = seq }
                let nlh = mnl_nlmsg_put_header(sendBuffer + offset)!
                encode(operations[batchEnd], into: nlh, sequence: seq)
                offset += Int(nlh.pointee.nlmsg_len)
                batchEnd += 1
            }
            do {
                _ = try syscall("sendmsg(NETLINK_ROUTE)") { mnl_socket_sendto(socket, sendBuffer, offset) }
            } catch {
                for i in start..<batchEnd {
                    failures.append((i, NetlinkError(operation: operations[i].description, errno: error.errno)))
                }
                start = batchEnd
                continue
            }
            // One ack per message, in order.
            var pending = batchEnd - start
            while pending > 0 {
                let received: Int
                do {
                    received = try syscall("recvmsg(NETLINK_ROUTE)") { mnl_socket_recvfrom(socket, receiveBuffer, receiveCapacity) }
                } catch {
                    for i in (batchEnd - pending)..<batchEnd {
                        failures.append((i, NetlinkError(operation: operations[i].description, errno: error.errno)))
                    }
                    break
                }
                var remaining = Int32(received)
                var nlh = receiveBuffer.assumingMemoryBound(to: nlmsghdr.self)
                while mnl_nlmsg_ok(nlh, remaining) {
                    let h = nlh.pointee
                    if h.nlmsg_type == UInt16(NLMSG_ERROR), h.nlmsg_pid == portID || h.nlmsg_pid == 0 {
                        let index = start + Int(h.nlmsg_seq &- firstSequence)
                        if index >= start, index < batchEnd {
                            pending -= 1
                            let (code, message) = Self.parseError(nlh)
                            if code != 0, !tolerated.contains(Errno(rawValue: -code)) {
                                failures.append((index, NetlinkError(operation: operations[index].description,
                                                                     errno: Errno(rawValue: -code),
                                                                     kernelMessage: message)))
                            }
                        }
                    }
                    nlh = mnl_nlmsg_next(nlh, &remaining)
                }
            }
            start = batchEnd
        }
        if !failures.isEmpty { throw NetlinkBatchError(failures: failures.sorted { $0.index < $1.index }) }
    }

    /// The error code (0 for an ack, -errno for an error) and NLMSGERR_ATTR_MSG.
    private static func parseError(_ nlh: UnsafeMutablePointer<nlmsghdr>) -> (Int32, String?) {
        let payload = mnl_nlmsg_get_payload(nlh)!
        let err = payload.assumingMemoryBound(to: nlmsgerr.self)
        let code = err.pointee.error
        guard nlh.pointee.nlmsg_flags & UInt16(NLM_F_ACK_TLVS) != 0 else { return (code, nil) }
        // TLVs follow the echoed request: its header only when capped.
        var tlvOffset = MemoryLayout<nlmsgerr>.size
        if nlh.pointee.nlmsg_flags & UInt16(NLM_F_CAPPED) == 0 {
            tlvOffset += Int(err.pointee.msg.nlmsg_len) - MemoryLayout<nlmsghdr>.size
        }
        let total = Int(nlh.pointee.nlmsg_len) - MemoryLayout<nlmsghdr>.size
        var message: String?
        forEachAttribute(in: payload + tlvOffset, length: total - tlvOffset) { type, data, length in
            if type == u16(NLMSGERR_ATTR_MSG), length > 0 {
                message = String(cString: data.assumingMemoryBound(to: CChar.self))
            }
        }
        return (code, message)
    }

    // MARK: - Dumps

    /// Sends one dump request and calls `body` with every message of the reply.
    func dump(type: Int32, operation: String,
              header: (UnsafeMutablePointer<nlmsghdr>) -> Void,
              _ body: (UnsafeMutablePointer<nlmsghdr>) -> Void) throws(NetlinkError) {
        try exchange(type: type, flags: NLM_F_REQUEST | NLM_F_DUMP, operation: operation, header: header, body)
    }

    /// Sends one get request for a single object (RTM_GETROUTE with a
    /// destination, RTM_GETLINK with an index) and calls `body` with the
    /// answer. NLM_F_ACK makes the kernel end a successful answer with an
    /// ack, as a dump ends with NLMSG_DONE.
    func get(type: Int32, operation: String,
             header: (UnsafeMutablePointer<nlmsghdr>) -> Void,
             _ body: (UnsafeMutablePointer<nlmsghdr>) -> Void) throws(NetlinkError) {
        try exchange(type: type, flags: NLM_F_REQUEST | NLM_F_ACK, operation: operation, header: header, body)
    }

    private func exchange(type: Int32, flags: Int32, operation: String,
                          header: (UnsafeMutablePointer<nlmsghdr>) -> Void,
                          _ body: (UnsafeMutablePointer<nlmsghdr>) -> Void) throws(NetlinkError) {
        let nlh = mnl_nlmsg_put_header(sendBuffer)!
        nlh.pointee.nlmsg_type = UInt16(type)
        nlh.pointee.nlmsg_flags = UInt16(flags)
        let seq = nextSequence()
        nlh.pointee.nlmsg_seq = seq
        header(nlh)
        do {
            _ = try syscall("sendmsg") { mnl_socket_sendto(socket, sendBuffer, Int(nlh.pointee.nlmsg_len)) }
        } catch {
            throw NetlinkError(operation: operation, errno: error.errno)
        }
        while true {
            let received: Int
            do {
                received = try syscall("recvmsg") { mnl_socket_recvfrom(socket, receiveBuffer, receiveCapacity) }
            } catch {
                throw NetlinkError(operation: operation, errno: error.errno)
            }
            var remaining = Int32(received)
            var msg = receiveBuffer.assumingMemoryBound(to: nlmsghdr.self)
            while mnl_nlmsg_ok(msg, remaining) {
                let h = msg.pointee
                if h.nlmsg_seq == seq {
                    if h.nlmsg_type == UInt16(NLMSG_DONE) { return }
                    if h.nlmsg_type == UInt16(NLMSG_ERROR) {
                        let (code, message) = Self.parseError(msg)
                        if code == 0 { return }
                        throw NetlinkError(operation: operation, errno: Errno(rawValue: -code), kernelMessage: message)
                    }
                    body(msg)
                }
                msg = mnl_nlmsg_next(msg, &remaining)
            }
        }
    }
}

/// Calls `body(type, payload, payloadLength)` for each attribute in a block.
func forEachAttribute(in start: UnsafeMutableRawPointer, length: Int,
                      _ body: (UInt16, UnsafeMutableRawPointer, Int) -> Void) {
    var attr = start.assumingMemoryBound(to: nlattr.self)
    var remaining = Int32(length)
    while remaining >= Int32(MemoryLayout<nlattr>.size), mnl_attr_ok(attr, remaining) {
        body(mnl_attr_get_type(attr), mnl_attr_get_payload(attr)!, Int(mnl_attr_get_payload_len(attr)))
        let step = (Int32(attr.pointee.nla_len) + 3) & ~3
        remaining -= step
        attr = (UnsafeMutableRawPointer(attr) + Int(step)).assumingMemoryBound(to: nlattr.self)
    }
}

/// Reads every pending message of a non-blocking libmnl socket (a
/// monitoring one) and counts them. ENOBUFS — notifications were lost —
/// counts as one: the caller checks everything anyway.
public func drainNetlinkNotifications(_ socket: OpaquePointer, _ buffer: UnsafeMutableRawPointer, _ capacity: Int) -> Int {
    var count = 0
    while true {
        let received = mnl_socket_recvfrom(socket, buffer, capacity)
        if received < 0 {
            let e = Errno.current
            if e == .interrupted { continue }
            return e == .noBufferSpace ? count + 1 : count
        }
        var remaining = Int32(received)
        var nlh = buffer.assumingMemoryBound(to: nlmsghdr.self)
        while mnl_nlmsg_ok(nlh, remaining) {
            count += 1
            nlh = mnl_nlmsg_next(nlh, &remaining)
        }
    }
}
