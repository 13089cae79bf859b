import LinuxSystem

/// The split-DNS forwarder's event loop: everything runs on the one thread
/// that calls `run()`, over non-blocking sockets and poll(2). Not shared:
/// created, run and discarded on the forwarder's thread.
final class ForwarderLoop {
    private let configuration: SplitDNSForwarder.Configuration
    private let listeners: SplitDNSForwarder.Listeners
    private let wake: FileDescriptor
    private let counters: ForwarderCounters

    /// Where a query came from, and so where its answer goes.
    private enum Origin {
        case datagram(SocketAddress)
        case stream(client: Int)
    }

    /// How far an upstream try is.
    private enum Phase {
        case datagram            // sent; waiting for the answer datagram
        case connecting          // TCP connect in progress
        case writing(offset: Int)
        case reading
    }

    /// One query relayed upstream.
    private struct Exchange {
        var origin: Origin
        var clientID: UInt16
        /// The query as sent upstream: its id is the current try's random id.
        var query: DNSQuery
        /// The message as sent upstream (the client's, with the current try's id).
        var message: [UInt8]
        var servers: [SocketAddress]
        var bindsToTunnel: Bool
        /// The largest answer a UDP client takes: its EDNS payload size, else 512.
        var clientLimit: Int
        /// Index into `servers` of the server being tried.
        var attempt = 0
        /// This try is over TCP: the client came over TCP, or the server's UDP answer was truncated.
        var overStream = false
        var socket: FileDescriptor?
        var phase = Phase.datagram
        var received: [UInt8] = []
        var deadline = 0.0
    }

    /// One TCP client.
    private struct Client {
        var socket: FileDescriptor
        var inbound: [UInt8] = []
        var outbound: [UInt8] = []
        var inFlight = 0
        var readClosed = false
        var deadline: Double
    }

    private enum Slot {
        case wake, datagramListener, streamListener
        case client(Int)
        case exchange(Int)
    }

    private var exchanges: [Int: Exchange] = [:]
    private var clients: [Int: Client] = [:]
    private var nextKey = 0
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: DNSQuery.maximumMessageLength + 1, alignment: 8)
    private var random = SystemRandomNumberGenerator()

    /// Datagrams read from the listener per poll round, so that TCP and upstream sockets get their turn.
    private static let datagramBatch = 64
    /// A TCP client whose unsent answers exceed this is closed (it does not read them).
    private static let maximumOutbound = 1 << 20

    init(configuration: SplitDNSForwarder.Configuration, listeners: SplitDNSForwarder.Listeners,
         wake: FileDescriptor, counters: ForwarderCounters) {
        self.configuration = configuration
        self.listeners = listeners
        self.wake = wake
        self.counters = counters
    }

    deinit { buffer.deallocate() }

    /// Serves until the wake descriptor becomes readable; then closes every
    /// socket it has. Returns the error that ended it early, if one did.
    func run() -> SystemCallError? {
        defer { closeAll() }
        var poll = PollSet()
        var slots: [Slot] = []
        while true {
            poll.removeAll()
            slots.removeAll(keepingCapacity: true)
            poll.add(wake, .readable); slots.append(.wake)
            poll.add(listeners.datagram, .readable); slots.append(.datagramListener)
            if clients.count < configuration.maximumConnections {
                poll.add(listeners.stream, .readable); slots.append(.streamListener)
            }
            for (key, client) in clients {
                var events: PollSet.Events = []
                if wantsToRead(client) { events.insert(.readable) }
                if !client.outbound.isEmpty { events.insert(.writable) }
                poll.add(client.socket, events); slots.append(.client(key))
            }
            for (key, exchange) in exchanges {
                guard let socket = exchange.socket else { continue }
                switch exchange.phase {
                case .datagram, .reading: poll.add(socket, .readable)
                case .connecting, .writing: poll.add(socket, .writable)
                }
                slots.append(.exchange(key))
            }

            do throws(SystemCallError) {
                _ = try poll.wait(timeoutMilliseconds: timeout(now: ProcessControl.monotonicSeconds()))
            } catch {
                return error
            }

            for (index, slot) in slots.enumerated() {
                let events = poll.events(at: index)
                guard !events.isEmpty else { continue }
                switch slot {
                case .wake: return nil
                case .datagramListener: readDatagramQueries()
                case .streamListener: acceptClients()
                case .client(let key): serviceClient(key, events)
                case .exchange(let key): serviceExchange(key, events)
                }
            }
            expire(now: ProcessControl.monotonicSeconds())
        }
    }

    // MARK: Clients

    private func wantsToRead(_ client: Client) -> Bool {
        !client.readClosed && client.inFlight < configuration.maximumInFlightPerConnection
            && client.inbound.count <= 2 + DNSQuery.maximumMessageLength
    }

    private func readDatagramQueries() {
        for _ in 0..<Self.datagramBatch {
            guard let received = try? listeners.datagram.receive(into: buffer) else { return }
            counters.add(.received)
            guard let from = received.from else { continue }
            guard received.count <= DNSQuery.maximumMessageLength else { counters.add(.malformed); continue }
            startExchange(Array(buffer[0..<received.count]), origin: .datagram(from))
        }
    }

    private func acceptClients() {
        while clients.count < configuration.maximumConnections {
            guard let socket = try? listeners.stream.accept() else { return }
            clients[makeKey()] = Client(socket: socket,
                                        deadline: ProcessControl.monotonicSeconds() + configuration.connectionIdleTimeout)
        }
    }

    private func serviceClient(_ key: Int, _ events: PollSet.Events) {
        guard var client = clients[key] else { return }
        // POLLHUP on TCP: closed both ways (a reset, say); POLLERR: a pending error. No answer can reach it.
        if events.contains(.hangUp) || events.contains(.error) || events.contains(.invalid) {
            return closeClient(key)
        }
        if events.contains(.readable), wantsToRead(client) {
            switch Result(catching: { () throws(SystemCallError) in try client.socket.receive(into: buffer) }) {
            case .success(nil):
                break
            case .success(let received?) where received.count == 0:
                client.readClosed = true
            case .success(let received?):
                client.inbound.append(contentsOf: buffer[0..<received.count])
            case .failure:
                return closeClient(key)
            }
        }
        if events.contains(.writable), !client.outbound.isEmpty {
            let sent = client.outbound.withUnsafeBytes { b in
                Result { () throws(SystemCallError) in try client.socket.send(b) }
            }
            switch sent {
            case .success(let count?): client.outbound.removeFirst(count)
            case .success(nil): break
            case .failure: return closeClient(key)
            }
        }
        client.deadline = ProcessControl.monotonicSeconds() + configuration.connectionIdleTimeout
        clients[key] = client
        processFrames(key)
    }

    /// Starts the complete length-prefixed queries a client has sent, as many as its in-flight limit allows.
    private func processFrames(_ key: Int) {
        while var client = clients[key], client.inFlight < configuration.maximumInFlightPerConnection,
              client.inbound.count >= 2 {
            let length = Int(client.inbound[0]) << 8 | Int(client.inbound[1])
            guard length > 0 else {
                counters.add(.received)
                counters.add(.malformed)
                return closeClient(key) // a zero length is no message: the stream is out of step
            }
            guard client.inbound.count >= 2 + length else { break }
            let frame = Array(client.inbound[2..<(2 + length)])
            client.inbound.removeFirst(2 + length)
            clients[key] = client
            counters.add(.received)
            startExchange(frame, origin: .stream(client: key))
        }
        if let client = clients[key], client.readClosed, client.inFlight == 0, client.outbound.isEmpty {
            closeClient(key)
        }
    }

    private func closeClient(_ key: Int) {
        clients.removeValue(forKey: key)?.socket.close()
    }

    // MARK: Upstream exchanges

    private func startExchange(_ message: [UInt8], origin: Origin) {
        let query: DNSQuery
        do throws(DNSMessageError) {
            query = try DNSQuery(parsing: message)
        } catch {
            counters.add(.malformed)
            return
        }
        guard exchanges.count < configuration.maximumInFlight else {
            counters.add(.overloaded)
            return
        }
        let toTunnel = configuration.policy.sendsToTunnel(query.name)
        let servers = toTunnel ? configuration.tunnelServers : configuration.fallbackServers
        guard !servers.isEmpty else {
            counters.add(.upstreamErrors)
            return
        }
        counters.add(toTunnel ? .toTunnel : .toFallback)
        // What a UDP client takes (RFC 6891 §6.2.3); records after the question that do not parse: 512.
        let clientLimit = (try? DNSMessage(parsing: message))?.udpPayloadLimit ?? DNSMessage.minimumUDPPayload
        var exchange = Exchange(origin: origin, clientID: query.id, query: query, message: message,
                                servers: servers, bindsToTunnel: toTunnel, clientLimit: clientLimit)
        if case .stream(let client) = origin { clients[client]?.inFlight += 1 }
        if launch(&exchange, from: 0) {
            exchanges[makeKey()] = exchange
        } else {
            finish(exchange, answer: nil)
        }
    }

    /// Sends the query to `servers[first]`, or the next server that takes
    /// it; false when none does. Over the client's transport.
    private func launch(_ exchange: inout Exchange, from first: Int) -> Bool {
        exchange.socket?.close()
        exchange.socket = nil
        if case .stream = exchange.origin { exchange.overStream = true } else { exchange.overStream = false }
        var attempt = first
        while attempt < exchange.servers.count {
            let server = exchange.servers[attempt]
            do throws(SystemCallError) {
                try open(&exchange, to: server)
                exchange.attempt = attempt
                exchange.deadline = ProcessControl.monotonicSeconds() + configuration.attemptTimeout
                return true
            } catch {
                exchange.socket?.close()
                exchange.socket = nil
                counters.add(.upstreamErrors)
                attempt += 1
            }
        }
        return false
    }

    /// A truncated UDP answer came back: the same server, again, over TCP;
    /// the next server when that cannot start.
    private func retryOverStream(_ exchange: inout Exchange) -> Bool {
        exchange.socket?.close()
        exchange.socket = nil
        exchange.overStream = true
        counters.add(.retriedOverTCP)
        do throws(SystemCallError) {
            try open(&exchange, to: exchange.servers[exchange.attempt])
            exchange.deadline = ProcessControl.monotonicSeconds() + configuration.attemptTimeout
            return true
        } catch {
            exchange.socket?.close()
            exchange.socket = nil
            counters.add(.upstreamErrors)
            return launch(&exchange, from: exchange.attempt + 1)
        }
    }

    /// Opens this try's socket and sends the query (UDP) or starts
    /// connecting (TCP), with a fresh random id.
    ///
    /// The UDP socket is not connected, so that every datagram that reaches
    /// it is seen and checked (`UpstreamAnswer`) and a stray one counted, not
    /// silently dropped by the kernel. It is bound to the address the kernel
    /// would send from to this server (so datagrams to the host's other
    /// addresses do not reach it) and to a port the kernel picks at random
    /// (bind to port 0), and it has IP_RECVERR so that an ICMP port
    /// unreachable still fails the try at once.
    private func open(_ exchange: inout Exchange, to server: SocketAddress) throws(SystemCallError) {
        let id = UInt16.random(in: .min ... .max, using: &random)
        exchange.query.id = id
        exchange.message[0] = UInt8(id >> 8)
        exchange.message[1] = UInt8(id & 0xff)
        exchange.received = []
        if exchange.overStream {
            let socket = try FileDescriptor.socket(family: server.family, type: .stream, nonBlocking: true)
            exchange.socket = socket
            try bindToTunnel(socket, exchange)
            exchange.phase = try socket.connect(to: server) ? .writing(offset: 0) : .connecting
        } else {
            let local = try sourceAddress(toward: server, exchange)
            let socket = try FileDescriptor.socket(family: server.family, type: .datagram, nonBlocking: true)
            exchange.socket = socket
            // An ICMP port unreachable: the next server at once.
            try socket.setReceiveErrors(family: server.family, true)
            try bindToTunnel(socket, exchange)
            try socket.bind(to: local)
            let sent = try exchange.message.withUnsafeBytes { b in
                Result { () throws(SystemCallError) in try socket.send(b, to: server) }
            }.get()
            guard sent == exchange.message.count else { throw SystemCallError("sendto(\(server))", .wouldBlock) }
            exchange.phase = .datagram
        }
    }

    private func bindToTunnel(_ socket: FileDescriptor, _ exchange: Exchange) throws(SystemCallError) {
        if exchange.bindsToTunnel, let interface = configuration.tunnelInterface {
            try socket.bindToDevice(interface)
        }
    }

    /// The address the kernel sends from to `server` (the name of a UDP
    /// socket connected to it: a route lookup, nothing is sent), with port 0.
    private func sourceAddress(toward server: SocketAddress, _ exchange: Exchange) throws(SystemCallError) -> SocketAddress {
        let probe = try FileDescriptor.socket(family: server.family, type: .datagram, nonBlocking: true)
        defer { probe.close() }
        try bindToTunnel(probe, exchange)
        try probe.connect(to: server)
        guard let local = try probe.localAddress() else { throw SystemCallError("getsockname", .invalidArgument) }
        // A link-local source from a socket not bound to a device has scope 0; the link is the server's.
        if case .ipv6(let bytes, _, 0) = local, bytes[0] == 0xfe, bytes[1] & 0xc0 == 0x80,
           case .ipv6(_, _, let scope) = server {
            return .ipv6(bytes, port: 0, scope: scope)
        }
        return local.withPort(0)
    }

    private func serviceExchange(_ key: Int, _ events: PollSet.Events) {
        guard var exchange = exchanges[key], let socket = exchange.socket else { return }
        do throws(SystemCallError) {
            switch exchange.phase {
            case .datagram:
                // A bounded batch: a flood of forgeries must not keep the other sockets waiting.
                for _ in 0..<Self.datagramBatch {
                    guard let received = try socket.receive(into: buffer) else { break }
                    let answer = Array(buffer[0..<received.count])
                    let server = exchange.servers[exchange.attempt]
                    let message: DNSMessage?
                    switch UpstreamAnswer.check(answer, from: received.from, server: server, query: exchange.query) {
                    case .rejected(let reason):
                        counters.add(reason) // not the answer: keep waiting for it
                        continue
                    case .truncated:
                        message = nil
                    case .answer(let parsed):
                        message = parsed
                    }
                    if let message, !message.isTruncated {
                        exchanges.removeValue(forKey: key)
                        return finish(exchange, answer: (answer, message))
                    }
                    // TC = 1: the whole answer, from the same server, over TCP.
                    if retryOverStream(&exchange) {
                        exchanges[key] = exchange
                    } else {
                        exchanges.removeValue(forKey: key)
                        finish(exchange, answer: nil)
                    }
                    return
                }
                exchanges[key] = exchange
                return
            case .connecting:
                if let error = try socket.pendingError() { throw SystemCallError("connect", error) }
                exchange.phase = .writing(offset: 0)
                fallthrough
            case .writing:
                guard case .writing(let offset) = exchange.phase else { return }
                let framed = [UInt8(exchange.message.count >> 8), UInt8(exchange.message.count & 0xff)] + exchange.message
                let sent = try framed.withUnsafeBytes { b in
                    Result { () throws(SystemCallError) in try socket.send(UnsafeRawBufferPointer(rebasing: b[offset...])) }
                }.get()
                let done = offset + (sent ?? 0)
                exchange.phase = done == framed.count ? .reading : .writing(offset: done)
            case .reading:
                guard let received = try socket.receive(into: buffer) else { break }
                guard received.count > 0 else { throw SystemCallError("recv", .connectionRefused) } // closed early
                exchange.received.append(contentsOf: buffer[0..<received.count])
                // Every complete frame is checked; one that is not the answer is dropped and the next one read.
                while exchange.received.count >= 2 {
                    let length = Int(exchange.received[0]) << 8 | Int(exchange.received[1])
                    guard exchange.received.count >= 2 + length else { break }
                    let answer = Array(exchange.received[2..<(2 + length)])
                    exchange.received.removeFirst(2 + length)
                    // The connection's peer is the server: the kernel matched the source.
                    switch exchange.query.check(answer: answer) {
                    case .rejected(let reason):
                        counters.add(reason)
                    case .truncated:
                        counters.add(.malformedAnswers) // cut short over TCP too: nothing to relay
                    case .answer(let message):
                        exchanges.removeValue(forKey: key)
                        return finish(exchange, answer: (answer, message))
                    }
                }
            }
            exchanges[key] = exchange
        } catch {
            // This server failed: the next one, or give up.
            counters.add(.upstreamErrors)
            if launch(&exchange, from: exchange.attempt + 1) {
                exchanges[key] = exchange
            } else {
                exchanges.removeValue(forKey: key)
                finish(exchange, answer: nil)
            }
        }
    }

    /// Ends an exchange: closes its socket and relays the answer, if there
    /// is one (its bytes, and the message they parse to).
    private func finish(_ exchange: Exchange, answer checked: ([UInt8], DNSMessage)?) {
        exchange.socket?.close()
        switch exchange.origin {
        case .datagram(let client):
            guard case (var answer, let message)? = checked else { return }
            if answer.count > exchange.clientLimit {
                // As a server would: TC set, the question and OPT only; the client asks again over TCP.
                answer = message.truncated(toFit: exchange.clientLimit)
                counters.add(.truncatedForClient)
            }
            answer[0] = UInt8(exchange.clientID >> 8)
            answer[1] = UInt8(exchange.clientID & 0xff)
            let sent = answer.withUnsafeBytes { b in try? listeners.datagram.send(b, to: client) }
            if sent != nil { counters.add(.answered) }
        case .stream(let key):
            guard var client = clients[key] else { return }
            client.inFlight -= 1
            if var answer = checked?.0 {
                answer[0] = UInt8(exchange.clientID >> 8)
                answer[1] = UInt8(exchange.clientID & 0xff)
                client.outbound += [UInt8(answer.count >> 8), UInt8(answer.count & 0xff)] + answer
                counters.add(.answered)
            }
            clients[key] = client
            if client.outbound.count > Self.maximumOutbound { return closeClient(key) }
            processFrames(key)
        }
    }

    // MARK: Time

    /// Milliseconds until the nearest deadline (-1: none).
    private func timeout(now: Double) -> Int32 {
        var nearest = Double.infinity
        for exchange in exchanges.values { nearest = min(nearest, exchange.deadline) }
        for client in clients.values { nearest = min(nearest, client.deadline) }
        guard nearest.isFinite else { return -1 }
        return Int32(max(0, min(60_000, ((nearest - now) * 1000).rounded(.up))))
    }

    private func expire(now: Double) {
        for (key, var exchange) in exchanges where exchange.deadline <= now {
            if launch(&exchange, from: exchange.attempt + 1) {
                exchanges[key] = exchange
            } else {
                counters.add(.timedOut)
                exchanges.removeValue(forKey: key)
                finish(exchange, answer: nil)
            }
        }
        for (key, client) in clients where client.deadline <= now && client.inFlight == 0 {
            closeClient(key)
        }
    }

    private func makeKey() -> Int {
        nextKey += 1
        return nextKey
    }

    private func closeAll() {
        for exchange in exchanges.values { exchange.socket?.close() }
        for client in clients.values { client.socket.close() }
        exchanges.removeAll()
        clients.removeAll()
        listeners.close()
        wake.close()
    }
}
