@_exported import Foundation

/// A value handed across queues that the type system cannot prove safe: provider
/// completion handlers are plain closures in Apple's API and are called once, on one queue.
struct Unchecked<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// The errors setTunnelNetworkSettings reports, in NETunnelProviderErrorDomain (Apple's codes).
public let NETunnelProviderErrorDomain = "NETunnelProviderErrorDomain"

public enum NETunnelProviderError: Int, Sendable {
    /// The settings are invalid: the message names each offending property.
    case networkSettingsInvalid = 1
    /// A later setTunnelNetworkSettings call superseded this one.
    case networkSettingsCanceled = 2
    /// The engine could not apply them: the message is the engine's.
    case networkSettingsFailed = 3
}

/// The part the system plays for a provider: implemented by the Tunnelgate host
/// (TunnelgateProviderHost) and by test doubles.
protocol NEProviderSystem: AnyObject, Sendable {
    /// Applies (or with nil removes) the settings; calls back with nil or an NSError.
    func setTunnelNetworkSettings(_ settings: NETunnelNetworkSettings?, for provider: NEPacketTunnelProvider,
                                  completionHandler: @escaping @Sendable ((any Error)?) -> Void)
    func reassertingChanged(_ reasserting: Bool, for provider: NEPacketTunnelProvider)
    func cancelTunnel(with error: (any Error)?, for provider: NEPacketTunnelProvider)
}

/// NEProvider: the base of every provider.
open class NEProvider: NSObject, @unchecked Sendable {
    // @unchecked Sendable: the host calls the provider from its one serial queue;
    // what the provider shares with its own threads is the provider's business, as on iOS.
    public override init() { super.init() }

    /// defaultPath and protocolConfiguration, set by the host (NEProviderState.swift).
    let tunnelgateState = NEProviderState()

    /// Called when logind says the host is about to sleep (PrepareForSleep(true) on the system bus),
    /// unless the protocol's disconnectOnSleep stops the tunnel instead; the host waits up to 5 s for
    /// the completion (logind itself does not wait: no delay inhibitor is taken). Override as on iOS.
    open func sleep(completionHandler: @escaping () -> Void) {
        let handler = Unchecked(completionHandler)
        Task { [self] in await sleep(); handler.value() }
    }

    open func sleep() async {}

    /// Called when logind says the host woke (PrepareForSleep(false)) after a `sleep`.
    open func wake() {}

    /// Key-value observing's notification (NSKeyValueObserving.swift): what a provider that called
    /// `addObserver(self, forKeyPath:…)` on its NWTCPConnection or NWUDPSession overrides, as on iOS.
    /// Declared here because Foundation on Linux has no NSObject.observeValue to override.
    open func observeValue(forKeyPath keyPath: String?, of object: Any?, change: [NSKeyValueChangeKey: Any]?,
                           context: UnsafeMutableRawPointer?) {}
}

/// NETunnelProvider.
open class NETunnelProvider: NEProvider, @unchecked Sendable {
    var system: NEProviderSystem?

    /// `sendProviderMessage` data from the manager side. The default replies nil.
    /// The default calls the async variant, so overriding either works.
    open func handleAppMessage(_ messageData: Data, completionHandler: ((Data?) -> Void)? = nil) {
        let handler = Unchecked(completionHandler)
        Task { [self] in
            let reply = await handleAppMessage(messageData)
            handler.value?(reply)
        }
    }

    open func handleAppMessage(_ messageData: Data) async -> Data? { nil }

    /// True while the provider is re-establishing its connection: the status is
    /// `.reasserting` then, `.connected` again when set back to false.
    open var reasserting: Bool = false {
        didSet {
            guard oldValue != reasserting, let packet = self as? NEPacketTunnelProvider else { return }
            system?.reassertingChanged(reasserting, for: packet)
        }
    }
}

/// NEPacketTunnelProvider: subclass it and override startTunnel/stopTunnel.
open class NEPacketTunnelProvider: NETunnelProvider, @unchecked Sendable {
    /// The TUN: bound when settings are applied, unbound while they are removed.
    public let packetFlow = NEPacketTunnelFlow()

    public override init() { super.init() }

    /// Called once by the host. The default calls the async variant.
    open func startTunnel(options: [String: NSObject]? = nil, completionHandler: @escaping ((any Error)?) -> Void) {
        let call = Unchecked((options, completionHandler))
        Task { [self] in
            do { try await startTunnel(options: call.value.0); call.value.1(nil) } catch { call.value.1(error) }
        }
    }

    /// The default succeeds without doing anything.
    open func startTunnel(options: [String: NSObject]? = nil) async throws {}

    /// Called once by the host on SIGTERM/SIGINT (`tunnelgate down`). The default calls the async variant.
    open func stopTunnel(with reason: NEProviderStopReason, completionHandler: @escaping () -> Void) {
        let handler = Unchecked(completionHandler)
        Task { [self] in await stopTunnel(with: reason); handler.value() }
    }

    open func stopTunnel(with reason: NEProviderStopReason) async {}

    /// Applies the settings to the kernel through Tunnelgate's engine (a TUN,
    /// addresses, routes in the tunnel's own table, DNS), or removes them with nil.
    /// A second call while settings are applied replaces them (the TUN is
    /// recreated; armed reads carry over). The handler gets nil or an NSError in
    /// NETunnelProviderErrorDomain whose description is the engine's message.
    open func setTunnelNetworkSettings(_ tunnelNetworkSettings: NETunnelNetworkSettings?,
                                       completionHandler: (((any Error)?) -> Void)? = nil) {
        guard let system else {
            completionHandler?(NSError(domain: NETunnelProviderErrorDomain, code: NETunnelProviderError.networkSettingsFailed.rawValue,
                                       userInfo: [NSLocalizedDescriptionKey: "no Tunnelgate host runs this provider"]))
            return
        }
        let handler = Unchecked(completionHandler)
        system.setTunnelNetworkSettings(tunnelNetworkSettings, for: self) { error in handler.value?(error) }
    }

    open func setTunnelNetworkSettings(_ tunnelNetworkSettings: NETunnelNetworkSettings?) async throws {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            setTunnelNetworkSettings(tunnelNetworkSettings) { error in
                if let error { c.resume(throwing: error) } else { c.resume() }
            }
        }
    }

    /// Asks the host to stop: it removes the settings and exits (non-zero with an
    /// error). As on iOS, stopTunnel is not called afterwards.
    open func cancelTunnelWithError(_ error: (any Error)?) {
        system?.cancelTunnel(with: error, for: self)
    }
}
