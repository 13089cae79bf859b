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
        var upstreamID: UInt16
        /// The query as sent upstream (id replaced by `upstreamID`).
        var message: [UInt8]
        var servers: [SocketAddress]
        var bindsToTunnel: Bool
        /// Index into `servers` of the server being tried.
        var attempt = 0
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
        let upstreamID = UInt16.random(in: .min ... .max, using: &random)
        var upstreamMessage = message
        upstreamMessage[0] = UInt8(upstreamID >> 8)
        upstreamMessage[1] = UInt8(upstreamID & 0xff)
        var exchange = Exchange(origin: origin, clientID: query.id, upstreamID: upstreamID, message: upstreamMessage,
                                servers: servers, bindsToTunnel: toTunnel)
        if case .stream(let client) = origin { clients[client]?.inFlight += 1 }
        if launch(&exchange, from: 0) {
            exchanges[makeKey()] = exchange
        } else {
            finish(exchange, answer: nil)
        }
    }

    /// Sends the query to `servers[first]`, or the next server that takes
    /// it; false when none does.
    private func launch(_ exchange: inout Exchange, from first: Int) -> Bool {
        exchange.socket?.close()
        exchange.socket = nil
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

    private func open(_ exchange: inout Exchange, to server: SocketAddress) throws(SystemCallError) {
        let stream: Bool
        if case .stream = exchange.origin { stream = true } else { stream = false }
        let socket = try FileDescriptor.socket(family: server.family, type: stream ? .stream : .datagram, nonBlocking: true)
        exchange.socket = socket
        if exchange.bindsToTunnel, let interface = configuration.tunnelInterface {
            try socket.bindToDevice(interface)
        }
        exchange.received = []
        if stream {
            exchange.phase = try socket.connect(to: server) ? .writing(offset: 0) : .connecting
        } else {
            try socket.connect(to: server)
            let sent = try exchange.message.withUnsafeBytes { b in
                Result { () throws(SystemCallError) in try socket.send(b) }
            }.get()
            guard sent == exchange.message.count else { throw SystemCallError("send(\(server))", .wouldBlock) }
            exchange.phase = .datagram
        }
    }

    private func serviceExchange(_ key: Int, _ events: PollSet.Events) {
        guard var exchange = exchanges[key], let socket = exchange.socket else { return }
        do throws(SystemCallError) {
            switch exchange.phase {
            case .datagram:
                while let received = try socket.receive(into: buffer) {
                    let answer = UnsafeRawBufferPointer(rebasing: buffer[0..<received.count])
                    if DNSQuery.isResponse(answer, id: exchange.upstreamID) {
                        exchanges.removeValue(forKey: key)
                        return finish(exchange, answer: Array(answer))
                    }
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
                if exchange.received.count >= 2 {
                    let length = Int(exchange.received[0]) << 8 | Int(exchange.received[1])
                    if exchange.received.count >= 2 + length {
                        let answer = Array(exchange.received[2..<(2 + length)])
                        let valid = answer.withUnsafeBytes { DNSQuery.isResponse($0, id: exchange.upstreamID) }
                        guard valid else { throw SystemCallError("recv", .invalidArgument) }
                        exchanges.removeValue(forKey: key)
                        return finish(exchange, answer: answer)
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

    /// Ends an exchange: closes its socket and relays the answer, if there is one.
    private func finish(_ exchange: Exchange, answer: [UInt8]?) {
        exchange.socket?.close()
        switch exchange.origin {
        case .datagram(let client):
            guard var answer else { return }
            answer[0] = UInt8(exchange.clientID >> 8)
            answer[1] = UInt8(exchange.clientID & 0xff)
            let sent = answer.withUnsafeBytes { b in try? listeners.datagram.send(b, to: client) }
            if sent != nil { counters.add(.answered) }
        case .stream(let key):
            guard var client = clients[key] else { return }
            client.inFlight -= 1
            if var answer {
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
