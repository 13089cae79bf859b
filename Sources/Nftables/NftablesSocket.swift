import CMnl
import CNftnl
import LinuxSystem
import Netlink
import TunnelgateSettings

/// A netfilter netlink socket bound in the calling thread's namespace.
/// Changes go as one nf_tables transaction (batch begin … end): the kernel
/// applies all of it or none of it.
public final class NftablesSocket {
    private let socket: OpaquePointer
    private let portID: UInt32
    private var sequence: UInt32
    private let bufferSize = 1 << 20
    private let buffer: UnsafeMutableRawPointer
    private let receiveBuffer: UnsafeMutableRawPointer

    /// A socket for requests; with `monitoring`, one that receives every
    /// nf_tables change notification (NFNLGRP_NFTABLES) instead.
    public init(monitoring: Bool = false) throws(SystemCallError) {
        guard let s = mnl_socket_open2(NETLINK_NETFILTER, FileDescriptor.socketFlags(nonBlocking: monitoring)) else {
            throw SystemCallError("socket(AF_NETLINK, NETLINK_NETFILTER)", .current)
        }
        let groups: UInt32 = monitoring ? 1 << (UInt32(NFNLGRP_NFTABLES.rawValue) - 1) : 0
        guard mnl_socket_bind(s, groups, pid_t(MNL_SOCKET_AUTOPID)) == 0 else {
            let e = Errno.current
            mnl_socket_close(s)
            throw SystemCallError("bind(NETLINK_NETFILTER)", e)
        }
        // Errors carry the kernel's reason as text.
        do throws(SystemCallError) {
            try FileDescriptor(rawValue: mnl_socket_get_fd(s)).enable(.extendedAcknowledgements)
        } catch {
            mnl_socket_close(s)
            throw error
        }
        socket = s
        portID = mnl_socket_get_portid(s)
        sequence = UInt32(truncatingIfNeeded: ProcessControl.wallClock().seconds) &* 7
        buffer = .allocate(byteCount: bufferSize, alignment: 8)
        receiveBuffer = .allocate(byteCount: bufferSize, alignment: 8)
    }

    deinit {
        mnl_socket_close(socket)
        buffer.deallocate()
        receiveBuffer.deallocate()
    }

    public var fileDescriptor: Int32 { mnl_socket_get_fd(socket) }

    /// Reads every pending notification without blocking; returns how many.
    public func drainNotifications() -> Int {
        drainNetlinkNotifications(socket, receiveBuffer, bufferSize)
    }

    private func nextSequence() -> UInt32 {
        sequence &+= 1
        return sequence
    }

    // MARK: - Transactions

    /// Replaces the table `table.name` with `table` in one transaction:
    /// `add table` (so the delete cannot fail), `delete table`, then the table,
    /// its sets with their elements, its chains and their rules.
    public func replace(_ table: NftTable) throws(NftablesError) {
        let writer = TransactionWriter(buffer: buffer, capacity: bufferSize, sequence: nextSequence)
        writer.addTable(table.name, comment: nil)
        writer.deleteTable(table.name)
        writer.add(table)
        try run(writer)
    }

    /// Deletes the table; a table that does not exist is not an error.
    public func delete(table name: String) throws(NftablesError) {
        let writer = TransactionWriter(buffer: buffer, capacity: bufferSize, sequence: nextSequence)
        writer.deleteTable(name)
        do {
            try run(writer)
        } catch where error.errno == .noSuchEntry {
            return
        }
    }

    /// Replaces the elements of a set in one transaction (carrier endpoints roaming).
    public func replaceElements(of set: NftSet, in table: String) throws(NftablesError) {
        let writer = TransactionWriter(buffer: buffer, capacity: bufferSize, sequence: nextSequence)
        writer.flushSet(set, table: table)
        writer.addElements(set, table: table)
        try run(writer)
    }

    private func run(_ writer: TransactionWriter) throws(NftablesError) {
        let (length, operations) = writer.finish()
        do {
            _ = try syscall("sendmsg(NETLINK_NETFILTER)") { mnl_socket_sendto(socket, buffer, length) }
        } catch {
            throw NftablesError(operation: "nft transaction", errno: error.errno)
        }
        // Every message asked for an ack; a refused transaction answers with
        // the error of the message that failed. Wait for all of them, or for
        // the socket to fall silent after an error.
        var pending = Set(operations.keys)
        var firstError: NftablesError?
        let fd = FileDescriptor(rawValue: mnl_socket_get_fd(socket))
        while !pending.isEmpty {
            let ready: Bool
            do {
                ready = try Poll.readable(fd, timeoutMilliseconds: firstError == nil ? 5000 : 100)
            } catch {
                throw NftablesError(operation: "nft transaction (poll)", errno: error.errno)
            }
            if !ready { break }
            let received = mnl_socket_recvfrom(socket, receiveBuffer, bufferSize)
            if received < 0 {
                if Errno.current == .interrupted { continue }
                throw NftablesError(operation: "nft transaction (recvmsg)", errno: .current)
            }
            var remaining = Int32(received)
            var nlh = receiveBuffer.assumingMemoryBound(to: nlmsghdr.self)
            while mnl_nlmsg_ok(nlh, remaining) {
                if nlh.pointee.nlmsg_type == UInt16(NLMSG_ERROR) {
                    let seq = nlh.pointee.nlmsg_seq
                    pending.remove(seq)
                    let err = mnl_nlmsg_get_payload(nlh)!.assumingMemoryBound(to: nlmsgerr.self)
                    if err.pointee.error != 0, firstError == nil {
                        firstError = NftablesError(operation: operations[seq] ?? "nft transaction",
                                                   errno: Errno(rawValue: -err.pointee.error),
                                                   kernelMessage: extendedAckMessage(nlh))
                    }
                }
                nlh = mnl_nlmsg_next(nlh, &remaining)
            }
        }
        if let firstError { throw firstError }
        if !pending.isEmpty {
            throw NftablesError(operation: "nft transaction: \(pending.count) requests unanswered", errno: .timedOut)
        }
    }

    private func extendedAckMessage(_ nlh: UnsafeMutablePointer<nlmsghdr>) -> String? {
        guard nlh.pointee.nlmsg_flags & UInt16(NLM_F_ACK_TLVS) != 0 else { return nil }
        let payload = mnl_nlmsg_get_payload(nlh)!
        let err = payload.assumingMemoryBound(to: nlmsgerr.self)
        var offset = MemoryLayout<nlmsgerr>.size
        if nlh.pointee.nlmsg_flags & UInt16(NLM_F_CAPPED) == 0 {
            offset += Int(err.pointee.msg.nlmsg_len) - MemoryLayout<nlmsghdr>.size
        }
        let total = Int(nlh.pointee.nlmsg_len) - MemoryLayout<nlmsghdr>.size
        var attr = (payload + offset).assumingMemoryBound(to: nlattr.self)
        var left = Int32(total - offset)
        while left >= 4, mnl_attr_ok(attr, left) {
            if mnl_attr_get_type(attr) == u16(NLMSGERR_ATTR_MSG) {
                return String(cString: mnl_attr_get_str(attr))
            }
            let step = (Int32(attr.pointee.nla_len) + 3) & ~3
            left -= step
            attr = (UnsafeMutableRawPointer(attr) + Int(step)).assumingMemoryBound(to: nlattr.self)
        }
        return nil
    }

    // MARK: - Reading back

    public struct TableInfo: Sendable, Hashable {
        public var name: String
        public var comment: String?
    }

    public struct RuleInfo: Sendable, Hashable {
        public var chain: String
        public var comment: String?
        public var handle: UInt64
    }

    /// Every `inet` table. Equivalent to: `nft list tables inet`.
    public func tables() throws(NftablesError) -> [TableInfo] {
        var out: [TableInfo] = []
        try dump(type: u16(NFT_MSG_GETTABLE), operation: "nft list tables inet", prepare: { _ in }) { nlh in
            guard let t = nftnl_table_alloc() else { return }
            defer { nftnl_table_free(t) }
            guard nftnl_table_nlmsg_parse(nlh, t) >= 0 else { return }
            let name = String(cString: nftnl_table_get_str(t, u16(NFTNL_TABLE_NAME)))
            var comment: String?
            var length: UInt32 = 0
            if nftnl_table_is_set(t, u16(NFTNL_TABLE_USERDATA)),
               let data = nftnl_table_get_data(t, u16(NFTNL_TABLE_USERDATA), &length) {
                comment = userdataComment(data, length)
            }
            out.append(TableInfo(name: name, comment: comment))
        }
        return out
    }

    /// The rules of one table. Equivalent to: `nft -a list table inet NAME`.
    public func rules(table name: String) throws(NftablesError) -> [RuleInfo] {
        var out: [RuleInfo] = []
        try dump(type: u16(NFT_MSG_GETRULE), operation: "nft list table inet \(name)", prepare: { nlh in
            guard let r = nftnl_rule_alloc() else { return }
            defer { nftnl_rule_free(r) }
            nftnl_rule_set_str(r, u16(NFTNL_RULE_TABLE), name)
            nftnl_rule_nlmsg_build_payload(nlh, r)
        }) { nlh in
            guard let r = nftnl_rule_alloc() else { return }
            defer { nftnl_rule_free(r) }
            guard nftnl_rule_nlmsg_parse(nlh, r) >= 0 else { return }
            guard String(cString: nftnl_rule_get_str(r, u16(NFTNL_RULE_TABLE))) == name else { return }
            var comment: String?
            var length: UInt32 = 0
            if nftnl_rule_is_set(r, u16(NFTNL_RULE_USERDATA)),
               let data = nftnl_rule_get_data(r, u16(NFTNL_RULE_USERDATA), &length) {
                comment = userdataComment(data, length)
            }
            out.append(RuleInfo(chain: String(cString: nftnl_rule_get_str(r, u16(NFTNL_RULE_CHAIN))),
                                comment: comment, handle: nftnl_rule_get_u64(r, u16(NFTNL_RULE_HANDLE))))
        }
        return out
    }

    /// Sends one request and hands every answer to `body` until the dump is done (or, for a request
    /// that is not a dump, until its acknowledgement: pass `flags: NLM_F_ACK`).
    func dump(type: UInt16, family: UInt16 = UInt16(NFPROTO_INET), flags: UInt16 = UInt16(NLM_F_DUMP),
              operation: String, prepare: (UnsafeMutablePointer<nlmsghdr>) -> Void,
              _ body: (UnsafeMutablePointer<nlmsghdr>) -> Void) throws(NftablesError) {
        try netfilterExchange(socket: socket, buffer: buffer, receiveBuffer: receiveBuffer, bufferSize: bufferSize,
                              sequence: nextSequence(), type: type, family: family, flags: flags,
                              operation: operation, prepare: prepare, body)
    }
}

/// The comment in nft's user data format (TLV type 0, a NUL-terminated string).
func userdataComment(_ data: UnsafeRawPointer, _ length: UInt32) -> String? {
    var offset = 0
    let bytes = data.assumingMemoryBound(to: UInt8.self)
    while offset + 2 <= Int(length) {
        let type = bytes[offset], len = Int(bytes[offset + 1])
        guard offset + 2 + len <= Int(length) else { return nil }
        if type == 0 {
            let text = UnsafeBufferPointer(start: bytes + offset + 2, count: len).prefix { $0 != 0 }
            return String(decoding: text, as: UTF8.self)
        }
        offset += 2 + len
    }
    return nil
}
