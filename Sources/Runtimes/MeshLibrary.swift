import Glibc

/// libmeshguard-ffi.so, loaded with dlopen and its C ABI bound by name
/// (include/meshguard.h in MeshGuard). Loading happens before anything
/// touches the kernel: a missing library or required symbol changes nothing.
///
/// Signatures follow the MeshGuard Apple embedding guide. Where the guide
/// shows no prototype, the assumption is written beside the type:
/// a context is an opaque pointer; ports are uint16_t; lengths uint32_t;
/// calls that can fail return int32_t with 0 for success.
final class MeshLibrary: @unchecked Sendable {  // @unchecked: immutable after init (function pointers and a dlopen handle)
    typealias Context = OpaquePointer
    /// meshguard_init(const uint8_t seed[32], uint16_t listen_port) -> ctx (NULL on failure).
    typealias Initialize = @convention(c) (UnsafePointer<UInt8>?, UInt16) -> Context?
    /// meshguard_join(ctx, const uint8_t ipv4[4], uint16_t port) -> int32 (0: the event loop started).
    typealias Join = @convention(c) (Context?, UnsafePointer<UInt8>?, UInt16) -> Int32
    /// meshguard_join_host(ctx, const char *host, uint16_t port) -> int32 (assumed by analogy with join).
    typealias JoinHost = @convention(c) (Context?, UnsafePointer<CChar>?, UInt16) -> Int32
    /// meshguard_get_pubkey(ctx, uint8_t out[32]) -> int32 (the result is not relied on; the buffer is).
    typealias GetPublicKey = @convention(c) (Context?, UnsafeMutablePointer<UInt8>?) -> Int32
    /// meshguard_peer_count(ctx) -> uint32 (read as int32: counts are small).
    typealias PeerCount = @convention(c) (Context?) -> Int32
    /// meshguard_get_peers(ctx, uint8_t out[max × 32], uint32_t max) -> int32 number written.
    typealias GetPeers = @convention(c) (Context?, UnsafeMutablePointer<UInt8>?, UInt32) -> Int32
    /// meshguard_get_peer_info(ctx, const uint8_t identity[32], uint8_t out[48]) -> int32 (0: found).
    typealias GetPeerInfo = @convention(c) (Context?, UnsafePointer<UInt8>?, UnsafeMutablePointer<UInt8>?) -> Int32
    /// meshguard_tunnel_open / _close(ctx, const uint8_t identity[32]) -> int32.
    typealias TunnelOpen = @convention(c) (Context?, UnsafePointer<UInt8>?) -> Int32
    /// meshguard_tunnel_send(ctx, const uint8_t identity[32], const uint8_t *data, uint32_t len) -> int32.
    typealias TunnelSend = @convention(c) (Context?, UnsafePointer<UInt8>?, UnsafePointer<UInt8>?, UInt32) -> Int32
    /// meshguard_tunnel_recv(ctx, uint8_t out[1500], uint32_t *len, uint8_t sender[32]) -> 0 message, 1 empty, < 0 error.
    typealias TunnelRecv = @convention(c) (Context?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt32>?, UnsafeMutablePointer<UInt8>?) -> Int32
    /// meshguard_destroy(ctx): leaves, joins the event-loop thread, frees.
    typealias Destroy = @convention(c) (Context?) -> Void
    /// meshguard_set_app_relay(ctx, const uint8_t identity[32], bool force) -> int32.
    typealias SetAppRelay = @convention(c) (Context?, UnsafePointer<UInt8>?, Bool) -> Int32
    /// meshguard_add_contact(ctx, const uint8_t identity[32], const uint8_t wg_key[32]) -> int32.
    typealias AddContact = @convention(c) (Context?, UnsafePointer<UInt8>?, UnsafePointer<UInt8>?) -> Int32
    /// meshguard_set_contacts_only(ctx, bool) -> int32 (assumed).
    typealias SetContactsOnly = @convention(c) (Context?, Bool) -> Int32
    /// meshguard_set_keepalive_interval(ctx, uint32_t milliseconds) -> int32 (1,000–600,000, or 0).
    typealias SetKeepalive = @convention(c) (Context?, UInt32) -> Int32
    /// meshguard_suspend / _resume(ctx) -> int32 (assumed).
    typealias Suspend = @convention(c) (Context?) -> Int32
    /// meshguard_app_route_stats(ctx, uint8_t out[32]) -> int32: four little-endian uint64 counters (assumed return).
    typealias RouteStats = @convention(c) (Context?, UnsafeMutablePointer<UInt8>?) -> Int32

    static let required = ["meshguard_init", "meshguard_join", "meshguard_get_pubkey", "meshguard_peer_count",
                           "meshguard_get_peers", "meshguard_get_peer_info", "meshguard_tunnel_open",
                           "meshguard_tunnel_send", "meshguard_tunnel_recv", "meshguard_tunnel_close", "meshguard_destroy"]
    static let optional = ["meshguard_join_host", "meshguard_set_app_relay", "meshguard_add_contact",
                           "meshguard_set_contacts_only", "meshguard_set_keepalive_interval", "meshguard_suspend",
                           "meshguard_resume", "meshguard_app_route_stats"]

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
    let tunnelClose: TunnelOpen
    let destroy: Destroy
    let joinHost: JoinHost?
    let setAppRelay: SetAppRelay?
    let addContact: AddContact?
    let setContactsOnly: SetContactsOnly?
    let setKeepalive: SetKeepalive?
    let suspend: Suspend?
    let resume: Suspend?
    let routeStats: RouteStats?
    /// The optional symbols the library lacks.
    let missingOptional: [String]

    init(path: String) throws(RuntimeError) {
        self.path = path
        guard let h = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "unknown error"
            throw RuntimeError("cannot load MeshGuard library \(path) (runtime.library): \(reason)")
        }
        // Every required symbol is looked up first, so the error names all that are missing.
        var symbols: [String: UnsafeMutableRawPointer] = [:]
        for name in Self.required + Self.optional {
            if let s = dlsym(h, name) { symbols[name] = s }
        }
        let missing = Self.required.filter { symbols[$0] == nil }
        guard missing.isEmpty else {
            dlclose(h)
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
        tunnelClose = bind("meshguard_tunnel_close", TunnelOpen.self)
        destroy = bind("meshguard_destroy", Destroy.self)
        joinHost = bindOptional("meshguard_join_host", JoinHost.self)
        setAppRelay = bindOptional("meshguard_set_app_relay", SetAppRelay.self)
        addContact = bindOptional("meshguard_add_contact", AddContact.self)
        setContactsOnly = bindOptional("meshguard_set_contacts_only", SetContactsOnly.self)
        setKeepalive = bindOptional("meshguard_set_keepalive_interval", SetKeepalive.self)
        suspend = bindOptional("meshguard_suspend", Suspend.self)
        resume = bindOptional("meshguard_resume", Suspend.self)
        routeStats = bindOptional("meshguard_app_route_stats", RouteStats.self)
        missingOptional = Self.optional.filter { symbols[$0] == nil }
        // The library stays loaded for the life of the process (its event-loop
        // thread must never find its code unmapped).
    }
}
