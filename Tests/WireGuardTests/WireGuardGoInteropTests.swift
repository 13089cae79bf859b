import Glibc
import LinuxSystem
import TunnelgateTestSupport
import WireGuard
import XCTest
import TunnelgateSettings

/// The protocol core against a real implementation: Debian's wireguard-go, in a private network
/// namespace, over UDP on loopback. The test plays the peer 10.77.0.2 with `Handshake` and
/// `Transport` only; wireguard-go is 10.77.0.1 on its TUN, so an ICMP echo we send through the
/// tunnel comes back as the kernel's echo reply, encrypted by wireguard-go.
///
///     test (UDP 127.0.0.1:ephemeral) <--- loopback ---> wireguard-go (UDP 127.0.0.1:51820)
///     peer 10.77.0.2, keys in Swift                       TUN wgiNNNNNx 10.77.0.1/24
///
/// Fails when wireguard-go or wg is not installed (Scripts/setup.sh installs both): a skipped interop
/// test must not count as a pass. Like the other namespace tests, needs root.
final class WireGuardGoInteropTests: XCTestCase {
    override func setUpWithError() throws {
        struct PeerMissing: Error, CustomStringConvertible {
            var description: String { "wireguard-go and wg are not installed (Scripts/setup.sh installs them)" }
        }
        guard FileSystem.exists("/usr/bin/wireguard-go") && FileSystem.exists("/usr/bin/wg") else { throw PeerMissing() }
    }

    /// We initiate (with a pre-shared key); wireguard-go responds; a ping crosses both ways.
    func testWeInitiateAndWireGuardGoResponds() {
        let peer = InteropPeer(suffix: "i")
        inPrivateNetworkNamespace(cleanup: { peer.tearDown() }) {
            try peer.start(presharedKey: WireGuardCrypto.generatePrivateKey(), endpointPort: nil)
            let (initiation, state) = try Handshake.createInitiation(
                localStatic: peer.ourKey, remoteStatic: peer.theirKey.publicKey, presharedKey: peer.presharedKey.flatMap { SecretKey(bytes: $0) },
                senderIndex: 0x5EED_0001, timestamp: InteropPeer.now(), cookie: nil)
            try peer.send(initiation)

            let (response, _) = try peer.receive { MessageType.classify($0) == .response }
            let keypair = try Handshake.consumeResponse(response, state: state, localStatic: peer.ourKey,
                                                        presharedKey: peer.presharedKey.flatMap { SecretKey(bytes: $0) })
            try peer.pingThroughTunnel(keypair: keypair)
        }
    }

    /// wireguard-go initiates (no pre-shared key; persistent keepalive starts it); we respond,
    /// receive its first transport message, then a ping crosses both ways.
    func testWireGuardGoInitiatesAndWeRespond() {
        let peer = InteropPeer(suffix: "r")
        inPrivateNetworkNamespace(cleanup: { peer.tearDown() }) {
            try peer.openSocket()
            try peer.start(presharedKey: nil, endpointPort: peer.ourPort)
            var cookies = CookieGenerator(localPublic: peer.ourKey.publicKey, now: ProcessControl.monotonicSeconds())

            let (initiation, source) = try peer.receive { MessageType.classify($0) == .initiation }
            guard initiation.withUnsafeBytes({ cookies.verifyMAC1($0) }) else { throw InteropFailure("mac1 did not verify") }
            _ = cookies.cookie(for: [0], now: ProcessControl.monotonicSeconds()) // exercised, not needed unloaded
            let received = try Handshake.consumeInitiation(initiation, localStatic: peer.ourKey)
            guard received.remoteStatic == peer.theirKey.publicKey else { throw InteropFailure("wrong initiator key") }
            let (response, keypair) = try Handshake.createResponse(to: received, presharedKey: nil, senderIndex: 0x5EED_0002,
                                                                   cookie: nil)
            try peer.send(response, to: source)

            // The initiator confirms the handshake with its first transport message (a keepalive).
            var datagram = try peer.receive { MessageType.classify($0) == .transport }.datagram
            guard let (counter, plaintext) = datagram.withUnsafeMutableBytes({ Transport.decodeTransport(keypair: keypair, datagram: $0) })
            else { throw InteropFailure("wireguard-go's first transport message did not decrypt") }
            guard counter == 0, plaintext.isEmpty else {
                throw InteropFailure("expected keepalive 0, got counter \(counter) with \(plaintext.count) bytes")
            }
            try peer.pingThroughTunnel(keypair: keypair)
        }
    }
}

struct InteropFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One wireguard-go instance and the UDP socket the test speaks through. Used from the namespace thread only.
final class InteropPeer: @unchecked Sendable { // used by one thread at a time: the test's namespace thread
    let name: String
    let directory: String
    let ourKey = PrivateKey.generate()
    let theirKey = PrivateKey.generate()
    var presharedKey: [UInt8]?
    var socket: FileDescriptor?
    var ourPort: UInt16 = 0
    var daemon: Int32?
    static let theirPort: UInt16 = 51_820
    static let theirAddress: [UInt8] = [10, 77, 0, 1]
    static let ourAddress: [UInt8] = [10, 77, 0, 2]

    init(suffix: String) {
        name = "wgi\(getpid() % 100_000)\(suffix)"
        directory = "/tmp/tunnelgate-\(name)"
    }

    static func now() -> [UInt8] {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return WireGuardCrypto.tai64n(unixSeconds: UInt64(ts.tv_sec), nanoseconds: UInt32(ts.tv_nsec) & ~0xFF_FFFF)
    }

    func openSocket() throws {
        guard socket == nil else { return }
        let fd = try FileDescriptor.socket(family: AF_INET, type: .datagram, nonBlocking: true)
        socket = fd
        try fd.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        guard case .ipv4(_, let port)? = try fd.localAddress() else { throw InteropFailure("no local port") }
        ourPort = port
    }

    /// Starts wireguard-go as 10.77.0.1 with us as its only peer (10.77.0.2/32).
    func start(presharedKey: [UInt8]?, endpointPort: UInt16?) throws {
        try openSocket()
        self.presharedKey = presharedKey
        try FileSystem.makeDirectory(directory, mode: 0o700)
        try FileSystem.writeAtomically("\(directory)/private", Array(theirKey.base64.utf8))
        daemon = try ProcessControl.spawnDetached(
            "/usr/bin/wireguard-go", ["wireguard-go", "-f", name],
            environment: ["WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1", "LOG_LEVEL=verbose", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
            logPath: "\(directory)/wireguard-go.log")
        let socketPath = "/var/run/wireguard/\(name).sock"
        let deadline = ProcessControl.monotonicSeconds() + 10
        while !FileSystem.exists(socketPath) {
            guard ProcessControl.monotonicSeconds() < deadline else { throw InteropFailure("wireguard-go did not start") }
            ProcessControl.sleep(seconds: 0.02)
        }
        var arguments = ["wg", "set", name, "listen-port", "\(Self.theirPort)", "private-key", "\(directory)/private",
                         "peer", ourKey.publicKey.base64, "allowed-ips", "10.77.0.2/32"]
        if let presharedKey {
            try FileSystem.writeAtomically("\(directory)/psk", Array(WireGuardKey(presharedKey)!.base64.utf8))
            arguments += ["preshared-key", "\(directory)/psk"]
        }
        if let endpointPort {
            arguments += ["endpoint", "127.0.0.1:\(endpointPort)", "persistent-keepalive", "1"]
        }
        try run("/usr/sbin/ip", ["ip", "link", "set", "lo", "up"])
        try run("/usr/sbin/ip", ["ip", "address", "add", "10.77.0.1/24", "dev", name])
        try run("/usr/sbin/ip", ["ip", "link", "set", name, "up"])
        try run("/usr/bin/wg", arguments)
    }

    func tearDown() {
        if let daemon {
            try? ProcessControl.signal(daemon, SIGTERM)
            _ = try? ProcessControl.wait(for: daemon)
        }
        socket?.close()
        for file in ["private", "psk", "wireguard-go.log"] { FileSystem.remove("\(directory)/\(file)") }
        FileSystem.removeDirectory(directory)
    }

    func run(_ path: String, _ arguments: [String]) throws {
        let pid = try ProcessControl.spawn(path, arguments)
        let termination = try ProcessControl.wait(for: pid)
        guard termination == .exited(0) else {
            throw InteropFailure("\(arguments.joined(separator: " ")) ended with \(String(describing: termination))")
        }
    }

    func send(_ bytes: [UInt8], to address: SocketAddress = .ipv4([127, 0, 0, 1], port: InteropPeer.theirPort)) throws {
        _ = try bytes.withUnsafeBytes { raw throws(SystemCallError) in try socket!.send(raw, to: address) }
    }

    /// The next datagram `accept`ed within 10 s, and where it came from.
    func receive(_ accept: (UnsafeRawBufferPointer) -> Bool) throws -> (datagram: [UInt8], from: SocketAddress) {
        let deadline = ProcessControl.monotonicSeconds() + 10
        var buffer = [UInt8](repeating: 0, count: 2_048)
        while ProcessControl.monotonicSeconds() < deadline {
            var poll = PollSet()
            poll.add(socket!, .readable)
            _ = try poll.wait(timeoutMilliseconds: 200)
            while let (count, from) = try buffer.withUnsafeMutableBytes({ raw throws(SystemCallError) in try socket!.receive(into: raw) }) {
                let datagram = Array(buffer[..<count])
                if let from, datagram.withUnsafeBytes(accept) { return (datagram, from) }
            }
        }
        let log = (try? FileSystem.read("\(directory)/wireguard-go.log")).flatMap { $0 }.map { String(decoding: $0.suffix(2_000), as: UTF8.self) }
        throw InteropFailure("nothing arrived from wireguard-go within 10 s; its log: \(log ?? "(none)")")
    }

    /// Sends an ICMP echo request 10.77.0.2 → 10.77.0.1 through the tunnel and waits for the
    /// kernel's echo reply, sent back through the tunnel by wireguard-go.
    func pingThroughTunnel(keypair: Keypair) throws {
        let request = Self.echoRequest(identifier: 0x7467, sequence: 1, payload: Array("tunnelgate interop".utf8))
        var buffer = [UInt8](repeating: 0, count: 1_420 + Transport.overhead)
        let length = request.withUnsafeBytes { p in
            buffer.withUnsafeMutableBytes { Transport.encodeTransport(keypair: keypair, counter: 1, packet: p, into: $0) }
        }
        guard let length else { throw InteropFailure("encodeTransport refused the ping") }
        try send(Array(buffer[..<length]), to: .ipv4([127, 0, 0, 1], port: Self.theirPort))

        var window = ReplayWindow()
        let deadline = ProcessControl.monotonicSeconds() + 10
        while ProcessControl.monotonicSeconds() < deadline {
            var datagram = try receive { MessageType.classify($0) == .transport }.datagram
            guard let (counter, range) = datagram.withUnsafeMutableBytes({ Transport.decodeTransport(keypair: keypair, datagram: $0) })
            else { throw InteropFailure("a transport message from wireguard-go did not decrypt") }
            guard window.accept(counter) else { throw InteropFailure("counter \(counter) replayed") }
            let packet = Array(datagram[range])
            if packet.isEmpty { continue } // keepalive
            guard packet.count >= 28, packet.count % 16 == 0 || packet.count == 1_420 else {
                throw InteropFailure("plaintext of \(packet.count) bytes is not padded to 16")
            }
            let totalLength = Int(packet[2]) << 8 | Int(packet[3])
            guard packet[0] == 0x45, packet[9] == 1, Array(packet[12..<16]) == Self.theirAddress,
                  Array(packet[16..<20]) == Self.ourAddress, packet[20] == 0, // ICMP echo reply
                  totalLength == request.count, Array(packet[24..<totalLength]) == Array(request[24...])
            else { throw InteropFailure("unexpected packet through the tunnel: \(packet.prefix(28))") }
            return
        }
        throw InteropFailure("no echo reply through the tunnel")
    }

    static func echoRequest(identifier: UInt16, sequence: UInt16, payload: [UInt8]) -> [UInt8] {
        var icmp: [UInt8] = [8, 0, 0, 0, UInt8(identifier >> 8), UInt8(identifier & 0xFF),
                             UInt8(sequence >> 8), UInt8(sequence & 0xFF)] + payload
        let icmpSum = checksum(icmp)
        icmp[2] = UInt8(icmpSum >> 8)
        icmp[3] = UInt8(icmpSum & 0xFF)
        let total = 20 + icmp.count
        var ip: [UInt8] = [0x45, 0, UInt8(total >> 8), UInt8(total & 0xFF), 0, 1, 0x40, 0, 64, 1, 0, 0]
            + ourAddress + theirAddress
        let ipSum = checksum(ip)
        ip[10] = UInt8(ipSum >> 8)
        ip[11] = UInt8(ipSum & 0xFF)
        return ip + icmp
    }

    /// The Internet checksum (RFC 1071).
    static func checksum(_ bytes: [UInt8]) -> UInt16 {
        var sum: UInt32 = 0
        for i in stride(from: 0, to: bytes.count, by: 2) {
            sum += UInt32(bytes[i]) << 8 | (i + 1 < bytes.count ? UInt32(bytes[i + 1]) : 0)
        }
        while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
        return ~UInt16(sum)
    }
}
