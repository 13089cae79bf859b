import LinuxSystem
import CMnl
import CNftnl
import TunnelgateSettings

/// Writes one nf_tables transaction into a buffer: batch begin, the
/// messages (each with NLM_F_ACK, its operation remembered by sequence
/// number for error messages), batch end.
final class TransactionWriter {
    private let buffer: UnsafeMutableRawPointer
    private let capacity: Int
    private var offset = 0
    private let sequence: () -> UInt32
    private var operations: [UInt32: String] = [:]
    private var nextSetID: UInt32 = 1
    private var setIDs: [String: UInt32] = [:]

    init(buffer: UnsafeMutableRawPointer, capacity: Int, sequence: @escaping () -> UInt32) {
        self.buffer = buffer
        self.capacity = capacity
        self.sequence = sequence
        let nlh = nftnl_batch_begin(cursor, sequence())!
        offset += Int(nlh.pointee.nlmsg_len)
    }

    private var cursor: UnsafeMutablePointer<CChar> { (buffer + offset).assumingMemoryBound(to: CChar.self) }

    func finish() -> (Int, [UInt32: String]) {
        let nlh = nftnl_batch_end(cursor, sequence())!
        offset += Int(nlh.pointee.nlmsg_len)
        return (offset, operations)
    }

    private func message(_ type: nf_tables_msg_types, flags: Int32, _ operation: String,
                         _ build: (UnsafeMutablePointer<nlmsghdr>) -> Void) {
        precondition(offset + 65536 < capacity, "nft transaction larger than its buffer")
        let seq = sequence()
        let nlh = nftnl_nlmsg_build_hdr(cursor, u16(type), UInt16(NFPROTO_INET),
                                        UInt16(flags | NLM_F_ACK), seq)!
        build(nlh)
        operations[seq] = operation
        offset += Int(nlh.pointee.nlmsg_len)
    }

    // MARK: Tables

    func addTable(_ name: String, comment: String?) {
        let t = nftnl_table_alloc()!
        defer { nftnl_table_free(t) }
        nftnl_table_set_u32(t, u16(NFTNL_TABLE_FAMILY), UInt32(NFPROTO_INET))
        nftnl_table_set_str(t, u16(NFTNL_TABLE_NAME), name)
        if let comment { withComment(comment) { nftnl_table_set_data(t, u16(NFTNL_TABLE_USERDATA), $0, $1) } }
        message(NFT_MSG_NEWTABLE, flags: NLM_F_CREATE, "nft add table inet \(name)") { nftnl_table_nlmsg_build_payload($0, t) }
    }

    func deleteTable(_ name: String) {
        let t = nftnl_table_alloc()!
        defer { nftnl_table_free(t) }
        nftnl_table_set_u32(t, u16(NFTNL_TABLE_FAMILY), UInt32(NFPROTO_INET))
        nftnl_table_set_str(t, u16(NFTNL_TABLE_NAME), name)
        message(NFT_MSG_DELTABLE, flags: 0, "nft delete table inet \(name)") { nftnl_table_nlmsg_build_payload($0, t) }
    }

    func add(_ table: NftTable) {
        addTable(table.name, comment: table.comment)
        for set in table.sets {
            addSet(set, table: table.name)
            addElements(set, table: table.name)
        }
        for chain in table.chains {
            addChain(chain, table: table.name)
            for rule in chain.rules { addRule(rule, chain: chain.name, table: table.name) }
        }
    }

    // MARK: Sets

    private func makeSet(_ set: NftSet, table: String) -> OpaquePointer {
        let s = nftnl_set_alloc()!
        nftnl_set_set_str(s, u16(NFTNL_SET_TABLE), table)
        nftnl_set_set_str(s, u16(NFTNL_SET_NAME), set.name)
        nftnl_set_set_u32(s, u16(NFTNL_SET_FAMILY), UInt32(NFPROTO_INET))
        nftnl_set_set_u32(s, u16(NFTNL_SET_KEY_LEN), set.family == .ipv4 ? 4 : 16)
        // nft's data types: 7 ipv4_addr, 8 ipv6_addr.
        nftnl_set_set_u32(s, u16(NFTNL_SET_KEY_TYPE), set.family == .ipv4 ? 7 : 8)
        if let id = setIDs[set.name] { nftnl_set_set_u32(s, u16(NFTNL_SET_ID), id) }
        return s
    }

    func addSet(_ set: NftSet, table: String) {
        setIDs[set.name] = nextSetID
        nextSetID += 1
        let s = makeSet(set, table: table)
        defer { nftnl_set_free(s) }
        message(NFT_MSG_NEWSET, flags: NLM_F_CREATE, "nft add set inet \(table) \(set.name)") { nftnl_set_nlmsg_build_payload($0, s) }
    }

    func addElements(_ set: NftSet, table: String) {
        guard !set.elements.isEmpty else { return }
        let s = makeSet(set, table: table)
        defer { nftnl_set_free(s) }
        for address in set.elements where address.family == set.family {
            let e = nftnl_set_elem_alloc()!
            address.bytes.withUnsafeBytes { _ = nftnl_set_elem_set(e, u16(NFTNL_SET_ELEM_KEY), $0.baseAddress, UInt32($0.count)) }
            nftnl_set_elem_add(s, e)
        }
        let list = set.elements.map(\.description).joined(separator: ", ")
        message(NFT_MSG_NEWSETELEM, flags: NLM_F_CREATE, "nft add element inet \(table) \(set.name) { \(list) }") {
            nftnl_set_elems_nlmsg_build_payload($0, s)
        }
    }

    func flushSet(_ set: NftSet, table: String) {
        let s = makeSet(set, table: table)
        defer { nftnl_set_free(s) }
        message(NFT_MSG_DELSETELEM, flags: 0, "nft flush set inet \(table) \(set.name)") { nftnl_set_elems_nlmsg_build_payload($0, s) }
    }

    // MARK: Chains and rules

    func addChain(_ chain: NftChain, table: String) {
        let c = nftnl_chain_alloc()!
        defer { nftnl_chain_free(c) }
        nftnl_chain_set_str(c, u16(NFTNL_CHAIN_TABLE), table)
        nftnl_chain_set_str(c, u16(NFTNL_CHAIN_NAME), chain.name)
        nftnl_chain_set_u32(c, u16(NFTNL_CHAIN_HOOKNUM), chain.hook.rawValue)
        nftnl_chain_set_s32(c, u16(NFTNL_CHAIN_PRIO), chain.priority)
        nftnl_chain_set_str(c, u16(NFTNL_CHAIN_TYPE), chain.kind.rawValue)
        nftnl_chain_set_u32(c, u16(NFTNL_CHAIN_POLICY), chain.policy == .drop ? UInt32(NF_DROP) : UInt32(NF_ACCEPT))
        message(NFT_MSG_NEWCHAIN, flags: NLM_F_CREATE, "nft add chain inet \(table) \(chain.name)") { nftnl_chain_nlmsg_build_payload($0, c) }
    }

    func addRule(_ rule: NftRule, chain: String, table: String) {
        let r = nftnl_rule_alloc()!
        defer { nftnl_rule_free(r) }
        nftnl_rule_set_str(r, u16(NFTNL_RULE_TABLE), table)
        nftnl_rule_set_str(r, u16(NFTNL_RULE_CHAIN), chain)
        nftnl_rule_set_u32(r, u16(NFTNL_RULE_FAMILY), UInt32(NFPROTO_INET))
        ExpressionCompiler(rule: r, setIDs: setIDs).compile(rule)
        withComment(rule.comment) { nftnl_rule_set_data(r, u16(NFTNL_RULE_USERDATA), $0, $1) }
        message(NFT_MSG_NEWRULE, flags: NLM_F_CREATE | NLM_F_APPEND, "nft add rule inet \(table) \(chain) … comment \"\(rule.comment)\"") {
            nftnl_rule_nlmsg_build_payload($0, r)
        }
    }

    private func withComment(_ comment: String, _ body: (UnsafeRawPointer, UInt32) -> Void) {
        let buf = nftnl_udata_buf_alloc(UInt32(NFTNL_UDATA_COMMENT_MAXLEN) + 8)!
        defer { nftnl_udata_buf_free(buf) }
        _ = nftnl_udata_put_strz(buf, u8(NFTNL_UDATA_RULE_COMMENT), String(comment.utf8.prefix(Int(NFTNL_UDATA_COMMENT_MAXLEN) - 1))!)
        body(nftnl_udata_buf_data(buf), nftnl_udata_buf_len(buf))
    }
}

/// Turns matches into nf_tables expressions on register 1.
struct ExpressionCompiler {
    let rule: OpaquePointer
    let setIDs: [String: UInt32]
    private let register = u32(NFT_REG_1)

    init(rule: OpaquePointer, setIDs: [String: UInt32]) {
        self.rule = rule
        self.setIDs = setIDs
    }

    func compile(_ r: NftRule) {
        for m in r.matches { compile(m) }
        if r.counter { add("counter") { _ in } }
        for statement in r.statements { compile(statement) }
        switch r.verdict {
        case .accept: verdict(NF_ACCEPT)
        case .drop: verdict(NF_DROP)
        case .masquerade: add("masq") { _ in }
        case .next: break
        }
    }

    private func compile(_ statement: NftStatement) {
        switch statement {
        case .setTCPMaximumSegmentSize(let size):
            add("immediate") { e in
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_IMM_DREG), register)
                [UInt8(size >> 8), UInt8(size & 0xff)].withUnsafeBytes {
                    _ = nftnl_expr_set(e, u16(NFTNL_EXPR_IMM_DATA), $0.baseAddress, UInt32($0.count))
                }
            }
            tcpMaximumSegmentSizeOption { e in nftnl_expr_set_u32(e, u16(NFTNL_EXPR_EXTHDR_SREG), register) }
        case .setConntrackMark(let mark):
            add("immediate") { e in
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_IMM_DREG), register)
                withUnsafeBytes(of: mark) { _ = nftnl_expr_set(e, u16(NFTNL_EXPR_IMM_DATA), $0.baseAddress, UInt32($0.count)) }
            }
            add("ct") { e in
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_CT_KEY), u32(NFT_CT_MARK))
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_CT_SREG), register)
            }
        case .log(let group, let snaplen):
            add("log") { e in
                nftnl_expr_set_u16(e, u16(NFTNL_EXPR_LOG_GROUP), group)
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_LOG_SNAPLEN), snaplen)
            }
        case .restoreMarkFromConntrack:
            add("ct") { e in
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_CT_KEY), u32(NFT_CT_MARK))
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_CT_DREG), register)
            }
            add("meta") { e in
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_META_KEY), u32(NFT_META_MARK))
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_META_SREG), register)
            }
        }
    }

    /// `exthdr` on TCP option 2 (maximum segment size), its 2-byte value at offset 2.
    private func tcpMaximumSegmentSizeOption(_ configure: (OpaquePointer) -> Void) {
        add("exthdr") { e in
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_EXTHDR_OP), u32(NFT_EXTHDR_OP_TCPOPT))
            nftnl_expr_set_u8(e, u16(NFTNL_EXPR_EXTHDR_TYPE), 2)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_EXTHDR_OFFSET), 2)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_EXTHDR_LEN), 2)
            configure(e)
        }
    }

    private func add(_ name: String, _ configure: (OpaquePointer) -> Void) {
        let e = nftnl_expr_alloc(name)!
        configure(e)
        nftnl_rule_add_expr(rule, e)
    }

    private func verdict(_ v: Int32) {
        add("immediate") { e in
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_IMM_DREG), u32(NFT_REG_VERDICT))
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_IMM_VERDICT), UInt32(bitPattern: v))
        }
    }

    private func meta(_ key: nft_meta_keys) {
        add("meta") { e in
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_META_KEY), u32(key))
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_META_DREG), register)
        }
    }

    private func payload(_ base: nft_payload_bases, offset: UInt32, length: UInt32) {
        add("payload") { e in
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_PAYLOAD_DREG), register)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_PAYLOAD_BASE), u32(base))
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_PAYLOAD_OFFSET), offset)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_PAYLOAD_LEN), length)
        }
    }

    private func compare(_ op: nft_cmp_ops, _ bytes: [UInt8]) {
        add("cmp") { e in
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_CMP_SREG), register)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_CMP_OP), u32(op))
            bytes.withUnsafeBytes { _ = nftnl_expr_set(e, u16(NFTNL_EXPR_CMP_DATA), $0.baseAddress, UInt32($0.count)) }
        }
    }

    private func bitwiseAnd(_ mask: [UInt8]) {
        add("bitwise") { e in
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_BITWISE_SREG), register)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_BITWISE_DREG), register)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_BITWISE_LEN), UInt32(mask.count))
            mask.withUnsafeBytes { _ = nftnl_expr_set(e, u16(NFTNL_EXPR_BITWISE_MASK), $0.baseAddress, UInt32($0.count)) }
            let zero = [UInt8](repeating: 0, count: mask.count)
            zero.withUnsafeBytes { _ = nftnl_expr_set(e, u16(NFTNL_EXPR_BITWISE_XOR), $0.baseAddress, UInt32($0.count)) }
        }
    }

    private func family(_ f: IPFamily) {
        meta(NFT_META_NFPROTO)
        compare(NFT_CMP_EQ, [f == .ipv4 ? UInt8(NFPROTO_IPV4) : UInt8(NFPROTO_IPV6)])
    }

    private func address(_ f: IPFamily, destination: Bool) {
        switch f {
        case .ipv4: payload(NFT_PAYLOAD_NETWORK_HEADER, offset: destination ? 16 : 12, length: 4)
        case .ipv6: payload(NFT_PAYLOAD_NETWORK_HEADER, offset: destination ? 24 : 8, length: 16)
        }
    }

    private func prefix(_ p: IPPrefix, destination: Bool) {
        family(p.family)
        guard p.length > 0 else { return }
        address(p.family, destination: destination)
        if !p.isHost {
            let mask = IPPrefix.mask(p.family == .ipv4 ? .v4(IPv4Address(.max)) : .v6(IPv6Address(high: .max, low: .max)), p.length)
            bitwiseAnd(mask.bytes)
        }
        compare(NFT_CMP_EQ, p.network.address.bytes)
    }

    private func interfaceName(_ name: String) -> [UInt8] {
        var bytes = Array(name.utf8.prefix(15))
        bytes.append(0)
        return bytes
    }

    private func compile(_ m: NftMatch) {
        switch m {
        case .outputInterface(let name):
            meta(NFT_META_OIFNAME)
            compare(NFT_CMP_EQ, interfaceName(name))
        case .inputInterface(let name):
            meta(NFT_META_IIFNAME)
            compare(NFT_CMP_EQ, interfaceName(name))
        case .family(let f):
            family(f)
        case .destination(let p):
            prefix(p, destination: true)
        case .source(let p):
            prefix(p, destination: false)
        case .destinationInSet(let set, let f), .sourceInSet(let set, let f):
            var destination = true
            if case .sourceInSet = m { destination = false }
            family(f)
            address(f, destination: destination)
            add("lookup") { e in
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_LOOKUP_SREG), register)
                nftnl_expr_set_str(e, u16(NFTNL_EXPR_LOOKUP_SET), set)
                if let id = setIDs[set] { nftnl_expr_set_u32(e, u16(NFTNL_EXPR_LOOKUP_SET_ID), id) }
            }
        case .transport(let proto, let port):
            meta(NFT_META_L4PROTO)
            compare(NFT_CMP_EQ, [proto])
            if let port {
                payload(NFT_PAYLOAD_TRANSPORT_HEADER, offset: 2, length: 2)
                compare(NFT_CMP_EQ, [UInt8(port >> 8), UInt8(port & 0xff)])
            }
        case .icmpv6Type(let type):
            meta(NFT_META_L4PROTO)
            compare(NFT_CMP_EQ, [58])
            payload(NFT_PAYLOAD_TRANSPORT_HEADER, offset: 0, length: 1)
            compare(NFT_CMP_EQ, [type])
        case .establishedOrRelated:
            add("ct") { e in
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_CT_KEY), u32(NFT_CT_STATE))
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_CT_DREG), register)
            }
            // NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED), in host order.
            let bits = UInt32(2 | 4)
            bitwiseAnd(withUnsafeBytes(of: bits) { Array($0) })
            compare(NFT_CMP_NEQ, [0, 0, 0, 0])
        case .mark(let mark):
            meta(NFT_META_MARK)
            compare(NFT_CMP_EQ, withUnsafeBytes(of: mark) { Array($0) })
        case .socketUser(let uid):
            meta(NFT_META_SKUID)
            compare(NFT_CMP_EQ, withUnsafeBytes(of: uid) { Array($0) })
        case .conntrackMark(let mark):
            add("ct") { e in
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_CT_KEY), u32(NFT_CT_MARK))
                nftnl_expr_set_u32(e, u16(NFTNL_EXPR_CT_DREG), register)
            }
            compare(NFT_CMP_EQ, withUnsafeBytes(of: mark) { Array($0) })
        case .transportSource(let proto, let port):
            meta(NFT_META_L4PROTO)
            compare(NFT_CMP_EQ, [proto])
            payload(NFT_PAYLOAD_TRANSPORT_HEADER, offset: 0, length: 2)
            compare(NFT_CMP_EQ, [UInt8(port >> 8), UInt8(port & 0xff)])
        case .tcpSYN:
            meta(NFT_META_L4PROTO)
            compare(NFT_CMP_EQ, [6])
            payload(NFT_PAYLOAD_TRANSPORT_HEADER, offset: 13, length: 1)
            bitwiseAnd([0x02])
            compare(NFT_CMP_NEQ, [0])
        case .tcpMaximumSegmentSizeAbove(let size):
            tcpMaximumSegmentSizeOption { e in nftnl_expr_set_u32(e, u16(NFTNL_EXPR_EXTHDR_DREG), register) }
            compare(NFT_CMP_GT, [UInt8(size >> 8), UInt8(size & 0xff)])
        }
    }
}
