import CMnl
import CNftnl
import LinuxSystem

/// Builds the contents of one table from nf_tables messages — NEWTABLE,
/// NEWCHAIN, NEWRULE, NEWSET, NEWSETELEM — as a dump answers them or as a
/// transaction sends them, each parsed by libnftnl. Messages of other
/// tables are skipped.
struct ContentsParser {
    let table: String
    private(set) var contents: NftTableContents
    private(set) var tableSeen = false

    init(table: String) {
        self.table = table
        contents = NftTableContents(name: table)
    }

    /// The contents, every set's elements in byte order and each once.
    func finish() -> NftTableContents {
        var c = contents
        for i in c.sets.indices {
            c.sets[i].elements = Array(Set(c.sets[i].elements)).sorted { $0.lexicographicallyPrecedes($1) }
        }
        return c
    }

    /// Takes one message; any other message type is ignored.
    mutating func take(_ nlh: UnsafeMutablePointer<nlmsghdr>) {
        // nfnetlink: the subsystem in the high byte, the message in the low one.
        switch UInt32(nlh.pointee.nlmsg_type & 0xff) {
        case NFT_MSG_NEWTABLE.rawValue: takeTable(nlh)
        case NFT_MSG_NEWCHAIN.rawValue: takeChain(nlh)
        case NFT_MSG_NEWRULE.rawValue: takeRule(nlh)
        case NFT_MSG_NEWSET.rawValue: takeSet(nlh)
        case NFT_MSG_NEWSETELEM.rawValue: takeElements(nlh)
        default: break
        }
    }

    /// Takes every message of a buffer of nf_tables messages (a transaction's batch included).
    mutating func take(messages bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count >= MemoryLayout<nlmsghdr>.size else { return }
        var remaining = Int32(bytes.count)
        var nlh = UnsafeMutableRawPointer(mutating: base).assumingMemoryBound(to: nlmsghdr.self)
        while mnl_nlmsg_ok(nlh, remaining) {
            take(nlh)
            nlh = mnl_nlmsg_next(nlh, &remaining)
        }
    }

    /// The name in the first NEWTABLE message of a buffer of messages.
    static func firstTableName(_ bytes: [UInt8]) -> String? {
        bytes.withUnsafeBytes { raw -> String? in
            guard let base = raw.baseAddress, raw.count >= MemoryLayout<nlmsghdr>.size else { return nil }
            var remaining = Int32(raw.count)
            var nlh = UnsafeMutableRawPointer(mutating: base).assumingMemoryBound(to: nlmsghdr.self)
            while mnl_nlmsg_ok(nlh, remaining) {
                if UInt32(nlh.pointee.nlmsg_type & 0xff) == NFT_MSG_NEWTABLE.rawValue, let t = nftnl_table_alloc() {
                    defer { nftnl_table_free(t) }
                    if nftnl_table_nlmsg_parse(nlh, t) >= 0, let name = nftnl_table_get_str(t, u16(NFTNL_TABLE_NAME)) {
                        return String(cString: name)
                    }
                }
                nlh = mnl_nlmsg_next(nlh, &remaining)
            }
            return nil
        }
    }

    private mutating func takeTable(_ nlh: UnsafeMutablePointer<nlmsghdr>) {
        guard let t = nftnl_table_alloc() else { return }
        defer { nftnl_table_free(t) }
        guard nftnl_table_nlmsg_parse(nlh, t) >= 0, let name = nftnl_table_get_str(t, u16(NFTNL_TABLE_NAME)),
              String(cString: name) == table else { return }
        tableSeen = true
        contents.flags = nftnl_table_is_set(t, u16(NFTNL_TABLE_FLAGS)) ? nftnl_table_get_u32(t, u16(NFTNL_TABLE_FLAGS)) : 0
        var length: UInt32 = 0
        if nftnl_table_is_set(t, u16(NFTNL_TABLE_USERDATA)), let data = nftnl_table_get_data(t, u16(NFTNL_TABLE_USERDATA), &length) {
            contents.comment = userdataComment(data, length)
        } else {
            contents.comment = nil
        }
    }

    private mutating func chainIndex(_ name: String) -> Int {
        if let i = contents.chains.firstIndex(where: { $0.name == name }) { return i }
        contents.chains.append(NftChainContents(name: name, hook: nil, priority: nil, type: nil, policy: nil))
        return contents.chains.count - 1
    }

    private mutating func takeChain(_ nlh: UnsafeMutablePointer<nlmsghdr>) {
        guard let c = nftnl_chain_alloc() else { return }
        defer { nftnl_chain_free(c) }
        guard nftnl_chain_nlmsg_parse(nlh, c) >= 0, let t = nftnl_chain_get_str(c, u16(NFTNL_CHAIN_TABLE)),
              String(cString: t) == table, let n = nftnl_chain_get_str(c, u16(NFTNL_CHAIN_NAME)) else { return }
        let i = chainIndex(String(cString: n))
        func u32(_ attr: Int) -> UInt32? { nftnl_chain_is_set(c, u16(attr)) ? nftnl_chain_get_u32(c, u16(attr)) : nil }
        contents.chains[i].hook = u32(Int(NFTNL_CHAIN_HOOKNUM.rawValue))
        contents.chains[i].priority = nftnl_chain_is_set(c, u16(NFTNL_CHAIN_PRIO)) ? nftnl_chain_get_s32(c, u16(NFTNL_CHAIN_PRIO)) : nil
        contents.chains[i].policy = u32(Int(NFTNL_CHAIN_POLICY.rawValue))
        contents.chains[i].type = nftnl_chain_is_set(c, u16(NFTNL_CHAIN_TYPE))
            ? nftnl_chain_get_str(c, u16(NFTNL_CHAIN_TYPE)).map { String(cString: $0) } : nil
        contents.chains[i].flags = (u32(Int(NFTNL_CHAIN_FLAGS.rawValue)) ?? 0) & ~UInt32(NFT_CHAIN_BASE.rawValue)
        var devices: [String] = []
        if nftnl_chain_is_set(c, u16(NFTNL_CHAIN_DEV)), let d = nftnl_chain_get_str(c, u16(NFTNL_CHAIN_DEV)) {
            devices.append(String(cString: d))
        }
        var length: UInt32 = 0
        if nftnl_chain_is_set(c, u16(NFTNL_CHAIN_DEVICES)), let raw = nftnl_chain_get_data(c, u16(NFTNL_CHAIN_DEVICES), &length) {
            // A NULL-terminated array of names.
            let names = raw.assumingMemoryBound(to: UnsafePointer<CChar>?.self)
            var k = 0
            while let name = names[k], k < 256 {
                devices.append(String(cString: name))
                k += 1
            }
        }
        contents.chains[i].devices = devices
    }

    private mutating func takeRule(_ nlh: UnsafeMutablePointer<nlmsghdr>) {
        guard let r = nftnl_rule_alloc() else { return }
        defer { nftnl_rule_free(r) }
        let parsed = nftnl_rule_nlmsg_parse(nlh, r) >= 0
        // The table and chain are read before the expressions: known even when an expression is not.
        guard nftnl_rule_is_set(r, u16(NFTNL_RULE_TABLE)),
              String(cString: nftnl_rule_get_str(r, u16(NFTNL_RULE_TABLE))) == table else {
            if !parsed, !nftnl_rule_is_set(r, u16(NFTNL_RULE_TABLE)) {
                contents.unreadable.append("a rule libnftnl cannot read")
            }
            return
        }
        guard nftnl_rule_is_set(r, u16(NFTNL_RULE_CHAIN)) else {
            contents.unreadable.append("a rule without a chain")
            return
        }
        let i = chainIndex(String(cString: nftnl_rule_get_str(r, u16(NFTNL_RULE_CHAIN))))
        let handle = nftnl_rule_is_set(r, u16(NFTNL_RULE_HANDLE)) ? nftnl_rule_get_u64(r, u16(NFTNL_RULE_HANDLE)) : 0
        guard parsed else {
            contents.chains[i].rules.append(NftRuleContents(expressions: [], comment: nil, handle: handle,
                                                            unreadable: "an expression libnftnl does not know"))
            return
        }
        var expressions: [NftExpressionContents] = []
        if let iterator = nftnl_expr_iter_create(r) {
            while let e = nftnl_expr_iter_next(iterator) { expressions.append(Self.expression(e)) }
            nftnl_expr_iter_destroy(iterator)
        }
        var comment: String?
        var length: UInt32 = 0
        if nftnl_rule_is_set(r, u16(NFTNL_RULE_USERDATA)), let data = nftnl_rule_get_data(r, u16(NFTNL_RULE_USERDATA), &length) {
            comment = userdataComment(data, length)
        }
        var unreadable: String?
        if nftnl_rule_is_set(r, u16(NFTNL_RULE_COMPAT_PROTO)) || nftnl_rule_is_set(r, u16(NFTNL_RULE_COMPAT_FLAGS)) {
            unreadable = "an xtables compatibility rule"
        }
        contents.chains[i].rules.append(NftRuleContents(expressions: expressions, comment: comment, handle: handle,
                                                        unreadable: unreadable))
    }

    /// Attributes that change by themselves, or only name objects within one transaction.
    private static let ignored: [String: [UInt16]] = [
        "counter": [u16(NFTNL_EXPR_CTR_PACKETS), u16(NFTNL_EXPR_CTR_BYTES)],
        "quota": [u16(NFTNL_EXPR_QUOTA_CONSUMED)],
        "last": [u16(NFTNL_EXPR_LAST_MSECS), u16(NFTNL_EXPR_LAST_SET)],
        "lookup": [u16(NFTNL_EXPR_LOOKUP_SET_ID)],
        "dynset": [u16(NFTNL_EXPR_DYNSET_SET_ID)],
        "immediate": [u16(NFTNL_EXPR_IMM_CHAIN_ID)],
        "objref": [u16(NFTNL_EXPR_OBJREF_SET_ID)],
    ]
    /// Expressions whose text shows only changing state (their counts): described by name alone.
    private static let describedByName: Set<String> = ["counter", "last"]

    static func expression(_ e: OpaquePointer) -> NftExpressionContents {
        let name = nftnl_expr_get_str(e, u16(NFTNL_EXPR_NAME)).map { String(cString: $0) } ?? "?"
        let ignored = Self.ignored[name] ?? []
        var attributes: [NftExpressionContents.Attribute] = []
        // Attribute numbers are bits of a 32-bit mask in libnftnl.
        for type in u16(NFTNL_EXPR_BASE)..<32 where nftnl_expr_is_set(e, type) && !ignored.contains(type) {
            // Attributes that are not bytes (a nested expression) leave the length at 0.
            var length: UInt32 = 0
            guard let p = nftnl_expr_get(e, type, &length), length <= 4096 else { continue }
            attributes.append(.init(type: type, bytes: Array(UnsafeRawBufferPointer(start: p, count: Int(length)))))
        }
        var text = ""
        if !describedByName.contains(name) {
            var buffer = [CChar](repeating: 0, count: 1024)
            let n = nftnl_expr_snprintf(&buffer, buffer.count, e, u32(NFTNL_OUTPUT_DEFAULT), 0)
            if n > 0 {
                text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    .trimmingSpaces()
            }
        }
        return NftExpressionContents(name: name, attributes: attributes,
                                     description: text.isEmpty ? "[ \(name) ]" : "[ \(name) \(text) ]")
    }

    private mutating func setIndex(_ name: String) -> Int {
        if let i = contents.sets.firstIndex(where: { $0.name == name }) { return i }
        contents.sets.append(NftSetContents(name: name))
        return contents.sets.count - 1
    }

    private mutating func takeSet(_ nlh: UnsafeMutablePointer<nlmsghdr>) {
        guard let s = nftnl_set_alloc() else { return }
        defer { nftnl_set_free(s) }
        guard nftnl_set_nlmsg_parse(nlh, s) >= 0, let t = nftnl_set_get_str(s, u16(NFTNL_SET_TABLE)),
              String(cString: t) == table, let n = nftnl_set_get_str(s, u16(NFTNL_SET_NAME)) else { return }
        let i = setIndex(String(cString: n))
        func u32(_ attr: Int) -> UInt32? { nftnl_set_is_set(s, u16(attr)) ? nftnl_set_get_u32(s, u16(attr)) : nil }
        contents.sets[i].flags = u32(Int(NFTNL_SET_FLAGS.rawValue)) ?? 0
        contents.sets[i].keyType = u32(Int(NFTNL_SET_KEY_TYPE.rawValue)) ?? 0
        contents.sets[i].keyLength = u32(Int(NFTNL_SET_KEY_LEN.rawValue)) ?? 0
        contents.sets[i].dataType = u32(Int(NFTNL_SET_DATA_TYPE.rawValue))
        contents.sets[i].dataLength = u32(Int(NFTNL_SET_DATA_LEN.rawValue))
    }

    private mutating func takeElements(_ nlh: UnsafeMutablePointer<nlmsghdr>) {
        guard let s = nftnl_set_alloc() else { return }
        defer { nftnl_set_free(s) }
        // A copy whose element nests are all typed NFTA_LIST_ELEM: libnftnl 1.2 builds the n-th element's
        // nest with type n (the kernel does not look), and its own parser refuses any type but
        // NFTA_LIST_ELEM, so a plan's set of two elements or more was read back as none.
        var message = Array(UnsafeRawBufferPointer(start: nlh, count: Int(nlh.pointee.nlmsg_len)))
        Self.retypeElementNests(&message)
        let parsed = message.withUnsafeMutableBytes { bytes in
            nftnl_set_elems_nlmsg_parse(bytes.baseAddress!.assumingMemoryBound(to: nlmsghdr.self), s)
        }
        guard parsed >= 0, let t = nftnl_set_get_str(s, u16(NFTNL_SET_TABLE)),
              String(cString: t) == table, let n = nftnl_set_get_str(s, u16(NFTNL_SET_NAME)) else { return }
        let i = setIndex(String(cString: n))
        // nftnl_set_elem_foreach walks the set's list itself: libnftnl 1.2's iterator (_iter_next) stops
        // early or runs past the end of a list of several elements (a plan's set of two DNS servers read
        // as none).
        var keys: [[UInt8]] = []
        _ = withUnsafeMutablePointer(to: &keys) { keysPointer in
            nftnl_set_elem_foreach(s, { element, context in
                var length: UInt32 = 0
                if let element, let context, let key = nftnl_set_elem_get(element, u16(NFTNL_SET_ELEM_KEY), &length), length <= 64 {
                    context.assumingMemoryBound(to: [[UInt8]].self).pointee
                        .append(Array(UnsafeRawBufferPointer(start: key, count: Int(length))))
                }
                return 0
            }, keysPointer)
        }
        contents.sets[i].elements += keys
    }
}

extension ContentsParser {
    /// Gives every nest inside a NEWSETELEM message's NFTA_SET_ELEM_LIST_ELEMENTS the type NFTA_LIST_ELEM
    /// (keeping NLA_F_NESTED). Attributes that do not fit the message end the walk; nothing else changes.
    static func retypeElementNests(_ message: inout [UInt8]) {
        func u16(_ at: Int) -> Int { Int(message[at]) | Int(message[at + 1]) << 8 }
        func align(_ n: Int) -> Int { (n + 3) & ~3 }
        let headers = 16 + 4   // nlmsghdr, nfgenmsg
        var at = headers
        while at + 4 <= message.count {
            let length = u16(at), type = u16(at + 2) & 0x3fff
            guard length >= 4, at + length <= message.count else { return }
            if type == Int(NFTA_SET_ELEM_LIST_ELEMENTS.rawValue) {
                var inner = at + 4
                while inner + 4 <= at + length {
                    let innerLength = u16(inner)
                    guard innerLength >= 4, inner + innerLength <= at + length else { return }
                    let flags = u16(inner + 2) & 0xc000
                    let retyped = flags | Int(NFTA_LIST_ELEM.rawValue)
                    message[inner + 2] = UInt8(retyped & 0xff)
                    message[inner + 3] = UInt8(retyped >> 8)
                    inner += align(innerLength)
                }
            }
            at += align(length)
        }
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while s.first == " " || s.first == "\n" { s = s.dropFirst() }
        while s.last == " " || s.last == "\n" { s = s.dropLast() }
        return String(s)
    }
}
