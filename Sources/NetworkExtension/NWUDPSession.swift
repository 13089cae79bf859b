import Foundation
import LinuxSystem
import Synchronization

/// NWUDPSession: a provider's own UDP flow (`createUDPSession(to:from:)`), outside the tunnel to any
/// address, as on iOS (the plane's socket: the tunnel's carrier identity, exempt everywhere for a
/// provider's tunnel). The host name is resolved by the carrier
/// resolver, the socket bound to the local endpoint when one is given and connected to the first
/// address: `state` goes preparing → ready, or → failed. Datagrams written before ready wait for it.
/// The read handler gets the datagrams that arrived together, at most `maxDatagrams` a call, on the
/// session's serial queue, as key-value notifications and write completions are.
open class NWUDPSession: NSObject, TunnelgateObservable, @unchecked Sendable {
    // @unchecked Sendable: what changes is under `properties` or `pending`, or owned by the session's thread.
    public let endpoint: NWEndpoint

    struct Properties {
        var state: NWUDPSessionState = .preparing
        var isViable = false
        var hasBetterPath = false
        var resolved: NWEndpoint?
        var error: NSError?
        var keyValues: ConnectionKeyValues {
            ConnectionKeyValues(state: state.rawValue, isViable: isViable, hasBetterPath: hasBetterPath)
        }
    }
    let properties = Mutex(Properties())
    let keyValueObservers = KeyValueObservers(keyPaths: ConnectionKeyValues.keys)
    let callbacks = makeCallbackQueue("tunnelgate.udp-session")

    private struct Pending {
        var writes: [(datagrams: [[UInt8]], handler: @Sendable ((any Error)?) -> Void)] = []
        var reader: (handler: @Sendable ([Data]?, (any Error)?) -> Void, max: Int)?
        var cancelled = false
        var finished = false
    }
    private let pending = Mutex(Pending())
    private let wake: (read: FileDescriptor, write: FileDescriptor)?
    /// Why there is no wake-up pipe (pipe(2)'s error), for the failure the thread reports.
    private let wakeFailure: SystemCallError?
    private let local: NWHostEndpoint?

    public var state: NWUDPSessionState { properties.withLock { $0.state } }
    public var isViable: Bool { properties.withLock { $0.isViable } }
    /// Always false (see NWTCPConnection.hasBetterPath).
    public var hasBetterPath: Bool { properties.withLock { $0.hasBetterPath } }
    /// The address the session sends to, once ready.
    public var resolvedEndpoint: NWEndpoint? { properties.withLock { $0.resolved } }
    /// The carrier path while ready, else nil.
    public var currentPath: NWPath? { isViable ? NWPath(status: .satisfied) : nil }
    /// The largest datagram a write takes: 65507 bytes for IPv4, 65527 for IPv6 (the kernel fragments
    /// what does not fit the path).
    public var maximumDatagramLength: Int {
        guard let r = resolvedEndpoint as? NWHostEndpoint else { return 0 }
        return r.hostname.contains(":") ? 65527 : 65507
    }

    init(endpoint: NWEndpoint, local: NWHostEndpoint?) {
        self.endpoint = endpoint
        self.local = local
        do throws(SystemCallError) {
            wake = try FileDescriptor.pipe()
            wakeFailure = nil
        } catch {
            wake = nil
            wakeFailure = error
        }
        super.init()
        let thread = Thread { [self] in run() }
        thread.name = "tunnelgate.udp"
        thread.start()
    }

    /// A new session to the same endpoint from the same local endpoint (iOS: on the better path).
    /// `hasBetterPath` is never true on Linux, so this is only ever a fresh session.
    public convenience init(upgradeFor session: NWUDPSession) {
        self.init(endpoint: session.endpoint, local: session.local)
    }

    /// Receives datagrams: `handler` gets arrays of at most `maxDatagrams` (at least 1) of them; with
    /// nil and an error when the session fails. A second call replaces the handler.
    public func setReadHandler(_ handler: @escaping ([Data]?, (any Error)?) -> Void, maxDatagrams: Int) {
        let h = Unchecked(handler)
        pending.withLock { $0.reader = ({ d, e in h.value(d, e) }, max(1, maxDatagrams)) }
        poke()
    }

    public func writeDatagram(_ datagram: Data, completionHandler: @escaping ((any Error)?) -> Void) {
        writeMultipleDatagrams([datagram], completionHandler: completionHandler)
    }

    /// Sends each datagram, in order; the handler gets nil when all were sent, or the first error.
    public func writeMultipleDatagrams(_ datagramArray: [Data], completionHandler: @escaping ((any Error)?) -> Void) {
        let h = Unchecked(completionHandler)
        let refused = pending.withLock { p -> Bool in
            if p.finished { return true }
            p.writes.append((datagramArray.map { Array($0) }, { e in h.value(e) }))
            return false
        }
        if refused {
            let e = properties.withLock { $0.error } ?? ConnectionError.posix(.notConnected, "the session is over")
            callbacks.async { h.value(e) }
        } else { poke() }
    }

    /// Not on Linux: there is one resolved address in use, and no other is tried. Does nothing.
    public func tryNextResolvedEndpoint() {}

    /// Ends the session: state cancelled, writes still waiting fail with ECANCELED.
    public func cancel() { pending.withLock { $0.cancelled = true }; poke() }

    // The thread holds the session while it runs, so this runs after it ended: the pipe goes last.
    deinit {
        wake?.read.close()
        wake?.write.close()
    }

    // MARK: Key-value observing

    public func addObserver(_ observer: NSObject, forKeyPath keyPath: String, options: NSKeyValueObservingOptions = [],
                            context: UnsafeMutableRawPointer?) {
        register(observer, keyPath: keyPath, options: options, context: context)
    }

    public func removeObserver(_ observer: NSObject, forKeyPath keyPath: String) {
        unregister(observer, keyPath: keyPath, context: nil, matchingContext: false)
    }

    public func removeObserver(_ observer: NSObject, forKeyPath keyPath: String, context: UnsafeMutableRawPointer?) {
        unregister(observer, keyPath: keyPath, context: context, matchingContext: true)
    }

    public func observe<Value>(_ keyPath: KeyPath<NWUDPSession, Value>, options: NSKeyValueObservingOptions = [],
                               changeHandler: @escaping (NWUDPSession, NSKeyValueObservedChange<Value>) -> Void) -> NSKeyValueObservation {
        let key = ConnectionKeyValues.key(keyPath, state: \NWUDPSession.state, isViable: \NWUDPSession.isViable,
                                          hasBetterPath: \NWUDPSession.hasBetterPath)
        return observe(key: key, options: options, read: ConnectionKeyValues.reader(key: key) { NWUDPSessionState(rawValue: $0) },
                       changeHandler: changeHandler)
    }

    func observableValue(forKey key: String) -> Any { properties.withLock { $0.keyValues }.boxed(forKey: key) }

    private func update(_ change: @escaping @Sendable (inout Properties) -> Void) {
        callbacks.async { [self] in
            let (old, new) = properties.withLock { p -> (Properties, Properties) in
                let before = p
                change(&p)
                return (before, p)
            }
            ConnectionKeyValues.notify(keyValueObservers, of: self, old: old.keyValues, new: new.keyValues)
        }
    }

    private func poke() {
        guard let wake else { return }
        // EAGAIN: the pipe is full, so the thread is woken already.
        _ = try? wake.write.writeAll([1])
    }

    // The session's thread: holds the session while it runs.
    private func run() {
        guard let wake else { return finish(.failed, wakeFailure.map(ConnectionError.posix) ?? ConnectionError.cancelled) }
        let parsed: ParsedEndpoint
        let localAddress: SocketAddress?
        do throws(TunnelgateEndpointProblem) {
            parsed = try ParsedEndpoint.parse(endpoint, services: ServiceNames.port(tcp: false))
            if let local {
                let l = try ParsedEndpoint.parse(local, allowZeroPort: true, services: ServiceNames.port(tcp: false))
                guard case .address(let text) = l.host, let a = CarrierResolver.socketAddress(literal: text, port: l.port) else {
                    throw .invalidHostname(local.hostname)
                }
                localAddress = a
            } else {
                localAddress = nil
            }
        } catch {
            return finish(.failed, ConnectionError.endpoint(error))
        }
        let addresses: [SocketAddress]
        do throws(CarrierResolver.Failure) {
            addresses = try CarrierResolver.resolve(parsed.host, port: parsed.port) { self.pending.withLock { $0.cancelled } }
        } catch {
            return finish(.failed, ConnectionError.resolution(error.description))
        }
        guard let remote = TCPConnectionIO.routedFirst(addresses).first(where: { localAddress == nil || $0.family == localAddress!.family }) else {
            return finish(.failed, ConnectionError.posix(.familyNotSupported, "\(endpoint): no address of the local endpoint's family"))
        }
        let socket: FileDescriptor
        do throws(SystemCallError) {
            socket = try FileDescriptor.socket(family: remote.family, type: .datagram, nonBlocking: true)
        } catch { return finish(.failed, ConnectionError.posix(error)) }
        defer { socket.close() }
        do throws(SystemCallError) {
            if let localAddress { try socket.bind(to: localAddress) }
            try socket.connect(to: remote)
        } catch { return finish(.failed, ConnectionError.posix(error)) }
        let resolved = TCPConnectionIO.endpoint(remote)
        update { p in p.resolved = resolved; p.isViable = true; p.state = .ready }
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let now = pending.withLock { $0 }
            if now.cancelled { return finish(.cancelled, ConnectionError.cancelled) }
            var blocked = false
            if let write = now.writes.first {
                var failure: NSError?
                for d in write.datagrams {
                    do throws(SystemCallError) {
                        if try socket.send(d) == nil { blocked = true; break }
                    } catch {
                        failure = ConnectionError.posix(error)
                        break
                    }
                }
                if !blocked || failure != nil {
                    // A batch is sent whole or, when the buffer filled, again from its start (UDP keeps no
                    // order promise across a full buffer either); an error ends the batch.
                    let done = pending.withLock { $0.writes.removeFirst() }
                    callbacks.async { [failure] in done.handler(failure) }
                    continue
                }
            }
            if let reader = now.reader {
                var batch: [Data] = []
                var failure: NSError?
                while batch.count < reader.max {
                    do throws(SystemCallError) {
                        guard let n = try socket.receive(into: &buffer) else { break }
                        batch.append(Data(buffer[0..<n]))
                    } catch {
                        // ECONNREFUSED: an ICMP port unreachable for an earlier datagram; the session goes on.
                        if error.errno != .connectionRefused { failure = ConnectionError.posix(error) }
                        break
                    }
                }
                if !batch.isEmpty { callbacks.async { [batch] in reader.handler(batch, nil) } }
                if let failure {
                    callbacks.async { reader.handler(nil, failure) }
                    return finish(.failed, failure)
                }
                if batch.count == reader.max { continue }
            }
            var set = PollSet()
            set.add(wake.read, .readable)
            var events: PollSet.Events = []
            if now.reader != nil { events.insert(.readable) }
            if blocked { events.insert(.writable) }
            set.add(socket, events)
            do throws(SystemCallError) { _ = try set.wait(timeoutMilliseconds: -1) } catch {
                return finish(.failed, ConnectionError.posix(error))
            }
            if set.events(at: 1).contains(.error) && now.reader == nil {
                // An ICMP error for an earlier datagram (ECONNREFUSED) while nobody reads: SO_ERROR
                // reads and clears it, or poll would report it again at once. It is no failure.
                _ = try? socket.pendingError()
            }
            if set.events(at: 0).contains(.readable) {
                var drain = [UInt8](repeating: 0, count: 64)
                while let n = (try? wake.read.read(into: &drain)) ?? nil, n > 0 {}
            }
        }
    }

    private func finish(_ state: NWUDPSessionState, _ error: NSError) {
        let left = pending.withLock { p -> Pending in
            let l = p
            p.writes = []
            p.finished = true
            return l
        }
        update { p in p.isViable = false; p.state = state; if p.error == nil { p.error = error } }
        for w in left.writes { callbacks.async { w.handler(error) } }
    }
}
