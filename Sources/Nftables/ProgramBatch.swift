import CMnl
import CNftnl
import LinuxSystem

/// Writes one nf_tables transaction of `NftProgram` objects into a buffer: batch begin, the
/// messages (each with NLM_F_ACK, its operation remembered by sequence number for errors), batch end.
final class ProgramBatch {
    private let buffer: UnsafeMutableRawPointer
    private let capacity: Int
    private var offset = 0
    private let sequence: () -> UInt32
    private var operations: [UInt32: String] = [:]

    init(buffer: UnsafeMutableRawPointer, capacity: Int, sequence: @escaping () -> UInt32) {
        self.buffer = buffer
        self.capacity = capacity
        self.sequence = sequence
        offset += Int(nftnl_batch_begin(cursor, sequence())!.pointee.nlmsg_len)
    }

    private var cursor: UnsafeMutablePointer<CChar> { (buffer + offset).assumingMemoryBound(to: CChar.self) }

    func finish() -> (Int, [UInt32: String]) {
        offset += Int(nftnl_batch_end(cursor, sequence())!.pointee.nlmsg_len)
        return (offset, operations)
    }

    private func message(_ type: nf_tables_msg_types, flags: Int32, _ operation: String,
                         _ build: (UnsafeMutablePointer<nlmsghdr>) -> Void) {
        precondition(offset + 65536 < capacity, "nft transaction larger than its buffer")
        let seq = sequence()
        let nlh = nftnl_nlmsg_build_hdr(cursor, u16(type), UInt16(NFPROTO_INET), UInt16(flags | NLM_F_ACK), seq)!
        build(nlh)
        operations[seq] = operation
        offset += Int(nlh.pointee.nlmsg_len)
    }

    func table(_ name: String, comment: String?, delete: Bool) {
        let t = nftnl_table_alloc()!
        defer { nftnl_table_free(t) }
        nftnl_table_set_u32(t, u16(NFTNL_TABLE_FAMILY), UInt32(NFPROTO_INET))
        nftnl_table_set_str(t, u16(NFTNL_TABLE_NAME), name)
        if let comment { Self.withComment(comment) { nftnl_table_set_data(t, u16(NFTNL_TABLE_USERDATA), $0, $1) } }
        message(delete ? NFT_MSG_DELTABLE : NFT_MSG_NEWTABLE, flags: delete ? 0 : NLM_F_CREATE,
                "nft \(delete ? "delete" : "add") table inet \(name)") { nftnl_table_nlmsg_build_payload($0, t) }
    }

    func set(_ set: NftProgramSet, id: UInt32, table: String) {
        let s = nftnl_set_alloc()!
        defer { nftnl_set_free(s) }
        nftnl_set_set_str(s, u16(NFTNL_SET_TABLE), table)
        nftnl_set_set_str(s, u16(NFTNL_SET_NAME), set.name)
        nftnl_set_set_u32(s, u16(NFTNL_SET_FAMILY), UInt32(NFPROTO_INET))
        nftnl_set_set_u32(s, u16(NFTNL_SET_ID), id)
        nftnl_set_set_u32(s, u16(NFTNL_SET_KEY_LEN), set.keyLength)
        // nft's concatenated type: the field types, 6 bits each, first field highest.
        let type = set.fields.reduce(UInt32(0)) { $0 << 6 | $1.type }
        nftnl_set_set_u32(s, u16(NFTNL_SET_KEY_TYPE), type)
        // A hash set needs no field lengths (NFTA_SET_DESC_CONCAT is for interval sets; the kernel refuses it here).
        // NFT_SET_EVAL: updated from the packet path.
        // NFT_SET_TIMEOUT: elements expire (after NFTA_SET_TIMEOUT, for those that name no timeout of their own).
        nftnl_set_set_u32(s, u16(NFTNL_SET_FLAGS), (set.dynamic ? u32(NFT_SET_EVAL) : 0) | (set.timeoutMilliseconds != nil ? u32(NFT_SET_TIMEOUT) : 0))
        if let timeout = set.timeoutMilliseconds { nftnl_set_set_u64(s, u16(NFTNL_SET_TIMEOUT), timeout) }
        nftnl_set_set_u32(s, u16(NFTNL_SET_DESC_SIZE), set.size)
        if set.counters { nftnl_set_add_expr(s, nftnl_expr_alloc("counter")!) }
        message(NFT_MSG_NEWSET, flags: NLM_F_CREATE, "nft add set inet \(table) \(set.name)") { nftnl_set_nlmsg_build_payload($0, s) }
    }

    func chain(_ chain: NftProgramChain, table: String) {
        let c = nftnl_chain_alloc()!
        defer { nftnl_chain_free(c) }
        nftnl_chain_set_str(c, u16(NFTNL_CHAIN_TABLE), table)
        nftnl_chain_set_str(c, u16(NFTNL_CHAIN_NAME), chain.name)
        nftnl_chain_set_u32(c, u16(NFTNL_CHAIN_HOOKNUM), chain.hook.rawValue)
        nftnl_chain_set_s32(c, u16(NFTNL_CHAIN_PRIO), chain.priority)
        nftnl_chain_set_str(c, u16(NFTNL_CHAIN_TYPE), chain.kind.rawValue)
        nftnl_chain_set_u32(c, u16(NFTNL_CHAIN_POLICY), UInt32(NF_ACCEPT))
        message(NFT_MSG_NEWCHAIN, flags: NLM_F_CREATE, "nft add chain inet \(table) \(chain.name)") { nftnl_chain_nlmsg_build_payload($0, c) }
    }

    func rule(_ rule: NftProgramRule, chain: String, table: String, setIDs: [String: UInt32]) {
        let r = nftnl_rule_alloc()!
        defer { nftnl_rule_free(r) }
        nftnl_rule_set_str(r, u16(NFTNL_RULE_TABLE), table)
        nftnl_rule_set_str(r, u16(NFTNL_RULE_CHAIN), chain)
        nftnl_rule_set_u32(r, u16(NFTNL_RULE_FAMILY), UInt32(NFPROTO_INET))
        for expression in rule.expressions { nftnl_rule_add_expr(r, Self.make(expression, setIDs: setIDs)) }
        Self.withComment(rule.comment) { nftnl_rule_set_data(r, u16(NFTNL_RULE_USERDATA), $0, $1) }
        message(NFT_MSG_NEWRULE, flags: NLM_F_CREATE | NLM_F_APPEND,
                "nft add rule inet \(table) \(chain) … comment \"\(rule.comment)\"") { nftnl_rule_nlmsg_build_payload($0, r) }
    }

    private static func setBytes(_ e: OpaquePointer, _ attribute: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { _ = nftnl_expr_set(e, u16(attribute), $0.baseAddress, UInt32($0.count)) }
    }

    private static func make(_ expression: NftExpression, setIDs: [String: UInt32]) -> OpaquePointer {
        switch expression {
        case .meta(let key, let register):
            let e = nftnl_expr_alloc("meta")!
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_META_KEY), key.rawValue)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_META_DREG), register.rawValue)
            return e
        case .payload(let base, let offset, let length, let register):
            let e = nftnl_expr_alloc("payload")!
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_PAYLOAD_DREG), register.rawValue)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_PAYLOAD_BASE), base.rawValue)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_PAYLOAD_OFFSET), offset)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_PAYLOAD_LEN), length)
            return e
        case .compare(let op, let register, let data):
            let e = nftnl_expr_alloc("cmp")!
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_CMP_SREG), register.rawValue)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_CMP_OP), op.rawValue)
            setBytes(e, Int32(NFTNL_EXPR_CMP_DATA), data)
            return e
        case .hostToNetwork32(let register):
            let e = nftnl_expr_alloc("byteorder")!
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_BYTEORDER_SREG), register.rawValue)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_BYTEORDER_DREG), register.rawValue)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_BYTEORDER_OP), u32(NFT_BYTEORDER_HTON))
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_BYTEORDER_LEN), 4)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_BYTEORDER_SIZE), 4)
            return e
        case .immediate(let register, let data):
            let e = nftnl_expr_alloc("immediate")!
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_IMM_DREG), register.rawValue)
            setBytes(e, Int32(NFTNL_EXPR_IMM_DATA), data)
            return e
        case .random(let modulus, let register):
            let e = nftnl_expr_alloc("numgen")!
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_NG_DREG), register.rawValue)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_NG_MODULUS), modulus)
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_NG_TYPE), u32(NFT_NG_RANDOM))
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_NG_OFFSET), 0)
            return e
        case .lookup(let set, let register, let invert):
            let e = nftnl_expr_alloc("lookup")!
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_LOOKUP_SREG), register.rawValue)
            nftnl_expr_set_str(e, u16(NFTNL_EXPR_LOOKUP_SET), set)
            if let id = setIDs[set] { nftnl_expr_set_u32(e, u16(NFTNL_EXPR_LOOKUP_SET_ID), id) }
            if invert { nftnl_expr_set_u32(e, u16(NFTNL_EXPR_LOOKUP_FLAGS), u32(NFT_LOOKUP_F_INV)) }
            return e
        case .updateSet(let set, let key), .addToSet(let set, let key):
            let e = nftnl_expr_alloc("dynset")!
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_DYNSET_SREG_KEY), key.rawValue)
            var op = NFT_DYNSET_OP_UPDATE
            if case .addToSet = expression { op = NFT_DYNSET_OP_ADD }
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_DYNSET_OP), u32(op))
            nftnl_expr_set_str(e, u16(NFTNL_EXPR_DYNSET_SET_NAME), set)
            if let id = setIDs[set] { nftnl_expr_set_u32(e, u16(NFTNL_EXPR_DYNSET_SET_ID), id) }
            return e
        case .counter:
            return nftnl_expr_alloc("counter")!
        case .accept, .drop:
            let e = nftnl_expr_alloc("immediate")!
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_IMM_DREG), u32(NFT_REG_VERDICT))
            nftnl_expr_set_u32(e, u16(NFTNL_EXPR_IMM_VERDICT), UInt32(bitPattern: expression == .accept ? NF_ACCEPT : NF_DROP))
            return e
        case .masquerade(let flags):
            let e = nftnl_expr_alloc("masq")!
            if flags != 0 { nftnl_expr_set_u32(e, u16(NFTNL_EXPR_MASQ_FLAGS), flags) }
            return e
        }
    }

    private static func withComment(_ comment: String, _ body: (UnsafeRawPointer, UInt32) -> Void) {
        let buf = nftnl_udata_buf_alloc(UInt32(NFTNL_UDATA_COMMENT_MAXLEN) + 8)!
        defer { nftnl_udata_buf_free(buf) }
        _ = nftnl_udata_put_strz(buf, u8(NFTNL_UDATA_RULE_COMMENT), String(comment.utf8.prefix(Int(NFTNL_UDATA_COMMENT_MAXLEN) - 1))!)
        body(nftnl_udata_buf_data(buf), nftnl_udata_buf_len(buf))
    }
}
