import TunnelgateSettings

/// An nf_tables table written at the level of the kernel's expressions, for what `NftTable`'s
/// matches do not say: random numbers (`numgen`), packet lengths, socket uids, sets with
/// concatenated keys that the packet path fills (`update @set { … }`) with a counter per element,
/// NAT flags. Replaced as a whole in one transaction by `NftablesProgramSocket.replace`.
public struct NftProgram: Sendable, Hashable {
    public var name: String
    public var comment: String
    public var sets: [NftProgramSet]
    public var chains: [NftProgramChain]

    public init(name: String, comment: String, sets: [NftProgramSet] = [], chains: [NftProgramChain] = []) {
        self.name = name
        self.comment = comment
        self.sets = sets
        self.chains = chains
    }
}

/// The netfilter hooks a base chain of an `NftProgram` attaches to (NF_INET_*).
public enum NftProgramHook: UInt32, Sendable, Hashable {
    case prerouting = 0   // NF_INET_PRE_ROUTING
    case input = 1        // NF_INET_LOCAL_IN
    case forward = 2      // NF_INET_FORWARD
    case output = 3       // NF_INET_LOCAL_OUT
    case postrouting = 4  // NF_INET_POST_ROUTING
}

public struct NftProgramChain: Sendable, Hashable {
    public var name: String
    public var hook: NftProgramHook
    public var kind: NftChain.Kind
    public var priority: Int32
    public var rules: [NftProgramRule]

    /// A base chain with policy accept.
    public init(name: String, hook: NftProgramHook, kind: NftChain.Kind = .filter, priority: Int32, rules: [NftProgramRule]) {
        self.name = name
        self.hook = hook
        self.kind = kind
        self.priority = priority
        self.rules = rules
    }
}

public struct NftProgramRule: Sendable, Hashable {
    public var expressions: [NftExpression]
    public var comment: String

    public init(_ expressions: [NftExpression], comment: String) {
        self.expressions = expressions
        self.comment = comment
    }
}

/// A hash set whose key is one or more fields (each padded to 4 bytes, as the registers hold them).
public struct NftProgramSet: Sendable, Hashable {
    public var name: String
    /// nft's data type of each field (7 ipv4_addr, 8 ipv6_addr, 12 inet_proto, 13 inet_service,
    /// 28 uid), for `nft list` to show elements; with the field lengths in bytes.
    public var fields: [(type: UInt32, length: UInt32)]
    /// `flags dynamic`: the packet path adds elements.
    public var dynamic: Bool
    /// `counter`: every element counts the packets and bytes that added or updated it.
    public var counters: Bool
    public var size: UInt32
    /// `flags timeout; timeout MS`: every element expires this long after it was added (NFT_SET_TIMEOUT,
    /// NFTA_SET_TIMEOUT). An element added by `addToSet` keeps its expiry however often it is met, so
    /// the time left tells when it was first added; nil: elements never expire.
    public var timeoutMilliseconds: UInt64?

    public init(name: String, fields: [(type: UInt32, length: UInt32)], dynamic: Bool, counters: Bool, size: UInt32,
                timeoutMilliseconds: UInt64? = nil) {
        self.name = name
        self.fields = fields
        self.dynamic = dynamic
        self.counters = counters
        self.size = size
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    /// The key's length in bytes: each field rounded up to a register (4 bytes).
    public var keyLength: UInt32 { fields.reduce(0) { $0 + ($1.length + 3) / 4 * 4 } }

    public static func == (a: Self, b: Self) -> Bool {
        a.name == b.name && a.fields.map(\.type) == b.fields.map(\.type) && a.fields.map(\.length) == b.fields.map(\.length)
            && a.dynamic == b.dynamic && a.counters == b.counters && a.size == b.size && a.timeoutMilliseconds == b.timeoutMilliseconds
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(fields.map(\.type))
        hasher.combine(fields.map(\.length))
    }
}

/// A 32-bit register (NFT_REG32_00 + n), where expressions load values and read them back.
public struct NftRegister: Sendable, Hashable {
    public let rawValue: UInt32
    /// NFT_REG32_00 … NFT_REG32_15.
    public static func r32(_ n: UInt32) -> NftRegister {
        precondition(n < 16, "there are 16 32-bit registers")
        return NftRegister(rawValue: 8 + n)
    }
    private init(rawValue: UInt32) { self.rawValue = rawValue }
}

/// One nf_tables expression (what `nft --debug=netlink` prints in brackets).
public enum NftExpression: Sendable, Hashable {
    public enum MetaKey: UInt32, Sendable {
        case length = 0        // NFT_META_LEN: skb->len
        case mark = 3          // NFT_META_MARK
        case inputName = 6     // NFT_META_IIFNAME
        case outputName = 7    // NFT_META_OIFNAME
        case socketUID = 10    // NFT_META_SKUID
        case nfproto = 15      // NFT_META_NFPROTO
        case l4proto = 16      // NFT_META_L4PROTO
    }
    public enum PayloadBase: UInt32, Sendable {
        case link = 0, network = 1, transport = 2   // NFT_PAYLOAD_*_HEADER
    }
    public enum Comparison: UInt32, Sendable {
        case equal = 0, notEqual = 1, less = 2, lessOrEqual = 3, greater = 4, greaterOrEqual = 5   // NFT_CMP_*
    }

    /// `meta KEY` into a register.
    case meta(MetaKey, NftRegister)
    /// `payload load LENGTHb @ BASE + OFFSET` into a register.
    case payload(PayloadBase, offset: UInt32, length: UInt32, NftRegister)
    /// `cmp OP reg DATA`; ordering comparisons compare bytes, so numbers must be big-endian.
    case compare(Comparison, NftRegister, [UInt8])
    /// `byteorder reg = hton(reg, 4, 4)`: a host-order 32-bit value in big-endian, for ordering.
    case hostToNetwork32(NftRegister)
    /// `immediate reg DATA`.
    case immediate(NftRegister, [UInt8])
    /// `numgen random mod N` into a register (a host-order 32-bit value 0 … N-1).
    case random(modulus: UInt32, NftRegister)
    /// `lookup reg @SET` (`!=` with `invert`).
    case lookup(set: String, NftRegister, invert: Bool)
    /// `update @SET { key at reg … }`: adds or refreshes the element; its counter counts.
    case updateSet(set: String, key: NftRegister)
    /// `add @SET { key at reg … }`: adds the element if it is not there; its counter counts every time,
    /// but an existing element's expiry is not refreshed (NFT_DYNSET_OP_ADD).
    case addToSet(set: String, key: NftRegister)
    case counter
    case accept
    case drop
    /// `masquerade [persistent] [random] [fully-random]` with NF_NAT_RANGE_* flags.
    case masquerade(flags: UInt32)
}

extension NftExpression {
    /// NF_NAT_RANGE_PERSISTENT.
    public static let natPersistent: UInt32 = 1 << 3
    /// NF_NAT_RANGE_PROTO_RANDOM_FULLY.
    public static let natFullyRandom: UInt32 = 1 << 4

    /// A host-order 32-bit number as the bytes a comparison with a register holding it needs.
    public static func hostBytes(_ v: UInt32) -> [UInt8] { withUnsafeBytes(of: v) { Array($0) } }
    /// A number as big-endian bytes (after `hostToNetwork32`, or for network-order header fields).
    public static func bigEndianBytes(_ v: UInt32) -> [UInt8] { withUnsafeBytes(of: v.bigEndian) { Array($0) } }
    /// An interface name as `meta iifname/oifname` compares it: NUL-terminated, at most 16 bytes.
    public static func interfaceName(_ name: String) -> [UInt8] { Array(name.utf8.prefix(15)) + [0] }
}

/// One element of a set read back, with its counter when the set counts.
public struct NftSetElement: Sendable, Hashable {
    public var key: [UInt8]
    public var packets: UInt64
    public var bytes: UInt64
    /// In a set with timeouts, the milliseconds until the element expires (NFTA_SET_ELEM_EXPIRATION,
    /// as the kernel computed it when it dumped the element); nil in a set without.
    public var expiresInMilliseconds: UInt64? = nil
}

/// A rule read back with the first counter in it.
public struct NftRuleCounter: Sendable, Hashable {
    public var chain: String
    public var comment: String?
    public var packets: UInt64
    public var bytes: UInt64
}
