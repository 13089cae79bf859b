import CMnl
import CNftnl
import LinuxSystem

extension NftablesSocket {
    /// Everything one `inet` table holds: its flags and comment, every chain
    /// (hook, priority, type, policy, devices) with its rules' expressions in
    /// order, every set (key, flags) with its elements; nil when there is no
    /// such table. Equivalent to: `nft list table inet NAME` (which lists the
    /// elements too).
    ///
    /// The table, chains, rules, sets and each set's elements are separate
    /// dumps; the ruleset's generation is read before and after, and a read
    /// that another change overlapped is made again (three times at most; the
    /// last one is returned as it is — the change that overlapped it sends a
    /// notification of its own, so a monitor reads again).
    public func contents(of table: String) throws(NftablesError) -> NftTableContents? {
        var result: NftTableContents?
        for _ in 0..<3 {
            let before = try generation()
            do throws(NftablesError) {
                result = try readContents(of: table)
            } catch where error.errno == .noSuchEntry {
                // A set went away between the dump of the sets and of its elements: read again.
                continue
            }
            if try generation() == before { return result }
        }
        if let result { return result }
        return try readContents(of: table)
    }

    /// The ruleset's generation: the kernel counts every committed nf_tables
    /// transaction. Equivalent to: the `# new generation` lines of `nft monitor`.
    public func generation() throws(NftablesError) -> UInt32 {
        var id: UInt32?
        try dump(type: u16(NFT_MSG_GETGEN), family: 0, flags: UInt16(NLM_F_ACK), operation: "nft list ruleset (generation)",
                 prepare: { _ in }) { nlh in
            guard UInt32(nlh.pointee.nlmsg_type & 0xff) == NFT_MSG_NEWGEN.rawValue else { return }
            // struct nfgenmsg, then attributes.
            let header = 4
            guard Int(nlh.pointee.nlmsg_len) >= MemoryLayout<nlmsghdr>.size + header else { return }
            var attr = mnl_nlmsg_get_payload_offset(nlh, header)!.assumingMemoryBound(to: nlattr.self)
            var left = Int32(nlh.pointee.nlmsg_len) - Int32(MemoryLayout<nlmsghdr>.size + header)
            while mnl_attr_ok(attr, left) {
                if mnl_attr_get_type(attr) == u16(NFTA_GEN_ID) {
                    id = UInt32(bigEndian: mnl_attr_get_u32(attr))
                }
                let step = (Int32(attr.pointee.nla_len) + 3) & ~3
                left -= step
                attr = mnl_attr_next(attr)
            }
        }
        guard let id else {
            throw NftablesError(operation: "nft list ruleset (generation): no generation in the answer", errno: .inputOutput)
        }
        return id
    }

    private func readContents(of table: String) throws(NftablesError) -> NftTableContents? {
        var parser = ContentsParser(table: table)
        let operation = "nft list table inet \(table)"
        try dump(type: u16(NFT_MSG_GETTABLE), operation: operation, prepare: { _ in }) { parser.take($0) }
        guard parser.tableSeen else { return nil }
        try dump(type: u16(NFT_MSG_GETCHAIN), operation: operation, prepare: { nlh in
            guard let c = nftnl_chain_alloc() else { return }
            defer { nftnl_chain_free(c) }
            nftnl_chain_set_str(c, u16(NFTNL_CHAIN_TABLE), table)
            nftnl_chain_nlmsg_build_payload(nlh, c)
        }) { parser.take($0) }
        try dump(type: u16(NFT_MSG_GETRULE), operation: operation, prepare: { nlh in
            guard let r = nftnl_rule_alloc() else { return }
            defer { nftnl_rule_free(r) }
            nftnl_rule_set_str(r, u16(NFTNL_RULE_TABLE), table)
            nftnl_rule_nlmsg_build_payload(nlh, r)
        }) { parser.take($0) }
        try dump(type: u16(NFT_MSG_GETSET), operation: operation, prepare: { nlh in
            guard let s = nftnl_set_alloc() else { return }
            defer { nftnl_set_free(s) }
            nftnl_set_set_str(s, u16(NFTNL_SET_TABLE), table)
            nftnl_set_nlmsg_build_payload(nlh, s)
        }) { parser.take($0) }
        for set in parser.contents.sets.map(\.name) {
            try dump(type: u16(NFT_MSG_GETSETELEM), operation: "nft list set inet \(table) \(set)", prepare: { nlh in
                guard let s = nftnl_set_alloc() else { return }
                defer { nftnl_set_free(s) }
                nftnl_set_set_str(s, u16(NFTNL_SET_TABLE), table)
                nftnl_set_set_str(s, u16(NFTNL_SET_NAME), set)
                nftnl_set_elems_nlmsg_build_payload(nlh, s)
            }) { parser.take($0) }
        }
        return parser.finish()
    }
}

extension NftTable {
    /// The nf_tables messages that make this table (as `NftablesSocket.replace`
    /// sends them after its delete: the table, its sets and elements, its
    /// chains and rules), in one buffer: what a tunnel's owner records as the
    /// table it enforces (`NftTableContents(messages:table:)` reads it back).
    public var messages: [UInt8] {
        let capacity = (1 << 16) + 1024 * (ruleCount + sets.reduce(0) { $0 + $1.elements.count } + chains.count + sets.count + 1)
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
        defer { buffer.deallocate() }
        var sequence: UInt32 = 0
        let writer = TransactionWriter(buffer: buffer, capacity: capacity, sequence: {
            sequence += 1
            return sequence
        })
        writer.add(self)
        let (length, _) = writer.finish()
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }

    /// What the kernel holds once this table is applied, as `NftablesSocket.contents(of:)` reads it:
    /// the table's own messages parsed by the same code as the kernel's answers.
    public var contents: NftTableContents {
        NftTableContents(messages: messages, table: name)
    }
}

extension NftTableContents {
    /// The name of the first table nf_tables messages make (the table of `NftTable.messages`).
    public static func tableName(inMessages messages: [UInt8]) -> String? {
        ContentsParser.firstTableName(messages)
    }

    /// The contents that nf_tables messages (`NftTable.messages`) make of table `table`.
    public init(messages: [UInt8], table: String) {
        var parser = ContentsParser(table: table)
        messages.withUnsafeBytes { parser.take(messages: $0) }
        self = parser.finish()
    }
}
