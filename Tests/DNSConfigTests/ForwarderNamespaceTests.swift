import Glibc
import LinuxSystem
import TunnelgateSettings
import XCTest
@testable import DNSConfig

/// Runs `body` on a new thread that first enters a new, empty network
/// namespace (its `lo` is down until the body brings it up). Requires root;
/// without it the test fails, it is not skipped. Foundation's Process is not
/// used in there: it needs a loopback socket pair before `lo` is up.
func inPrivateNetworkNamespace(_ body: @escaping @Sendable () throws -> Void,
                               file: StaticString = #filePath, line: UInt = #line) {
    final class Outcome: @unchecked Sendable { // written by the worker before join() returns
        var error: Error?
    }
    let outcome = Outcome()
    do {
        let thread = try SystemThread.spawn {
            do {
                try ProcessControl.enterNewNetworkNamespace()
                try body()
            } catch {
                outcome.error = error
            }
        }
        thread.join()
    } catch {
        outcome.error = error
    }
    if let error = outcome.error { XCTFail("\(error)", file: file, line: line) }
}

/// A child process the test started, ended (SIGTERM) and reaped when the test is done.
final class Child {
    let pid: Int32
    init(_ path: String, _ arguments: [String]) throws {
        pid = try ProcessControl.spawn(path, [path] + arguments)
    }
    /// True while the child runs (a child that has ended is reaped here).
    var isRunning: Bool {
        do { return try ProcessControl.wait(for: pid, block: false) == nil } catch { return false }
    }
    func stop() {
        try? ProcessControl.signal(pid, SIGTERM)
        _ = try? ProcessControl.wait(for: pid)
    }
}

/// The forwarder with real DNS servers: in a private network namespace, two
/// dnsmasq processes answer every name, 127.0.0.2 with 10.2.2.2 (the
/// "tunnel's" server) and 127.0.0.3 with 10.3.3.3 (the server resolv.conf
/// listed before). The configurator applies split DNS for corp.example
/// against a temporary root whose resolv.conf names 127.0.0.3, and its
/// forwarder serves on 127.0.0.153:53.
///
///   test client ──▶ 127.0.0.153:53 forwarder ──┬─ *.corp.example ─▶ 127.0.0.2:53 dnsmasq → 10.2.2.2
///                    (UDP and TCP)             └─ everything else ▶ 127.0.0.3:53 dnsmasq → 10.3.3.3
final class ForwarderNamespaceTests: XCTestCase {
    enum Failure: Error { case setup(String) }

    static func run(_ executable: String, _ arguments: [String]) throws {
        let pid = try ProcessControl.spawn(executable, [executable] + arguments)
        let termination = try ProcessControl.wait(for: pid)
        guard termination == .exited(0) else { throw Failure.setup("\(executable) \(arguments): \(String(describing: termination))") }
    }

    /// Starts dnsmasq on `address`:53 answering every name with `answer`, and waits until it answers.
    static func startDnsmasq(on address: String, answering answer: String) throws -> Child {
        let child = try Child("/usr/sbin/dnsmasq", [
            "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--bind-interfaces",
            "--listen-address=\(address)", "--port=53", "--address=/#/\(answer)", "--user=root", "--group=root",
            "--pid-file=", "--log-facility=/dev/null"])
        let bytes = address.split(separator: ".").compactMap { UInt8($0) }
        var running = true
        let ready = try eventually(5) {
            running = child.isRunning
            guard running else { return true }
            return try udpExchange(query("probe.invalid"), with: .ipv4(bytes, port: 53), timeout: 0.1) != nil
        }
        guard ready, running else {
            child.stop()
            throw Failure.setup("dnsmasq on \(address) did not start answering within 5 s (running: \(running))")
        }
        return child
    }

    func testSplitDNSWithRealServers() throws {
        inPrivateNetworkNamespace {
            let myNamespace = try FileSystem.status("/proc/thread-self/ns/net", followingSymbolicLinks: true)
            try Self.run("/usr/sbin/ip", ["link", "set", "lo", "up"])
            let tunnelServer = try Self.startDnsmasq(on: "127.0.0.2", answering: "10.2.2.2")
            defer { tunnelServer.stop() }
            let fallbackServer = try Self.startDnsmasq(on: "127.0.0.3", answering: "10.3.3.3")
            defer { fallbackServer.stop() }
            // The servers run in this test's namespace, not the host's.
            let theirs = try FileSystem.status("/proc/\(tunnelServer.pid)/ns/net", followingSymbolicLinks: true)
            XCTAssertEqual(theirs?.inode, myNamespace?.inode)

            let root = try TemporaryRoot()
            try root.write("/etc/resolv.conf", "nameserver 127.0.0.3\nsearch home.lan\n")
            let before = try root.snapshot()
            let settings = DNSSettings(servers: [IPAddress("127.0.0.2")!], matchDomains: ["corp.example"])
            let applied = try DNSConfigurator(paths: root.paths, backend: .resolvConf)
                .apply(settings: settings, interfaceName: "lo", interfaceIndex: 1,
                       stateDirectory: root.stateDirectory, tunnelName: "tg0")
            let forwarder = try XCTUnwrap(applied.forwarder)
            XCTAssertEqual(forwarder.listenAddress, .ipv4([127, 0, 0, 153], port: 53))
            let written = try XCTUnwrap(try root.read("/etc/resolv.conf"))
            XCTAssertTrue(written.hasSuffix("nameserver 127.0.0.153\nsearch corp.example home.lan\n"), written)
            try forwarder.start()

            let server = SocketAddress.ipv4([127, 0, 0, 153], port: 53)
            let udp: [(String, String)] = [("host.corp.example", "10.2.2.2"), ("CORP.EXAMPLE", "10.2.2.2"),
                                           ("www.example.org", "10.3.3.3"), ("notcorp.example", "10.3.3.3")]
            for (index, (name, expected)) in udp.enumerated() {
                let id = UInt16(0x7700 + index)
                let reply = try XCTUnwrap(try udpExchange(query(name, id: id), with: server), "UDP \(name)")
                XCTAssertEqual(firstAddress(in: reply)?.address, expected, "UDP \(name)")
                XCTAssertEqual(firstAddress(in: reply)?.id, id)
            }
            let answers = try tcpExchange([query("db.corp.example", id: 1), query("example.net", id: 2)], with: server)
            let byID = Dictionary(uniqueKeysWithValues: answers.compactMap(firstAddress).map { ($0.id, $0.address) })
            XCTAssertEqual(byID, [1: "10.2.2.2", 2: "10.3.3.3"], "TCP")

            waitForAnswers(forwarder, 6)
            let stats = forwarder.statistics
            XCTAssertEqual(stats.forwardedToTunnel, 3)
            XCTAssertEqual(stats.forwardedToFallback, 3)
            XCTAssertEqual(stats.answered, 6)
            XCTAssertEqual(stats.malformed + stats.timedOut + stats.upstreamErrors + stats.overloaded, 0, "\(stats)")

            try forwarder.stop()
            try DNSConfigurator.restore(stateDirectory: root.stateDirectory, tunnelName: "tg0")
            XCTAssertEqual(try root.snapshot(), before)
            // Nothing listens on 127.0.0.153 any more.
            XCTAssertNil(try udpExchange(query("host.corp.example"), with: server, timeout: 0.3))
        }
    }
}
