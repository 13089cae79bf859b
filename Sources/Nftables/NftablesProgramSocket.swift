import CMnl
import CNftnl
import LinuxSystem
import TunnelgateSettings

/// A netfilter netlink socket bound in the calling thread's namespace, for `NftProgram` tables
/// and for reading a namespace's whole ruleset back (every family, every table). Changes go as
/// one nf_tables transaction: the kernel applies all of it or none of it.
public final class NftablesProgramSocket {
    private let socket: OpaquePointer
    private var sequence: UInt32
    private let bufferSize = 1 << 20
    private let buffer: UnsafeMutableRawPointer
    private let receiveBuffer: UnsafeMutableRawPointer

    public init() throws(SystemCallError) {
        guard let s = mnl_socket_open2(NETLINK_NETFILTER, FileDescriptor.socketFlags(nonBlocking: false)) else {
            throw SystemCallError("socket(AF_NETLINK, NETLINK_NETFILTER)", .current)
        }
        guard mnl_socket_bind(s, 0, pid_t(MNL_SOCKET_AUTOPID)) == 0 else {
            let e = Errno.current
            mnl_socket_close(s)
            throw SystemCallError("bind(NETLINK_NETFILTER)", e)
        }
        socket = s
        sequence = UInt32(truncatingIfNeeded: ProcessControl.id) &* 7919
        buffer = .allocate(byteCount: bufferSize, alignment: 8)
        receiveBuffer = .allocate(byteCount: bufferSize, alignment: 8)
    }

    deinit {
        mnl_socket_close(socket)
        buffer.deallocate()
        receiveBuffer.deallocate()
    }

    private func nextSequence() -> UInt32 {
        sequence &+= 1
        return sequence
    }

    // MARK: - Transactions

    /// Replaces the inet table `program.name` with `program` in one transaction (add, delete, add:
    /// the delete cannot fail on a table that did not exist). Counters start from zero.
    public func replace(_ program: NftProgram) throws(NftablesError) {
        let batch = ProgramBatch(buffer: buffer, capacity: bufferSize, sequence: nextSequence)
        batch.table(program.name, comment: nil, delete: false)
        batch.table(program.name, comment: nil, delete: true)
        batch.table(program.name, comment: program.comment, delete: false)
        for (index, set) in program.sets.enumerated() { batch.set(set, id: UInt32(index + 1), table: program.name) }
        let ids = Dictionary(uniqueKeysWithValues: program.sets.enumerated().map { ($1.name, UInt32($0 + 1)) })
        for chain in program.chains {
            batch.chain(chain, table: program.name)
            for rule in chain.rules { batch.rule(rule, chain: chain.name, table: program.name, setIDs: ids) }
        }
        try run(batch)
    }

    /// Deletes the inet table `name`; a table that does not exist is not an error.
    /// Equivalent to: `nft delete table inet NAME`.
    public func delete(table name: String) throws(NftablesError) {
        let batch = ProgramBatch(buffer: buffer, capacity: bufferSize, sequence: nextSequence)
        batch.table(name, comment: nil, delete: true)
        do {
            try run(batch)
        } catch where error.errno == .noSuchEntry {
            return
        }
    }

    private func run(_ batch: ProgramBatch) throws(NftablesError) {
        let (length, operations) = batch.finish()
        if mnl_socket_sendto(socket, buffer, length) < 0 {
            throw NftablesError(operation: "nft transaction (sendmsg)", errno: .current)
        }
        var pending = Set(operations.keys)
        var firstError: NftablesError?
        while !pending.isEmpty {
            // A refused transaction answers with the error of each failed message and no acks for the
            // rest: stop reading at the first error once nothing more is waiting.
            if firstError != nil, !(try socketReadable(timeoutMilliseconds: 100)) { break }
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
                    let code = mnl_nlmsg_get_payload(nlh)!.assumingMemoryBound(to: nlmsgerr.self).pointee.error
                    if code != 0, firstError == nil {
                        firstError = NftablesError(operation: operations[seq] ?? "nft transaction",
                                                   errno: Errno(rawValue: -code))
                    }
                }
                nlh = mnl_nlmsg_next(nlh, &remaining)
            }
        }
        if let firstError { throw firstError }
    }

    private func socketReadable(timeoutMilliseconds: Int32) throws(NftablesError) -> Bool {
        do {
            return try Poll.readable(FileDescriptor(rawValue: mnl_socket_get_fd(socket)), timeoutMilliseconds: timeoutMilliseconds)
        } catch {
            throw NftablesError(operation: "poll(NETLINK_NETFILTER)", errno: error.errno)
        }
    }

    // MARK: - Reading back

    /// The elements of set `set` of inet table `table`, with their counters.
    /// Equivalent to: `nft list set inet TABLE SET`.
    public func elements(table: String, set: String) throws(NftablesError) -> [NftSetElement] {
        var out: [NftSetElement] = []
        try dump(type: u16(NFT_MSG_GETSETELEM), family: 1, operation: "nft list set inet \(table) \(set)", prepare: { nlh in
            let s = nftnl_set_alloc()!
            defer { nftnl_set_free(s) }
            nftnl_set_set_str(s, u16(NFTNL_SET_TABLE), table)
            nftnl_set_set_str(s, u16(NFTNL_SET_NAME), set)
            nftnl_set_elems_nlmsg_build_payload(nlh, s)
        }) { nlh in
            let s = nftnl_set_alloc()!
            defer { nftnl_set_free(s) }
            guard nftnl_set_elems_nlmsg_parse(nlh, s) >= 0 else { return }
            let iterator = nftnl_set_elems_iter_create(s)!
            defer { nftnl_set_elems_iter_destroy(iterator) }
            while let e = nftnl_set_elems_iter_next(iterator) {
                var length: UInt32 = 0
                guard let key = nftnl_set_elem_get(e, u16(NFTNL_SET_ELEM_KEY), &length) else { continue }
                var element = NftSetElement(key: Array(UnsafeRawBufferPointer(start: key, count: Int(length))), packets: 0, bytes: 0)
                let counter = CounterReading()
                withExtendedLifetime(counter) {
                    _ = nftnl_set_elem_expr_foreach(e, { expr, context in
                        let reading = Unmanaged<CounterReading>.fromOpaque(context!).takeUnretainedValue()
                        reading.take(expr!)
                        return 0
                    }, Unmanaged.passUnretained(counter).toOpaque())
                }
                element.packets = counter.packets
                element.bytes = counter.bytes
                if nftnl_set_elem_is_set(e, u16(NFTNL_SET_ELEM_EXPIRATION)) {
                    element.expiresInMilliseconds = nftnl_set_elem_get_u64(e, u16(NFTNL_SET_ELEM_EXPIRATION))
                }
                out.append(element)
            }
        }
        return out
    }

    /// Every rule of inet table `table` that has a counter, with the counter's values.
    public func ruleCounters(table: String) throws(NftablesError) -> [NftRuleCounter] {
        var out: [NftRuleCounter] = []
        try dump(type: u16(NFT_MSG_GETRULE), family: 1, operation: "nft list table inet \(table)", prepare: { nlh in
            let r = nftnl_rule_alloc()!
            defer { nftnl_rule_free(r) }
            nftnl_rule_set_str(r, u16(NFTNL_RULE_TABLE), table)
            nftnl_rule_nlmsg_build_payload(nlh, r)
        }) { nlh in
            let r = nftnl_rule_alloc()!
            defer { nftnl_rule_free(r) }
            guard nftnl_rule_nlmsg_parse(nlh, r) >= 0 else { return }
            guard String(cString: nftnl_rule_get_str(r, u16(NFTNL_RULE_TABLE))) == table else { return }
            let counter = CounterReading()
            withExtendedLifetime(counter) {
                _ = nftnl_expr_foreach(r, { expr, context in
                    Unmanaged<CounterReading>.fromOpaque(context!).takeUnretainedValue().take(expr!)
                    return 0
                }, Unmanaged.passUnretained(counter).toOpaque())
            }
            guard counter.found else { return }
            var comment: String?
            var length: UInt32 = 0
            if nftnl_rule_is_set(r, u16(NFTNL_RULE_USERDATA)), let data = nftnl_rule_get_data(r, u16(NFTNL_RULE_USERDATA), &length) {
                comment = userdataComment(data, length)
            }
            out.append(NftRuleCounter(chain: String(cString: nftnl_rule_get_str(r, u16(NFTNL_RULE_CHAIN))),
                                      comment: comment, packets: counter.packets, bytes: counter.bytes))
        }
        return out
    }

    /// The whole ruleset of the namespace (every family), one line per table, chain, set, element
    /// and rule in libnftnl's words, without handles, reference counts and counter values, which
    /// change without the configuration changing. Equivalent in content to: `nft list ruleset`.
    public func rulesetListing() throws(NftablesError) -> [String] {
        var lines: [String] = []
        var sets: [(family: UInt32, table: String, name: String)] = []
        try dump(type: u16(NFT_MSG_GETTABLE), family: 0, operation: "nft list tables", prepare: { _ in }) { nlh in
            let t = nftnl_table_alloc()!
            defer { nftnl_table_free(t) }
            guard nftnl_table_nlmsg_parse(nlh, t) >= 0 else { return }
            lines.append("table " + render { nftnl_table_snprintf($0, $1, t, 0, 0) })
        }
        try dump(type: u16(NFT_MSG_GETCHAIN), family: 0, operation: "nft list chains", prepare: { _ in }) { nlh in
            let c = nftnl_chain_alloc()!
            defer { nftnl_chain_free(c) }
            guard nftnl_chain_nlmsg_parse(nlh, c) >= 0 else { return }
            lines.append("chain " + render { nftnl_chain_snprintf($0, $1, c, 0, 0) })
        }
        try dump(type: u16(NFT_MSG_GETSET), family: 0, operation: "nft list sets", prepare: { _ in }) { nlh in
            let s = nftnl_set_alloc()!
            defer { nftnl_set_free(s) }
            guard nftnl_set_nlmsg_parse(nlh, s) >= 0 else { return }
            sets.append((nftnl_set_get_u32(s, u16(NFTNL_SET_FAMILY)), String(cString: nftnl_set_get_str(s, u16(NFTNL_SET_TABLE))),
                         String(cString: nftnl_set_get_str(s, u16(NFTNL_SET_NAME)))))
            lines.append("set " + render { nftnl_set_snprintf($0, $1, s, 0, 0) })
        }
        for set in sets {
            try dump(type: u16(NFT_MSG_GETSETELEM), family: UInt16(set.family), operation: "nft list set \(set.table) \(set.name)", prepare: { nlh in
                let s = nftnl_set_alloc()!
                defer { nftnl_set_free(s) }
                nftnl_set_set_str(s, u16(NFTNL_SET_TABLE), set.table)
                nftnl_set_set_str(s, u16(NFTNL_SET_NAME), set.name)
                nftnl_set_elems_nlmsg_build_payload(nlh, s)
            }) { nlh in
                let s = nftnl_set_alloc()!
                defer { nftnl_set_free(s) }
                guard nftnl_set_elems_nlmsg_parse(nlh, s) >= 0 else { return }
                let iterator = nftnl_set_elems_iter_create(s)!
                defer { nftnl_set_elems_iter_destroy(iterator) }
                while let e = nftnl_set_elems_iter_next(iterator) {
                    lines.append("element \(set.table) \(set.name) " + render { nftnl_set_elem_snprintf($0, $1, e, 0, 0) })
                }
            }
        }
        try dump(type: u16(NFT_MSG_GETRULE), family: 0, operation: "nft list ruleset", prepare: { _ in }) { nlh in
            let r = nftnl_rule_alloc()!
            defer { nftnl_rule_free(r) }
            guard nftnl_rule_nlmsg_parse(nlh, r) >= 0 else { return }
            // "FAMILY TABLE CHAIN HANDLE [POSITION] [ expressions ]": the numbers go (they change on replacement).
            var words = render { nftnl_rule_snprintf($0, $1, r, 0, 0) }.split(separator: " ", omittingEmptySubsequences: true)
            while words.count > 3, UInt64(words[3]) != nil { words.remove(at: 3) }
            lines.append("rule " + words.joined(separator: " "))
        }
        return lines.map(Self.withoutVolatileFields)
    }

    /// Handles, use counts and counter values removed; whitespace runs folded.
    static func withoutVolatileFields(_ line: String) -> String {
        var words: [Substring] = []
        let parts = line.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" })
        var i = 0
        while i < parts.count {
            let w = parts[i]
            if (w == "handle" || w == "use" || w == "pkts" || w == "bytes" || w == "packets"), i + 1 < parts.count,
               UInt64(parts[i + 1]) != nil || parts[i + 1].hasPrefix("0x") {
                i += 2
                continue
            }
            words.append(w)
            i += 1
        }
        return words.joined(separator: " ")
    }

    private func render(_ body: (UnsafeMutablePointer<CChar>, Int) -> Int32) -> String {
        var text = [CChar](repeating: 0, count: 8192)
        _ = text.withUnsafeMutableBufferPointer { body($0.baseAddress!, $0.count) }
        return String(cString: text)
    }

    private func dump(type: UInt16, family: UInt16, operation: String, prepare: (UnsafeMutablePointer<nlmsghdr>) -> Void,
                      _ body: (UnsafeMutablePointer<nlmsghdr>) -> Void) throws(NftablesError) {
        try netfilterExchange(socket: socket, buffer: buffer, receiveBuffer: receiveBuffer, bufferSize: bufferSize,
                              sequence: nextSequence(), type: type, family: family, flags: UInt16(NLM_F_DUMP),
                              operation: operation, prepare: prepare, body)
    }
}

/// The first counter expression met while walking a rule's or an element's expressions.
private final class CounterReading {
    var found = false
    var packets: UInt64 = 0
    var bytes: UInt64 = 0

    func take(_ expr: OpaquePointer) {
        guard !found, let name = nftnl_expr_get_str(expr, u16(NFTNL_EXPR_NAME)), String(cString: name) == "counter" else { return }
        found = true
        packets = nftnl_expr_get_u64(expr, u16(NFTNL_EXPR_CTR_PACKETS))
        bytes = nftnl_expr_get_u64(expr, u16(NFTNL_EXPR_CTR_BYTES))
    }
}
