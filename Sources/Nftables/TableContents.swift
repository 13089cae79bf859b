import TunnelgateSettings

/// One expression of a rule as libnftnl reads it from an nf_tables message:
/// its name and every attribute it holds, as bytes (`nftnl_expr_get`).
///
/// Two expressions are equal when their names are and so is every attribute,
/// where an attribute one side lacks counts as zero: the kernel reports some
/// defaults the request left out (a lookup's flags, a bitwise's operation)
/// and leaves out others (masq's flags of 0). Attributes that change by
/// themselves (a counter's packets and bytes, a quota's consumption, `last`)
/// and transaction-local identifiers (set, chain IDs) are not kept.
/// `description` (libnftnl's text of the expression) is for messages only.
public struct NftExpressionContents: Sendable, Hashable, CustomStringConvertible {
    public struct Attribute: Sendable, Hashable {
        public var type: UInt16
        public var bytes: [UInt8]
    }

    public var name: String
    public var attributes: [Attribute]
    public var description: String

    public init(name: String, attributes: [Attribute], description: String) {
        self.name = name
        self.attributes = attributes.sorted { $0.type < $1.type }
        self.description = description
    }

    public static func == (a: Self, b: Self) -> Bool {
        guard a.name == b.name else { return false }
        var i = 0, j = 0
        let x = a.attributes, y = b.attributes
        while i < x.count || j < y.count {
            if i < x.count, j < y.count, x[i].type == y[j].type {
                guard x[i].bytes == y[j].bytes else { return false }
                i += 1
                j += 1
            } else if j >= y.count || (i < x.count && x[i].type < y[j].type) {
                guard x[i].bytes.allSatisfy({ $0 == 0 }) else { return false }
                i += 1
            } else {
                guard y[j].bytes.allSatisfy({ $0 == 0 }) else { return false }
                j += 1
            }
        }
        // Nested expressions (dynset's) are not attributes libnftnl hands out as bytes: compare their text.
        return a.name != "dynset" || a.description == b.description
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(name) }
}

/// One rule: its expressions in order and its comment (nft's user data).
public struct NftRuleContents: Sendable, Hashable, CustomStringConvertible {
    public var expressions: [NftExpressionContents]
    public var comment: String?
    /// The kernel's handle (0 for a rule of a plan); not part of the content.
    public var handle: UInt64 = 0
    /// Set when libnftnl could not read the rule (an expression it does not know): why.
    public var unreadable: String?

    public init(expressions: [NftExpressionContents], comment: String?, handle: UInt64 = 0, unreadable: String? = nil) {
        self.expressions = expressions
        self.comment = comment
        self.handle = handle
        self.unreadable = unreadable
    }

    /// Same expressions and comment, both readable; the handle is not compared.
    public func sameContent(as other: NftRuleContents) -> Bool {
        unreadable == nil && other.unreadable == nil && expressions == other.expressions && comment == other.comment
    }

    /// Equal content (`sameContent`, or both unreadable for the same reason); the handle is not compared.
    public static func == (a: Self, b: Self) -> Bool {
        a.expressions == b.expressions && a.comment == b.comment && a.unreadable == b.unreadable
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(comment)
        hasher.combine(expressions.count)
    }

    public var description: String {
        if let unreadable { return "(unreadable: \(unreadable))" }
        return expressions.map(\.description).joined(separator: " ")
    }
}

/// One chain: a base chain's hook, priority, type and policy, and its rules in order.
public struct NftChainContents: Sendable, Hashable {
    public var name: String
    /// nil for a regular chain (no hook).
    public var hook: UInt32?
    public var priority: Int32?
    public var type: String?
    /// NF_ACCEPT or NF_DROP; nil for a regular chain.
    public var policy: UInt32?
    /// The chain's flags without NFT_CHAIN_BASE (which every base chain has): hardware offload, binding.
    public var flags: UInt32 = 0
    /// Devices of a netdev (or inet ingress) chain.
    public var devices: [String] = []
    public var rules: [NftRuleContents] = []

    public init(name: String, hook: UInt32?, priority: Int32?, type: String?, policy: UInt32?) {
        self.name = name
        self.hook = hook
        self.priority = priority
        self.type = type
        self.policy = policy
    }
}

/// One set: its key, flags and elements (the keys, in byte order, each once).
public struct NftSetContents: Sendable, Hashable {
    public var name: String
    public var flags: UInt32 = 0
    public var keyType: UInt32 = 0
    public var keyLength: UInt32 = 0
    /// A map's data type and length; nil for a plain set.
    public var dataType: UInt32?
    public var dataLength: UInt32?
    public var elements: [[UInt8]] = []

    public init(name: String) { self.name = name }

    /// An element's key as an address when the key is one, else as hex.
    public func describe(_ key: [UInt8]) -> String {
        switch key.count {
        case 4: return IPv4Address(bytes: key).description
        case 16: return IPv6Address(bytes: key).description
        default: return "0x" + key.map { String($0, radix: 16).leftPadded(2) }.joined()
        }
    }
}

/// Everything of one table that decides what it does: its flags and comment,
/// its chains with their rules, its sets with their elements. Read from the
/// kernel (`NftablesSocket.contents(of:)`) or made from a plan
/// (`NftTable.contents`), by the same parser, so the two compare directly.
public struct NftTableContents: Sendable, Hashable {
    public var name: String
    /// NFT_TABLE_F_DORMANT (1) turns every chain of the table off.
    public var flags: UInt32 = 0
    public var comment: String?
    public var chains: [NftChainContents] = []
    public var sets: [NftSetContents] = []
    /// Rules whose chain libnftnl could not name (the message could not be parsed at all).
    public var unreadable: [String] = []

    public init(name: String) { self.name = name }

    public func chain(_ name: String) -> NftChainContents? { chains.first { $0.name == name } }
    public func set(_ name: String) -> NftSetContents? { sets.first { $0.name == name } }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
