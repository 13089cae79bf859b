import LinuxSystem
import RuntimeABI

/// libmeshguard-ffi.so, loaded with dlopen and its C ABI bound by name.
/// Loading happens before anything touches the kernel: a missing library or
/// required symbol changes nothing.
///
/// Every signature below was checked against MeshGuard's source,
/// src/meshguard_ffi.zig (github igorls/meshguard at 415dacf, version 0.10.0,
/// the same file the Linux build of libmeshguard-ffi.so was made from), not
/// only against the Apple embedding guide. The symbols that source does not
/// export (set_app_relay, add_contact, set_contacts_only,
/// set_keepalive_interval, app_route_stats) are the guide's, optional, and
/// marked *unverified*. A context is an opaque pointer (`?*MeshguardContext`).
final class MeshLibrary: @unchecked Sendable {  // @unchecked: immutable after init (function pointers and a dlopen handle)
    typealias Context = OpaquePointer
    /// meshguard_init(?[*]const u8 seed, u16 listen_port) -> ?*ctx. The seed is 32 bytes (NULL would
    /// generate one; never passed); binds the UDP socket; NULL when the bind fails.
    typealias Initialize = @convention(c) (UnsafePointer<UInt8>?, UInt16) -> Context?
    /// meshguard_join(ctx, [*]const u8 ipv4[4], u16 port) -> i32: 0 the event loop started,
    /// -1 failure, -2 already running. Port 0 means 51821. Needs no key of the seed peer.
    typealias Join = @convention(c) (Context?, UnsafePointer<UInt8>?, UInt16) -> Int32
    /// meshguard_join_host(ctx, [*:0]const u8 "host:port") -> i32: the port is part of the string
    /// (no port argument); -11 when the name does not resolve (DNS A) or the string is malformed.
    typealias JoinHost = @convention(c) (Context?, UnsafePointer<CChar>?) -> Int32
    /// meshguard_get_pubkey(ctx, [*]u8 out[32]) -> void: the Ed25519 identity.
    typealias GetPublicKey = @convention(c) (Context?, UnsafeMutablePointer<UInt8>?) -> Void
    /// meshguard_peer_count(ctx) -> u32: ALIVE peers only.
    typealias PeerCount = @convention(c) (Context?) -> UInt32
    /// meshguard_get_peers(ctx, [*]u8 out[max × 32], u32 max) -> u32 written: ALIVE peers only.
    typealias GetPeers = @convention(c) (Context?, UnsafeMutablePointer<UInt8>?, UInt32) -> UInt32
    /// meshguard_get_peer_info(ctx, [*]const u8 id[32], [*]u8 out[48]) -> i32: 0 found, -1 not found.
    typealias GetPeerInfo = @convention(c) (Context?, UnsafePointer<UInt8>?, UnsafeMutablePointer<UInt8>?) -> Int32
    /// meshguard_tunnel_open(ctx, [*]const u8 id[32]) -> i32: 0 = handshake initiation SENT (not
    /// completed); -2 not running, -3 not a member, -4 no WireGuard key, -5 no endpoint, -6 device
    /// full, -7 initiation refused (at most one per peer every 5 s), -8 send failed.
    typealias TunnelOpen = @convention(c) (Context?, UnsafePointer<UInt8>?) -> Int32
    /// meshguard_tunnel_close(ctx, [*]const u8 id[32]) -> void: removes the peer from the device.
    typealias TunnelClose = @convention(c) (Context?, UnsafePointer<UInt8>?) -> Void
    /// meshguard_tunnel_send(ctx, id[32], [*]const u8 data, u32 len) -> i32: 0 handed to the socket;
    /// -3 len > 1396, -4 the peer is not in the device (no tunnel), -5 no session (handshake not
    /// complete, or the session expired), -6/-7 socket missing or send failed.
    typealias TunnelSend = @convention(c) (Context?, UnsafePointer<UInt8>?, UnsafePointer<UInt8>?, UInt32) -> Int32
    /// meshguard_tunnel_recv(ctx, [*]u8 out[1500], *u32 len, [*]u8 sender[32]) -> i32:
    /// 0 message, 1 empty, -1 no context. A lock-free ring (256): safe beside the host's calls.
    typealias TunnelRecv = @convention(c) (Context?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt32>?, UnsafeMutablePointer<UInt8>?) -> Int32
    /// meshguard_destroy(ctx) -> void: leaves, joins the event-loop thread, frees.
    typealias Destroy = @convention(c) (Context?) -> Void
    /// meshguard_suspend / _resume(ctx) -> void.
    typealias Suspend = @convention(c) (Context?) -> Void
    /// meshguard_debug_info(ctx, [*]u8 out[32]) -> void: little-endian bound port (0..1), total peers
    /// (2..3), alive peers (4..5), running (6), SWIM present (7), gossip port (8..9), membership size
    /// (10..13), sent (14..17), decoded received (18..21), raw received (22..25), ticks (26..29).
    typealias DebugInfo = @convention(c) (Context?, UnsafeMutablePointer<UInt8>?) -> Void
    /// *unverified* (guide): meshguard_set_app_relay(ctx, const uint8_t identity[32], bool force) -> int32.
    typealias SetAppRelay = @convention(c) (Context?, UnsafePointer<UInt8>?, Bool) -> Int32
    /// *unverified* (guide): meshguard_add_contact(ctx, const uint8_t identity[32], const uint8_t wg_key[32]) -> int32.
    typealias AddContact = @convention(c) (Context?, UnsafePointer<UInt8>?, UnsafePointer<UInt8>?) -> Int32
    /// *unverified* (guide, no prototype): meshguard_set_contacts_only(ctx, bool) -> int32.
    typealias SetContactsOnly = @convention(c) (Context?, Bool) -> Int32
    /// *unverified* (guide, no prototype): meshguard_set_keepalive_interval(ctx, uint32_t ms) -> int32 (1,000–600,000, or 0).
    typealias SetKeepalive = @convention(c) (Context?, UInt32) -> Int32
    /// *unverified* (guide): meshguard_app_route_stats(ctx, uint8_t out[32]) -> int32: four little-endian uint64 counters.
    typealias RouteStats = @convention(c) (Context?, UnsafeMutablePointer<UInt8>?) -> Int32

    static let required = ["meshguard_init", "meshguard_join", "meshguard_get_pubkey", "meshguard_peer_count",
                           "meshguard_get_peers", "meshguard_get_peer_info", "meshguard_tunnel_open",
                           "meshguard_tunnel_send", "meshguard_tunnel_recv", "meshguard_tunnel_close", "meshguard_destroy"]
    static let optional = ["meshguard_join_host", "meshguard_set_app_relay", "meshguard_add_contact",
                           "meshguard_set_contacts_only", "meshguard_set_keepalive_interval", "meshguard_suspend",
                           "meshguard_resume", "meshguard_app_route_stats", "meshguard_debug_info"]

    let path: String
    let initialize: Initialize
    let join: Join
    let getPublicKey: GetPublicKey
    let peerCount: PeerCount
    let getPeers: GetPeers
    let getPeerInfo: GetPeerInfo
    let tunnelOpen: TunnelOpen
    let tunnelSend: TunnelSend
    let tunnelRecv: TunnelRecv
    let tunnelClose: TunnelClose
    let destroy: Destroy
    let joinHost: JoinHost?
    let setAppRelay: SetAppRelay?
    let addContact: AddContact?
    let setContactsOnly: SetContactsOnly?
    let setKeepalive: SetKeepalive?
    let suspend: Suspend?
    let resume: Suspend?
    let routeStats: RouteStats?
    let debugInfo: DebugInfo?
    /// The optional symbols the library lacks.
    let missingOptional: [String]

    convenience init(path: String) throws(RuntimeError) {
        // As a TrustedFile, through /proc/self/fd/N (RuntimeLibrary.load).
        let h = try RuntimeLibrary.load(path) { "cannot load MeshGuard library \(path) (runtime.library): \($0)" }
        try self.init(path: path, handle: h)
    }

    /// The library from a descriptor the engine handed over (the packet plane).
    convenience init(descriptor: FileDescriptor, named path: String) throws(RuntimeError) {
        let h = try RuntimeLibrary.load(descriptor: descriptor, named: path) { "cannot load MeshGuard library \(path) (runtime.library): \($0)" }
        try self.init(path: path, handle: h)
    }

    private init(path: String, handle h: DynamicLibrary) throws(RuntimeError) {
        self.path = path
        // Every required symbol is looked up first, so the error names all that are missing.
        var symbols: [String: UnsafeMutableRawPointer] = [:]
        for name in Self.required + Self.optional {
            if let s = h.symbol(named: name) { symbols[name] = s }
        }
        let missing = Self.required.filter { symbols[$0] == nil }
        guard missing.isEmpty else {
            h.close()
            throw RuntimeError("MeshGuard library \(path) has no symbol \(missing.map { "'\($0)'" }.joined(separator: ", ")) "
                               + "(required by runtime.kind mesh; is it libmeshguard-ffi.so?)")
        }
        func bind<T>(_ name: String, _ type: T.Type) -> T { unsafeBitCast(symbols[name]!, to: type) }
        func bindOptional<T>(_ name: String, _ type: T.Type) -> T? { symbols[name].map { unsafeBitCast($0, to: type) } }
        initialize = bind("meshguard_init", Initialize.self)
        join = bind("meshguard_join", Join.self)
        getPublicKey = bind("meshguard_get_pubkey", GetPublicKey.self)
        peerCount = bind("meshguard_peer_count", PeerCount.self)
        getPeers = bind("meshguard_get_peers", GetPeers.self)
        getPeerInfo = bind("meshguard_get_peer_info", GetPeerInfo.self)
        tunnelOpen = bind("meshguard_tunnel_open", TunnelOpen.self)
        tunnelSend = bind("meshguard_tunnel_send", TunnelSend.self)
        tunnelRecv = bind("meshguard_tunnel_recv", TunnelRecv.self)
        tunnelClose = bind("meshguard_tunnel_close", TunnelClose.self)
        destroy = bind("meshguard_destroy", Destroy.self)
        joinHost = bindOptional("meshguard_join_host", JoinHost.self)
        setAppRelay = bindOptional("meshguard_set_app_relay", SetAppRelay.self)
        addContact = bindOptional("meshguard_add_contact", AddContact.self)
        setContactsOnly = bindOptional("meshguard_set_contacts_only", SetContactsOnly.self)
        setKeepalive = bindOptional("meshguard_set_keepalive_interval", SetKeepalive.self)
        suspend = bindOptional("meshguard_suspend", Suspend.self)
        resume = bindOptional("meshguard_resume", Suspend.self)
        routeStats = bindOptional("meshguard_app_route_stats", RouteStats.self)
        debugInfo = bindOptional("meshguard_debug_info", DebugInfo.self)
        missingOptional = Self.optional.filter { symbols[$0] == nil }
        // The library stays loaded for the life of the process (its event-loop
        // thread must never find its code unmapped).
    }
}
