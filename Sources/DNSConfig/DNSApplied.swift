/// What `DNSConfigurator.apply` did: the backend it used, the file it
/// wrote, and for split DNS the forwarder the engine must start (its
/// sockets are already bound, so queries that arrive before `start()` wait
/// in them) and stop before `DNSConfigurator.restore`.
public struct DNSApplied: Sendable {
    public let backend: DNSBackendKind
    /// The resolv.conf written (nil for systemd-resolved).
    public let path: String?
    /// STATEDIR/NAME.dns, which `restore` reads.
    public let journalPath: String
    /// Split DNS only: the forwarder resolv.conf now points to.
    public let forwarder: SplitDNSForwarder?

    public init(backend: DNSBackendKind, path: String?, journalPath: String, forwarder: SplitDNSForwarder?) {
        self.backend = backend
        self.path = path
        self.journalPath = journalPath
        self.forwarder = forwarder
    }
}
