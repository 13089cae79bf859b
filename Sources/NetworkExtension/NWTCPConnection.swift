import CTunnelgateTLS
import Foundation
import LinuxSystem
import Synchronization

/// NWTCPConnection: a provider's own TCP connection (`createTCPConnection(to:enableTLS:tlsParameters:delegate:)`),
/// outside the tunnel to any address, as on iOS: its socket is the packet plane's, so it carries the
/// tunnel's carrier identity, which a provider's tunnel exempts everywhere (docs/networkextension.md,
/// The provider's own connections).
///
/// The connection starts when it is made: the host name is resolved by the carrier resolver
/// (CarrierResolver), each address is tried in turn (routed ones first; 3 s each, the last 10 s), then
/// with TLS the handshake runs
/// (OpenSSL, CTunnelgateTLS) with the endpoint's host name as the server name, verified against the
/// system's trust store. `state` goes connecting → connected, or → disconnected with `error`; `cancel()`
/// makes it cancelled. Reads and writes are served in the order they were asked for, by the
/// connection's own thread; completion handlers and key-value notifications run on the connection's
/// serial queue, one at a time, in the order things happened.
open class NWTCPConnection: NSObject, TunnelgateObservable, @unchecked Sendable {
    // @unchecked Sendable: what changes is under `properties` or owned by the connection's thread.
    public let endpoint: NWEndpoint

    struct Properties {
        var state: NWTCPConnectionState = .connecting
        var isViable = false
        var hasBetterPath = false
        var error: (any Error)?
        var remote: NWEndpoint?
        var local: NWEndpoint?
        var keyValues: ConnectionKeyValues {
            ConnectionKeyValues(state: state.rawValue, isViable: isViable, hasBetterPath: hasBetterPath)
        }
    }
    let properties = Mutex(Properties())
    let keyValueObservers = KeyValueObservers(keyPaths: ConnectionKeyValues.keys)
    let callbacks = makeCallbackQueue("tunnelgate.tcp-connection")
    private let io: TCPConnectionIO

    public var state: NWTCPConnectionState { properties.withLock { $0.state } }
    /// True while connected (Linux has one path, the carrier's; there is no viability to lose otherwise).
    public var isViable: Bool { properties.withLock { $0.isViable } }
    /// Always false: Linux offers a provider no second path to move to.
    public var hasBetterPath: Bool { properties.withLock { $0.hasBetterPath } }
    /// Why the connection is disconnected: an NSError (NSPOSIXErrorDomain for the socket's errors,
    /// NSOSStatusErrorDomain for TLS, with OpenSSL's reason as its description).
    public var error: (any Error)? { properties.withLock { $0.error } }
    /// The address connected to, as an NWHostEndpoint of numeric text; nil until connected.
    public var remoteAddress: NWEndpoint? { properties.withLock { $0.remote } }
    public var localAddress: NWEndpoint? { properties.withLock { $0.local } }
    /// The carrier path while connected (its status `.satisfied`), else nil.
    public var connectedPath: NWPath? { isViable ? NWPath(status: .satisfied) : nil }
    /// Always nil (a Bonjour endpoint's TXT record: Bonjour endpoints cannot be connected to).
    public var txtRecord: Data? { nil }

    /// The TLS parameters it was made with (nil: no TLS), for `init(upgradeFor:)`.
    let tls: NWTLSParameters?

    init(endpoint: NWEndpoint, enableTLS: Bool, tlsParameters: NWTLSParameters?) {
        self.endpoint = endpoint
        tls = enableTLS ? (tlsParameters ?? NWTLSParameters()) : nil
        io = TCPConnectionIO(endpoint: endpoint, tls: enableTLS ? (tlsParameters ?? NWTLSParameters()) : nil)
        super.init()
        io.start(owner: self)
    }

    /// A new connection to the same endpoint with the same TLS (iOS: on the better path).
    /// `hasBetterPath` is never true on Linux, so this is only ever a fresh connection.
    public convenience init(upgradeFor connection: NWTCPConnection) {
        self.init(endpoint: connection.endpoint, enableTLS: connection.tls != nil, tlsParameters: connection.tls)
    }

    deinit { io.cancel() }

    /// Reads exactly `length` bytes (fewer only at the end of the stream, nil data when none are left).
    public func readLength(_ length: Int, completionHandler: @escaping (Data?, (any Error)?) -> Void) {
        readMinimumLength(length, maximumLength: length, completionHandler: completionHandler)
    }

    /// Reads at least `minimum` and at most `maximumLength` bytes.
    public func readMinimumLength(_ minimum: Int, maximumLength: Int, completionHandler: @escaping (Data?, (any Error)?) -> Void) {
        let handler = Unchecked(completionHandler)
        io.read(minimum: max(0, minimum), maximum: max(1, max(minimum, maximumLength))) { data, error in handler.value(data, error) }
    }

    /// Writes all of `data`; the handler gets nil when the kernel has taken it all.
    public func write(_ data: Data, completionHandler: @escaping ((any Error)?) -> Void) {
        let handler = Unchecked(completionHandler)
        io.write(Array(data)) { error in handler.value(error) }
    }

    /// After the writes asked for before: TLS close_notify (with TLS), then a TCP FIN; reading goes on.
    public func writeClose() { io.writeClose() }

    /// Ends the connection: state cancelled, outstanding reads and writes fail with ECANCELED.
    public func cancel() { io.cancel() }

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

    /// Swift's block-based observation: `\.state`, `\.isViable` or `\.hasBetterPath`.
    public func observe<Value>(_ keyPath: KeyPath<NWTCPConnection, Value>, options: NSKeyValueObservingOptions = [],
                               changeHandler: @escaping (NWTCPConnection, NSKeyValueObservedChange<Value>) -> Void) -> NSKeyValueObservation {
        let key = ConnectionKeyValues.key(keyPath, state: \NWTCPConnection.state, isViable: \NWTCPConnection.isViable,
                                          hasBetterPath: \NWTCPConnection.hasBetterPath)
        return observe(key: key, options: options, read: ConnectionKeyValues.reader(key: key) { NWTCPConnectionState(rawValue: $0) },
                       changeHandler: changeHandler)
    }

    func observableValue(forKey key: String) -> Any { properties.withLock { $0.keyValues }.boxed(forKey: key) }

    /// Called by the connection's thread: changes the properties and, on the callback queue, tells the
    /// observers of each one that changed (state last, so an observer of state sees the rest already set).
    func update(_ change: @escaping @Sendable (inout Properties) -> Void) {
        callbacks.async { [self] in
            let (old, new) = properties.withLock { p -> (Properties, Properties) in
                let before = p
                change(&p)
                return (before, p)
            }
            ConnectionKeyValues.notify(keyValueObservers, of: self, old: old.keyValues, new: new.keyValues)
        }
    }
}

/// The errors provider connections report, as iOS's domains hold them.
enum ConnectionError {
    static func posix(_ errno: Errno, _ message: String) -> NSError {
        NSError(domain: NSPOSIXErrorDomain, code: Int(errno.rawValue), userInfo: [NSLocalizedDescriptionKey: message])
    }
    static func posix(_ error: SystemCallError) -> NSError { posix(error.errno, error.description) }

    /// A TLS failure: errSSLXCertChainInvalid (-9807) when the certificate or its name did not verify,
    /// errSSLProtocol (-9800) otherwise; the description is OpenSSL's.
    static func tls(_ message: String) -> NSError {
        let code = message.contains("certificate verification failed") ? -9807 : -9800
        return NSError(domain: NSOSStatusErrorDomain, code: code, userInfo: [NSLocalizedDescriptionKey: message])
    }

    /// A host name that did not resolve: kDNSServiceErr_NoSuchRecord (-65554) in the DNS domain iOS uses.
    static func resolution(_ message: String) -> NSError {
        NSError(domain: "kNWErrorDomainDNS", code: -65554, userInfo: [NSLocalizedDescriptionKey: message])
    }

    /// An endpoint that cannot be used (EINVAL).
    static func endpoint(_ problem: TunnelgateEndpointProblem) -> NSError {
        NSError(domain: NSPOSIXErrorDomain, code: 22, userInfo: [NSLocalizedDescriptionKey: problem.description])
    }

    static var cancelled: NSError { posix(.canceled, "the connection was cancelled") }
}

/// The connection's thread and what it serves: connect, TLS, reads and writes over a non-blocking
/// socket, woken through a pipe when asked for something.
final class TCPConnectionIO: @unchecked Sendable {
    // @unchecked Sendable: `pending` is a Mutex; the socket and TLS session belong to the thread.
    typealias ReadHandler = @Sendable (Data?, (any Error)?) -> Void
    typealias WriteHandler = @Sendable ((any Error)?) -> Void

    private struct Pending {
        var reads: [(minimum: Int, maximum: Int, handler: ReadHandler)] = []
        var writes: [(bytes: [UInt8], handler: WriteHandler)] = []
        var writeClose = false
        var cancelled = false
        var finished = false
    }

    private let endpoint: NWEndpoint
    private let tls: NWTLSParameters?
    private let pending = Mutex(Pending())
    private let wake: (read: FileDescriptor, write: FileDescriptor)?
    /// Why there is no wake-up pipe (pipe(2)'s error), for the failure the thread reports.
    private let wakeFailure: SystemCallError?
    private var callbacks: DispatchQueue?

    static let trustStoreFile = "/etc/ssl/certs/ca-certificates.crt"
    static let trustStoreDirectory = "/etc/ssl/certs"
    static let connectTimeoutMilliseconds: Int32 = 10_000

    init(endpoint: NWEndpoint, tls: NWTLSParameters?) {
        self.endpoint = endpoint
        self.tls = tls
        do throws(SystemCallError) {
            wake = try FileDescriptor.pipe()
            wakeFailure = nil
        } catch {
            wake = nil
            wakeFailure = error
        }
    }

    // The pipe outlives the thread (which holds this object while it runs): a cancel() after the end
    // writes to it harmlessly, never to a descriptor number used again for something else.
    deinit {
        wake?.read.close()
        wake?.write.close()
    }

    func start(owner: NWTCPConnection) {
        callbacks = owner.callbacks
        let thread = Thread { [self] in run(owner: owner) }
        thread.name = "tunnelgate.tcp"
        thread.start()
    }

    private func poke() {
        guard let wake else { return }
        // EAGAIN: the pipe is full, so the thread is woken already.
        _ = try? wake.write.writeAll([1])
    }

    func read(minimum: Int, maximum: Int, _ handler: @escaping ReadHandler) {
        let refused = pending.withLock { p -> Bool in
            if p.finished { return true }
            p.reads.append((minimum, maximum, handler))
            return false
        }
        if refused { deliver { handler(nil, self.finalError()) } } else { poke() }
    }

    func write(_ bytes: [UInt8], _ handler: @escaping WriteHandler) {
        let refused = pending.withLock { p -> Bool in
            if p.finished || p.writeClose { return true }
            p.writes.append((bytes, handler))
            return false
        }
        if refused { deliver { handler(self.finalError() ?? ConnectionError.posix(.brokenPipe, "writeClose() was called: the connection writes no more")) } } else { poke() }
    }

    func writeClose() { pending.withLock { $0.writeClose = true }; poke() }
    func cancel() { pending.withLock { $0.cancelled = true }; poke() }

    private let finalErrorBox = Mutex<NSError?>(nil)
    private func finalError() -> NSError? { finalErrorBox.withLock { $0 } }

    private func deliver(_ body: @escaping @Sendable () -> Void) {
        (callbacks ?? DispatchQueue.global()).async(execute: body)
    }

    // The connection's thread. It holds the owner strongly while it runs (as an iOS connection stays
    // alive while connected) and lets go when the connection is over.
    private func run(owner: NWTCPConnection) {
        var connection: NWTCPConnection? = owner
        defer { connection = nil }
        guard let wake else {
            finish(connection, state: .disconnected, error: wakeFailure.map(ConnectionError.posix) ?? ConnectionError.cancelled)
            return
        }
        let parsed: ParsedEndpoint
        do throws(TunnelgateEndpointProblem) {
            parsed = try ParsedEndpoint.parse(endpoint, services: ServiceNames.port(tcp: true))
        } catch {
            finish(connection, state: .disconnected, error: ConnectionError.endpoint(error))
            return
        }
        let addresses: [SocketAddress]
        do throws(CarrierResolver.Failure) {
            addresses = try CarrierResolver.resolve(parsed.host, port: parsed.port) { self.isCancelled }
        } catch {
            finish(connection, state: isCancelled ? .cancelled : .disconnected,
                   error: isCancelled ? ConnectionError.cancelled : ConnectionError.resolution(error.description))
            return
        }
        var socket: FileDescriptor?
        var problems: [String] = []
        let ordered = Self.routedFirst(addresses)
        for (i, address) in ordered.enumerated() {
            if isCancelled { break }
            // An address that is not the last gets 3 s: a path that drops (a kill switch without that
            // family) must not hold the next address back for long.
            let timeout: Int32 = i == ordered.count - 1 ? Self.connectTimeoutMilliseconds : 3_000
            switch connect(address, wake: wake.read, timeout: timeout) {
            case .success(let s): socket = s
            case .failure(let e): problems.append(e.description)
            }
            if socket != nil { break }
        }
        if isCancelled {
            socket?.close()
            finish(connection, state: .cancelled, error: ConnectionError.cancelled)
            return
        }
        guard let socket else {
            finish(connection, state: .disconnected,
                   error: ConnectionError.posix(.notConnected, "\(endpoint): could not connect: \(problems.joined(separator: "; "))"))
            return
        }
        defer { socket.close() }
        var session: OpaquePointer?
        if let tls {
            switch handshake(socket, serverName: parsed.hostText, parameters: tls, wake: wake.read) {
            case .success(let s): session = s
            case .failure(let e):
                finish(connection, state: isCancelled ? .cancelled : .disconnected, error: isCancelled ? ConnectionError.cancelled : e)
                return
            }
        }
        defer { if let session { CTunnelgateTLS_free(session) } }
        let remote = (try? socket.peerAddress()).flatMap { $0 }.map(Self.endpoint)
        let local = (try? socket.localAddress()).flatMap { $0 }.map(Self.endpoint)
        connection?.update { p in
            p.remote = remote
            p.local = local
            p.isViable = true
            p.state = .connected
        }
        let outcome = serve(socket, session: session, wake: wake.read)
        finish(connection, state: outcome.state, error: outcome.error)
    }

    /// A C error buffer's text (up to its NUL).
    static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private var isCancelled: Bool { pending.withLock { $0.cancelled } }

    static func endpoint(_ address: SocketAddress) -> NWHostEndpoint {
        NWHostEndpoint(hostname: address.numericHost ?? "\(address)", port: String(address.port ?? 0))
    }

    /// Everything that is left fails, the state is final.
    private func finish(_ connection: NWTCPConnection?, state: NWTCPConnectionState, error: NSError?) {
        finalErrorBox.withLock { $0 = error ?? ConnectionError.posix(.notConnected, "the connection is \(state == .cancelled ? "cancelled" : "closed")") }
        let left = pending.withLock { p -> Pending in
            let l = p
            p.reads = []
            p.writes = []
            p.finished = true
            return l
        }
        let failure = finalError()
        connection?.update { p in
            p.isViable = false
            if state != .cancelled || p.state != .disconnected { p.state = state }
            if p.error == nil { p.error = error }
        }
        for r in left.reads { deliver { r.handler(nil, failure) } }
        for w in left.writes { deliver { w.handler(failure) } }
    }

    /// Waits for `socket` to be `events` or the wake pipe readable; false on timeout or a wake-up.
    private func wait(_ socket: FileDescriptor, _ events: PollSet.Events, wake: FileDescriptor, timeout: Int32) throws(SystemCallError) -> Bool {
        var set = PollSet()
        set.add(socket, events)
        set.add(wake, .readable)
        let n = try set.wait(timeoutMilliseconds: timeout)
        if set.events(at: 1).contains(.readable) { drain(wake) }
        return n > 0 && !set.events(at: 0).isEmpty
    }

    private func drain(_ wake: FileDescriptor) {
        var buffer = [UInt8](repeating: 0, count: 64)
        while let n = (try? wake.read(into: &buffer)) ?? nil, n > 0 {}
    }

    /// The addresses the kernel has a route for first (a UDP socket's connect: a route lookup, no
    /// packet), the others after them, each group in the resolver's order.
    static func routedFirst(_ addresses: [SocketAddress]) -> [SocketAddress] {
        func routed(_ a: SocketAddress) -> Bool {
            guard let probe = try? FileDescriptor.socket(family: a.family, type: .datagram, nonBlocking: true) else { return false }
            defer { probe.close() }
            return (try? probe.connect(to: a)) != nil
        }
        let marks = addresses.map(routed)
        return zip(addresses, marks).filter { $0.1 }.map(\.0) + zip(addresses, marks).filter { !$0.1 }.map(\.0)
    }

    private func connect(_ address: SocketAddress, wake: FileDescriptor, timeout: Int32) -> Result<FileDescriptor, SystemCallError> {
        let socket: FileDescriptor
        do throws(SystemCallError) {
            socket = try FileDescriptor.socket(family: address.family, type: .stream, nonBlocking: true)
        } catch { return .failure(error) }
        do throws(SystemCallError) {
            if try socket.connect(to: address) { return .success(socket) }
        } catch {
            socket.close()
            return .failure(error)
        }
        let deadline = ProcessControl.monotonicSeconds() + Double(timeout) / 1000
        while !isCancelled {
            let left = Int32(max(0, (deadline - ProcessControl.monotonicSeconds()) * 1000))
            if left == 0 { break }
            let ready: Bool
            do throws(SystemCallError) { ready = try wait(socket, .writable, wake: wake, timeout: left) } catch {
                socket.close()
                return .failure(error)
            }
            if ready {
                do throws(SystemCallError) {
                    if let e = try socket.pendingError() {
                        socket.close()
                        return .failure(SystemCallError("connect(\(address))", e))
                    }
                    return .success(socket)
                } catch {
                    socket.close()
                    return .failure(error)
                }
            }
        }
        socket.close()
        return .failure(SystemCallError("connect(\(address))", isCancelled ? .canceled : .timedOut))
    }

    private func handshake(_ socket: FileDescriptor, serverName: String, parameters: NWTLSParameters,
                           wake: FileDescriptor) -> Result<OpaquePointer, NSError> {
        guard let minimum = NWTLSParameters.openSSLVersion(parameters.minimumSSLProtocolVersion),
              let maximum = NWTLSParameters.openSSLVersion(parameters.maximumSSLProtocolVersion) else {
            return .failure(ConnectionError.tls("tlsParameters: SSL protocol version \(parameters.minimumSSLProtocolVersion)/\(parameters.maximumSSLProtocolVersion) is not TLS 1.0-1.3"))
        }
        var error = [CChar](repeating: 0, count: 512)
        let file = FileSystem.exists(Self.trustStoreFile) ? Self.trustStoreFile : nil
        guard let session = CTunnelgateTLS_client(socket.rawValue, serverName, file, Self.trustStoreDirectory, minimum, maximum, &error, error.count) else {
            return .failure(ConnectionError.tls(Self.text(error)))
        }
        let deadline = ProcessControl.monotonicSeconds() + Double(Self.connectTimeoutMilliseconds) / 1000
        while true {
            let rc = CTunnelgateTLS_handshake(session, &error, error.count)
            if rc == CTunnelgateTLS_done { return .success(session) }
            let left = Int32(max(0, (deadline - ProcessControl.monotonicSeconds()) * 1000))
            if rc == CTunnelgateTLS_failed || left == 0 || isCancelled {
                CTunnelgateTLS_free(session)
                return .failure(ConnectionError.tls(rc == CTunnelgateTLS_failed ? Self.text(error) : "TLS handshake with \(endpoint): no answer within 10 s"))
            }
            do throws(SystemCallError) {
                _ = try wait(socket, rc == CTunnelgateTLS_want_write ? .writable : .readable, wake: wake, timeout: left)
            } catch {
                CTunnelgateTLS_free(session)
                return .failure(ConnectionError.posix(error))
            }
        }
    }

    /// Serves reads and writes until the end: cancelled, a failure, or the stream's end with nothing
    /// left to write.
    private func serve(_ socket: FileDescriptor, session: OpaquePointer?, wake: FileDescriptor) -> (state: NWTCPConnectionState, error: NSError?) {
        var inbound: [UInt8] = []
        var atEnd = false
        var writeOffset = 0
        var closedWriting = false
        var buffer = [UInt8](repeating: 0, count: 65536)
        var error = [CChar](repeating: 0, count: 512)
        while true {
            let now = pending.withLock { $0 }
            if now.cancelled { return (.cancelled, ConnectionError.cancelled) }
            var wantRead = false, wantWrite = false

            // Writes, in order.
            if let head = now.writes.first {
                let left = head.bytes.count - writeOffset
                var n = 0
                if left > 0 {
                    if let session {
                        n = head.bytes.withUnsafeBytes { CTunnelgateTLS_write(session, $0.baseAddress! + writeOffset, left, &error, error.count) }
                    } else {
                        do throws(SystemCallError) {
                            n = try socket.send(head.bytes, from: writeOffset) ?? CTunnelgateTLS_want_write
                        } catch { return (.disconnected, ConnectionError.posix(error)) }
                    }
                }
                if n == CTunnelgateTLS_failed { return (.disconnected, ConnectionError.tls(Self.text(error))) }
                if n == CTunnelgateTLS_want_write { wantWrite = true } else if n == CTunnelgateTLS_want_read { wantRead = true } else {
                    writeOffset += n
                    if writeOffset == head.bytes.count {
                        writeOffset = 0
                        let done = pending.withLock { $0.writes.removeFirst() }
                        deliver { done.handler(nil) }
                        continue
                    }
                    continue
                }
            } else if now.writeClose && !closedWriting {
                // close_notify is sent when the socket takes it; a peer that reset the connection is
                // seen by the next read, so neither result changes what happens here.
                if let session { _ = CTunnelgateTLS_shutdown(session) }
                _ = try? socket.shutdownWriting()
                closedWriting = true
            }

            // Reads, in order.
            if let head = now.reads.first {
                if inbound.count >= max(head.minimum, 1) || (atEnd && !inbound.isEmpty) {
                    let count = min(head.maximum, inbound.count)
                    let data = Data(inbound[0..<count])
                    inbound.removeFirst(count)
                    let done = pending.withLock { $0.reads.removeFirst() }
                    deliver { done.handler(data, nil) }
                    continue
                }
                if atEnd {
                    let done = pending.withLock { $0.reads.removeFirst() }
                    deliver { done.handler(nil, nil) }
                    continue
                }
                var n = 0
                if let session {
                    n = buffer.withUnsafeMutableBytes { CTunnelgateTLS_read(session, $0.baseAddress!, $0.count, &error, error.count) }
                } else {
                    do throws(SystemCallError) {
                        n = try socket.read(into: &buffer).map { $0 == 0 ? CTunnelgateTLS_closed : $0 } ?? CTunnelgateTLS_want_read
                    } catch { return (.disconnected, ConnectionError.posix(error)) }
                }
                switch n {
                case CTunnelgateTLS_failed: return (.disconnected, ConnectionError.tls(Self.text(error)))
                case CTunnelgateTLS_closed: atEnd = true; continue
                case CTunnelgateTLS_want_read: wantRead = true
                case CTunnelgateTLS_want_write: wantWrite = true
                default: inbound += buffer[0..<n]; continue
                }
            }
            // The stream ended, what it brought was read, and nothing is asked: the connection is over.
            if atEnd && inbound.isEmpty && now.reads.isEmpty && now.writes.isEmpty { return (.disconnected, nil) }
            var events: PollSet.Events = []
            if wantRead { events.insert(.readable) }
            if wantWrite { events.insert(.writable) }
            var set = PollSet()
            set.add(wake, .readable)
            if !atEnd { set.add(socket, events) }
            do throws(SystemCallError) { _ = try set.wait(timeoutMilliseconds: -1) } catch {
                return (.disconnected, ConnectionError.posix(error))
            }
            if set.events(at: 0).contains(.readable) { drain(wake) }
            if !atEnd {
                let happened = set.events(at: 1)
                if happened.contains(.error), let e = (try? socket.pendingError()) ?? nil {
                    return (.disconnected, ConnectionError.posix(e, "\(endpoint): \(e)"))
                }
                if happened.contains(.hangUp) && !events.contains(.readable) {
                    // The peer is gone while nobody reads: keep what it sent (the kernel's buffer, and
                    // what TLS holds), then the stream is at its end, and the socket is polled no more.
                    while true {
                        let n: Int
                        if let session {
                            n = buffer.withUnsafeMutableBytes { CTunnelgateTLS_read(session, $0.baseAddress!, $0.count, &error, error.count) }
                        } else {
                            n = ((try? socket.read(into: &buffer)) ?? nil) ?? 0
                        }
                        guard n > 0 else { break }
                        inbound += buffer[0..<n]
                    }
                    atEnd = true
                }
            }
        }
    }
}

extension ParsedEndpoint {
    /// The host as TLS names it: the address's text, or the name.
    var hostText: String {
        switch host {
        case .address(let a): a
        case .name(let n): n
        }
    }
}

/// Service names in /etc/services (`https` → 443), as an NWHostEndpoint's port may be.
enum ServiceNames {
    static func port(tcp: Bool) -> (String) -> UInt16? {
        { name in
            let text = ((try? FileSystem.read("/etc/services")) ?? nil).map { String(decoding: $0, as: UTF8.self) } ?? ""
            return port(of: name, protocol: tcp ? "tcp" : "udp", inServices: text)
        }
    }

    /// `NAME PORT/PROTO [ALIASES…]` lines; comments after `#`. Pure.
    static func port(of name: String, protocol proto: String, inServices text: String) -> UInt16? {
        for line in text.split(whereSeparator: \.isNewline) {
            let words = (line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
                .split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard words.count >= 2 else { continue }
            let portProto = words[1].split(separator: "/")
            guard portProto.count == 2, portProto[1] == proto, let port = UInt16(portProto[0]) else { continue }
            if words[0] == name || words.dropFirst(2).contains(where: { $0 == name }) { return port }
        }
        return nil
    }
}
