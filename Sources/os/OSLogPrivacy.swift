import TunnelgateSettings

/// OSLogPrivacy: how an interpolated value appears in the log, as on iOS without a debugger attached
/// and without a profile that enables private data:
///
/// - `.public`: the value;
/// - `.private`, `.sensitive`: `<private>`;
/// - `.auto` (the default): numbers, booleans and types are shown, strings and other values are
///   `<private>`;
/// - `mask: .hash` (with `.private`, `.sensitive`, `.auto`): where the value would be redacted,
///   `<mask.hash: 'BASE64'>` instead, a hash of the value keyed with a secret chosen at random when the
///   process starts: equal values give equal hashes in one run (to correlate lines), and nothing outside
///   the process can compute or reverse them.
///
/// There is no way to reveal private values on Linux: a private value never reaches the log.
public struct OSLogPrivacy: Equatable, Sendable {
    public enum Mask: Equatable, Sendable {
        case hash
        case none
    }

    enum Kind: Equatable, Sendable { case `public`, `private`, sensitive, auto }

    let kind: Kind
    let mask: Mask

    public static var `public`: OSLogPrivacy { OSLogPrivacy(kind: .public, mask: .none) }
    public static var `private`: OSLogPrivacy { OSLogPrivacy(kind: .private, mask: .none) }
    public static func `private`(mask: Mask) -> OSLogPrivacy { OSLogPrivacy(kind: .private, mask: mask) }
    public static var sensitive: OSLogPrivacy { OSLogPrivacy(kind: .sensitive, mask: .none) }
    public static func sensitive(mask: Mask) -> OSLogPrivacy { OSLogPrivacy(kind: .sensitive, mask: mask) }
    public static var auto: OSLogPrivacy { OSLogPrivacy(kind: .auto, mask: .none) }
    public static func auto(mask: Mask) -> OSLogPrivacy { OSLogPrivacy(kind: .auto, mask: mask) }

    /// Whether a value is written as it is. `isScalar`: a number, boolean or type, public under `.auto`.
    func reveals(isScalar: Bool) -> Bool {
        switch kind {
        case .public: true
        case .auto: isScalar
        case .private, .sensitive: false
        }
    }

    /// What is written for `rendered`, the value's text.
    func apply(_ rendered: () -> String, isScalar: Bool) -> String {
        if reveals(isScalar: isScalar) { return rendered() }
        switch mask {
        case .none: return "<private>"
        case .hash: return "<mask.hash: '\(OSLogPrivacy.hash(rendered()))'>"
        }
    }

    /// A keyed 64-bit hash (Swift's Hasher: SipHash with a per-process random seed), base64.
    static func hash(_ text: String) -> String {
        var hasher = Hasher()
        hasher.combine("tunnelgate.os.mask.hash")
        hasher.combine(text)
        let value = UInt64(bitPattern: Int64(hasher.finalize()))
        let bytes = (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
        return Base64.encode(bytes)
    }
}
