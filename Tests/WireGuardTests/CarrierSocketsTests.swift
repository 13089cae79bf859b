import Glibc
import LinuxSystem
import RuntimeABI
import Synchronization
import TUN
import TunnelgateSettings
@testable import WireGuard
import XCTest

/// The carrier sockets, by who makes them. Handed over (a packet plane's case): the engine's UDP
/// sockets and UAPI listener are checked, used as they are, and `wg set listen-port` and `fwmark`
/// are refused, so the device never binds or marks. Made by the device (the single-process `up`):
/// bound, sized and marked with every result checked. Real sockets on loopback, which need no root;
/// the TUN is a `PacketChannel`.
final class CarrierSocketsTests: XCTestCase {
    var directory = ""
    let peerKey = PrivateKey.generate()
    let log = LogLines()

    final class LogLines: Sendable {
        let lines = Mutex<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    override func setUpWithError() throws {
        directory = "/tmp/tg-wg-test-\(ProcessControl.id)-\(UInt32.random(in: 0...UInt32.max))"
        XCTAssertTrue(try FileSystem.createDirectory(directory, mode: 0o700))
    }

    override func tearDown() {
        for name in FileSystem.list(directory) { FileSystem.remove("\(directory)/\(name)") }
        FileSystem.removeDirectory(directory)
    }

    func settings(listenPort: UInt16? = nil, fwMark: UInt32? = nil) -> WireGuardSettings {
        WireGuardSettings(privateKey: SecretKey(bytes: PrivateKey.generate().withUnsafeBytes { Array($0) })!,
                          listenPort: listenPort, fwMark: fwMark,
                          peers: [.init(publicKey: peerKey.publicKey.bytes, allowedIPs: [IPPrefix("10.70.0.2/32")!])])
    }

    /// What the engine hands over: UDP on 127.0.0.1 and [::1], one port, and a listening UAPI socket.
    func engineSockets() throws -> (ipv4: FileDescriptor, ipv6: FileDescriptor, port: UInt16, uapi: FileDescriptor, path: String) {
        let ipv4 = try FileDescriptor.socket(family: SocketFamily.ipv4, type: .datagram, nonBlocking: false)
        try ipv4.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        guard case .ipv4(_, let port)? = try ipv4.localAddress() else { throw SystemCallError("getsockname", .invalidArgument) }
        let ipv6 = try FileDescriptor.socket(family: SocketFamily.ipv6, type: .datagram, nonBlocking: false)
        try ipv6.setIPv6Only(true)
        try ipv6.bind(to: .ipv6([UInt8](repeating: 0, count: 15) + [1], port: port))
        let path = "\(directory)/wgtest.sock"
        let uapi = try UnixSocket.listen(at: path)
        return (ipv4, ipv6, port, uapi, path)
    }

    /// One UAPI request as wg(8) makes it: the lines, a blank line; the answer up to its blank line.
    func request(_ path: String, _ lines: [String]) throws -> [String] {
        let connection = try UnixSocket.connect(to: path)
        defer { connection.close() }
        try connection.setTimeouts(seconds: 5)
        try connection.writeAll(Array((lines.joined(separator: "\n") + "\n\n").utf8))
        var answer: [String] = []
        while let line = UnixSocket.readLine(connection), !line.isEmpty { answer.append(String(decoding: line, as: UTF8.self)) }
        return answer
    }

    func isOpen(_ fd: FileDescriptor) -> Bool { fcntl(fd.rawValue, F_GETFD) != -1 }

    // MARK: Handed over

    func testWgSetListenPortAndFwmarkAreRefusedOnTheEnginesSockets() throws {
        let engine = try engineSockets()
        let log = self.log
        let runtime = try WireGuardRuntime(settings(), carrierSockets: .init(ipv4: engine.ipv4, ipv6: engine.ipv6, uapi: engine.uapi),
                                           timers: .standard, offloads: false, log: { log.append($0) })
        defer { runtime.stop() }
        runtime.attach(to: RuntimeContext(interfaceName: "wgtest", mtu: 1420))
        let channel = try PacketChannel()
        try runtime.start(packetIO: channel.tunnel)
        XCTAssertEqual(runtime.device.boundPort, engine.port)
        XCTAssertTrue(runtime.summary.contains("on UDP port \(engine.port) (the engine's sockets)"), runtime.summary)

        // wg set WG listen-port N: refused, as wg(8) reads a set's errno (negative), with the reason logged.
        XCTAssertEqual(try request(engine.path, ["set=1", "listen_port=\(engine.port &+ 1)"]), ["errno=-\(EPERM)"])
        XCTAssertTrue(log.all.contains("wg API: listen-port: the carrier sockets are the engine's"), "\(log.all)")
        // ... also with a peer in the same request, which is then not added: a refused set changes nothing.
        let newPeer = PrivateKey.generate().publicKey
        XCTAssertEqual(try request(engine.path, ["set=1", "listen_port=\(engine.port &+ 1)",
                                                 "public_key=\(UAPI.hex(newPeer.bytes))", "allowed_ip=10.9.0.0/24"]),
                       ["errno=-\(EPERM)"])
        // wg set WG fwmark M: refused too.
        XCTAssertEqual(try request(engine.path, ["set=1", "fwmark=7"]), ["errno=-\(EPERM)"])
        XCTAssertTrue(log.all.contains("wg API: fwmark: the carrier sockets are the engine's"), "\(log.all)")
        // The port it has is no change, and is accepted (wg setconf with the file's ListenPort).
        XCTAssertEqual(try request(engine.path, ["set=1", "listen_port=\(engine.port)"]), ["errno=0"])

        let get = try request(engine.path, ["get=1"])
        XCTAssertEqual(get.last, "errno=0")
        XCTAssertTrue(get.contains("listen_port=\(engine.port)"), "\(get)")
        XCTAssertFalse(get.contains { $0.hasPrefix("fwmark=") }, "the sockets carry no mark")
        XCTAssertFalse(get.contains("public_key=\(UAPI.hex(newPeer.bytes))"), "the refused request added no peer")
        XCTAssertFalse(get.contains("allowed_ip=10.9.0.0/24"))
        // The engine's sockets are still the ones in use, still on their port.
        guard case .ipv4(_, let still)? = try engine.ipv4.localAddress() else { return XCTFail("not bound") }
        XCTAssertEqual(still, engine.port)

        runtime.stop()
        XCTAssertFalse(isOpen(engine.ipv4) || isOpen(engine.ipv6) || isOpen(engine.uapi), "stop closes what was handed over")
        XCTAssertTrue(FileSystem.exists(engine.path), "the engine's UAPI socket file is the engine's to remove")
    }

    func testTheEnginesSocketsAreCheckedBeforeUse() throws {
        func refusal(_ ipv4: FileDescriptor?, _ ipv6: FileDescriptor?, settings: WireGuardSettings? = nil) -> String {
            do throws(RuntimeError) {
                let runtime = try WireGuardRuntime(settings ?? self.settings(), carrierSockets: .init(ipv4: ipv4, ipv6: ipv6, uapi: nil),
                                                   timers: .standard, offloads: false)
                runtime.stop()
                return "accepted"
            } catch {
                XCTAssertFalse([ipv4, ipv6].compactMap { $0 }.contains { isOpen($0) }, "a refused socket is closed: \(error)")
                return error.description
            }
        }
        let tcp = try FileDescriptor.socket(family: SocketFamily.ipv4, type: .stream, nonBlocking: false)
        XCTAssertEqual(refusal(tcp, nil), "the handed-over IPv4 carrier socket is not an IPv4 UDP socket")
        let unbound = try FileDescriptor.socket(family: SocketFamily.ipv4, type: .datagram, nonBlocking: false)
        XCTAssertEqual(refusal(unbound, nil), "the handed-over IPv4 carrier socket is not bound to a port")
        var engine = try engineSockets()
        engine.uapi.close()
        XCTAssertEqual(refusal(engine.ipv6, nil), "the handed-over IPv4 carrier socket is not an IPv4 UDP socket", "an IPv6 socket as the IPv4 one")
        engine.ipv4.close()
        XCTAssertEqual(refusal(nil, nil), "no carrier socket was handed over")

        engine = try engineSockets()
        engine.uapi.close()
        let other = try FileDescriptor.socket(family: SocketFamily.ipv6, type: .datagram, nonBlocking: false)
        try other.bind(to: .ipv6([UInt8](repeating: 0, count: 15) + [1], port: 0))
        guard case .ipv6(_, let otherPort, _)? = try other.localAddress() else { return XCTFail("not bound") }
        XCTAssertEqual(refusal(engine.ipv4, other), "the handed-over carrier sockets are bound to different ports "
                       + "(IPv4 \(engine.port), IPv6 \(otherPort))")
        engine.ipv6.close()

        engine = try engineSockets()
        engine.uapi.close()
        let wrongPort = engine.port == 1 ? 2 : 1
        XCTAssertEqual(refusal(engine.ipv4, engine.ipv6, settings: settings(listenPort: UInt16(wrongPort))),
                       "the carrier sockets are bound to port \(engine.port), not the configuration's ListenPort \(wrongPort)")
    }

    func testStartRefusesUnmarkedSocketsForAMarkIdentityAndAUAPISocketThatIsNoListener() throws {
        // The tunnel's carrier identity is a mark (the plan's carrierMark): the engine's sockets must carry it.
        var engine = try engineSockets()
        var runtime = try WireGuardRuntime(settings(), carrierSockets: .init(ipv4: engine.ipv4, ipv6: engine.ipv6, uapi: engine.uapi),
                                           timers: .standard, offloads: false)
        runtime.attach(to: RuntimeContext(interfaceName: "wgtest", mtu: 1420, carrierMark: 0x1d24))
        XCTAssertThrowsError(try runtime.start(packetIO: try PacketChannel().tunnel)) { error in
            XCTAssertEqual("\(error)", "the carrier sockets carry fwmark 0x0, not the tunnel's carrier identity 0x1d24: "
                           + "the engine must mark them")
        }
        runtime.stop()
        XCTAssertFalse(isOpen(engine.uapi), "the UAPI socket handed over is closed after a failed start too")
        // So must the configuration's FwMark.
        engine = try engineSockets()
        runtime = try WireGuardRuntime(settings(fwMark: 0x4000), carrierSockets: .init(ipv4: engine.ipv4, ipv6: engine.ipv6, uapi: engine.uapi),
                                       timers: .standard, offloads: false)
        runtime.attach(to: RuntimeContext(interfaceName: "wgtest", mtu: 1420))
        XCTAssertThrowsError(try runtime.start(packetIO: try PacketChannel().tunnel)) { error in
            XCTAssertTrue("\(error)".hasPrefix("the carrier sockets carry fwmark 0x0, not the tunnel's carrier identity 0x4000"), "\(error)")
        }
        runtime.stop()

        // A UAPI descriptor that is not a listening Unix socket.
        engine = try engineSockets()
        engine.uapi.close()
        let notListening = try FileDescriptor.socket(family: SocketFamily.unix, type: .stream, nonBlocking: false)
        runtime = try WireGuardRuntime(settings(), carrierSockets: .init(ipv4: engine.ipv4, ipv6: engine.ipv6, uapi: notListening),
                                       timers: .standard, offloads: false)
        runtime.attach(to: RuntimeContext(interfaceName: "wgtest", mtu: 1420))
        XCTAssertThrowsError(try runtime.start(packetIO: try PacketChannel().tunnel)) { error in
            XCTAssertEqual("\(error)", "the handed-over WireGuard API socket is not a listening Unix stream socket")
        }
        XCTAssertFalse(isOpen(notListening))
        runtime.stop()
    }

    // MARK: Made by the device

    /// The single-process case: sockets made here, bound to any port, sized, moved to another port
    /// (wg set listen-port), and marked. SO_MARK and the *BUFFORCE options need CAP_NET_ADMIN: as root
    /// they are applied and read back; without it the mark is an error naming the call and the
    /// buffers fall back to what net.core.rmem_max allows, said in the log. Neither is ignored.
    func testOwnSocketsAreBoundSizedReboundAndMarkedWithEveryResultChecked() throws {
        let log = self.log
        let bind = try UDPBind.open(port: 0, mark: 0, log: { log.append($0) })
        defer { bind.close() }
        XCTAssertFalse(bind.isHandedOver)
        XCTAssertNotEqual(bind.port, 0)
        let root = ProcessControl.effectiveUserID == 0
        let fallbacks = log.all.filter { $0.contains("SO_RCVBUFFORCE") || $0.contains("SO_SNDBUFFORCE") }
        if root {
            XCTAssertEqual(fallbacks, [], "as root the forced sizes are set")
        } else {
            XCTAssertTrue(fallbacks.contains { $0.contains("setsockopt(SO_RCVBUFFORCE, 4194304) failed: Operation not permitted (1)") },
                          "\(log.all)")
        }

        // Datagrams to the port arrive through the bind, with their source.
        let client = try FileDescriptor.socket(family: SocketFamily.ipv4, type: .datagram, nonBlocking: false)
        defer { client.close() }
        try client.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        guard case .ipv4(_, let clientPort)? = try client.localAddress() else { return XCTFail("not bound") }
        func roundTrip(_ port: UInt16) throws -> Bool {
            let bytes: [UInt8] = [1, 2, 3]
            _ = try bytes.withUnsafeBytes { try client.send($0, to: .ipv4([127, 0, 0, 1], port: port)) }
            guard try Poll.readable(bind.readiness(.ipv4)!, timeoutMilliseconds: 2000) else { return false }
            let batch = DatagramBatch(slotSize: 1500)
            guard bind.receive(.ipv4, into: batch) == 1 else { return false }
            let (received, source) = batch.datagram(0)
            return Array(received) == bytes && source == Endpoint(address: .v4(IPv4Address("127.0.0.1")!), port: clientPort)
        }
        XCTAssertTrue(try roundTrip(bind.port))

        let old = bind.port
        let probe = try FileDescriptor.socket(family: SocketFamily.ipv4, type: .datagram, nonBlocking: false)
        try probe.bind(to: .ipv4([0, 0, 0, 0], port: 0))
        guard case .ipv4(_, let taken)? = try probe.localAddress() else { return XCTFail("not bound") }
        XCTAssertThrowsError(try bind.rebind(port: taken)) { error in
            XCTAssertEqual("\(error)", "binding UDP port \(taken): \(Errno.addressInUse)")
            XCTAssertEqual((error as? BindError)?.errno, .addressInUse)
        }
        XCTAssertEqual(bind.port, old, "a failed rebind keeps the sockets it had")
        probe.close()
        try bind.rebind(port: taken)
        XCTAssertEqual(bind.port, taken)
        XCTAssertTrue(try roundTrip(taken), "the new port receives")
        let again = try FileDescriptor.socket(family: SocketFamily.ipv4, type: .datagram, nonBlocking: false)
        XCTAssertNoThrow(try again.bind(to: .ipv4([0, 0, 0, 0], port: old)), "the old port was given up")
        again.close()

        if root {
            try bind.setMark(0x1d24)
            XCTAssertEqual(bind.mark, 0x1d24)
        } else {
            XCTAssertThrowsError(try bind.setMark(0x1d24)) { error in
                XCTAssertEqual("\(error)", "marking the carrier socket with fwmark 0x1d24: setsockopt(SO_MARK, 0x1d24) failed: "
                               + "Operation not permitted (1)")
            }
            XCTAssertEqual(bind.mark, 0, "a refused mark is not pretended")
        }
    }
}
