import Foundation
import Engine
import Glibc
import LinuxSystem
import Netlink
import TunnelgateSettings
import Synchronization
import XCTest

struct Fixed: HostResolver {
    func resolve(_ name: String) -> Result<[IPAddress], ResolveFailure> { .failure(ResolveFailure("no DNS in tests")) }
}

struct Expectation: Error, CustomStringConvertible { let description: String }
func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw Expectation(description: message()) }
}

/// The kernel state the engine may touch, for before/after comparison.
struct KernelSnapshot: Equatable {
    var links: [String]
    var rules: [RuleSpec]
    var routes: [RouteSpec]

    init(_ nl: NetlinkSocket) throws {
        links = try nl.links().map(\.name).sorted()
        rules = try nl.rules(family: .ipv4).map(\.spec) + nl.rules(family: .ipv6).map(\.spec)
        routes = try (0..<TunnelSlot.count).flatMap { i in
            try nl.routes(family: .ipv4, table: TunnelSlot(index: i).table) + nl.routes(family: .ipv6, table: TunnelSlot(index: i).table)
        } + nl.routes(family: .ipv4, table: 254) + nl.routes(family: .ipv6, table: 254)
    }
}

final class EngineTests: XCTestCase {
    static func settings(name: String = "tgtest0", included4: [String] = ["0.0.0.0/0"], v6: Bool = true) throws -> TunnelSettings {
        let json = """
        {"name": "\(name)", "tunnelRemoteAddress": "198.18.0.10", "mtu": 1400,
         "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"],
                          "includedRoutes": [\(included4.map { "\"\($0)\"" }.joined(separator: ","))], "excludedRoutes": ["198.18.0.20/32"]}
         \(v6 ? #", "ipv6Settings": {"addresses": ["fd00:8::2"], "networkPrefixLengths": [64], "includedRoutes": ["::/0"]}"# : "")}
        """
        return try TunnelSettings.parse(json: Array(json.utf8))
    }

    func testUpVerifyDownLeavesTheKernelAsItWas() {
        inPrivateNetworkNamespace {
            let gateway = try Engine()
            let before = try KernelSnapshot(gateway.netlink)
            let tunnel = try gateway.up(try Self.settings(), resolver: Fixed(), configPath: nil)
            try expect(gateway.verify(tunnel.plan, interfaceIndex: tunnel.tun.index).isEmpty, "verifies after up")
            let link = try gateway.netlink.link(named: "tgtest0")
            try expect(link?.mtu == 1400 && link?.isUp == true && link?.kind == "tun", "TUN up with mtu 1400: \(String(describing: link))")
            let routes = try gateway.netlink.routes(family: .ipv4, table: tunnel.plan.slot.table)
            try expect(routes.contains { $0.destination == IPPrefix("0.0.0.0/0")! && $0.type == .unicast && $0.outputInterface == tunnel.tun.index },
                       "default route into the tunnel in table T")
            // The carrier is exempt by identity (the slot's mark), not by a throw route anyone's packets take.
            try expect(!routes.contains { $0.destination == IPPrefix("198.18.0.10/32")! }, "no carrier throw route")
            let report = try gateway.report("tgtest0")
            try expect(report.status == .connected && report.ipv4Routes.included == 1 && report.ipv4Routes.excluded == 1
                       && report.ipv4Routes.subnets == 1 && report.ipv6Routes.included == 1 && report.ipv6Routes.excluded == 0
                       && report.ipv6Routes.subnets == 1 && report.rules == 2,
                       "status reads the kernel: \(report)")
            try tunnel.stop()
            try expect(try KernelSnapshot(gateway.netlink) == before, "kernel state identical after down")
            try expect(!FileSystem.exists(gateway.state.journalPath("tgtest0")), "journal removed after down")
        }
    }

    /// While the owner stops, `status` goes connected → disconnecting → disconnected and never reads
    /// connecting (the name still held with no record, as a tunnel starting looks).
    func testStatusNeverReadsConnectingWhileStopping() {
        inPrivateNetworkNamespace {
            let gateway = try Engine()
            let tunnel = try gateway.up(try Self.settings(v6: false), resolver: Fixed(), configPath: nil)
            tunnel.publish(status: .connected)
            let seen = Mutex<[TunnelStatus]>([])
            nonisolated(unsafe) let observer = gateway
            let poller = Thread {
                // Bounded: stops at disconnected, or after 200,000 reads.
                for _ in 0..<200_000 {
                    guard let s = try? observer.status(of: "tgtest0") else { continue }
                    seen.withLock { if $0.last != s { $0.append(s) } }
                    if s == .disconnected { return }
                }
            }
            poller.start()
            while seen.withLock({ $0.isEmpty }) { usleep(100) }
            tunnel.publish(status: .disconnecting)
            try tunnel.stop()
            while !poller.isFinished { usleep(1000) }
            let sequence = seen.withLock { $0 }
            try expect(sequence == [.connected, .disconnecting, .disconnected], "status while stopping: \(sequence)")
            try expect(!FileSystem.exists(gateway.state.statePath("tgtest0")), "the record is gone once the name is free")
        }
    }

    func testFailurePartWayRollsBackEverything() {
        inPrivateNetworkNamespace {
            // New devices in this namespace get no IPv6, so the IPv6 address of the batch fails.
            let fd = try FileDescriptor.open("/proc/sys/net/ipv6/conf/default/disable_ipv6", O_WRONLY)
            try fd.writeAll(Array("1\n".utf8))
            fd.close()
            let gateway = try Engine()
            let before = try KernelSnapshot(gateway.netlink)
            do {
                _ = try gateway.up(try Self.settings(), resolver: Fixed(), configPath: nil)
                throw Expectation(description: "up succeeded without IPv6")
            } catch let error as EngineError {
                guard case .apply(let batch, let rolledBack) = error else { throw Expectation(description: "unexpected \(error)") }
                try expect(rolledBack, "rolled back")
                try expect(batch.failures.contains { $0.error.operation.hasPrefix("ip -6 addr add fd00:8::2/64 dev tgtest0") },
                           "the error names the failed operation: \(batch)")
            }
            try expect(try KernelSnapshot(gateway.netlink) == before, "nothing left after the rollback")
            try expect(!FileSystem.exists(gateway.state.journalPath("tgtest0")), "no journal left")
        }
    }

    func testTwoTunnelsGetTheirOwnSlotsAndAnExistingNameIsRefused() {
        inPrivateNetworkNamespace {
            let gateway = try Engine()
            let a = try gateway.up(try Self.settings(name: "tga", included4: ["198.18.0.30/32"], v6: false), resolver: Fixed(), configPath: nil)
            let b = try gateway.up(try Self.settings(name: "tgb", included4: ["198.18.0.40/32"], v6: false), resolver: Fixed(), configPath: nil)
            try expect(a.plan.slot != b.plan.slot, "distinct slots")
            do {
                _ = try gateway.up(try Self.settings(name: "tga", v6: false), resolver: Fixed(), configPath: nil)
                throw Expectation(description: "second up of tga succeeded")
            } catch EngineError.alreadyRunning(let name, _) {
                try expect(name == "tga", "refused as already running")
            }
            try a.stop()
            try expect(try gateway.netlink.link(named: "tgb") != nil && gateway.verify(b.plan, interfaceIndex: b.tun.index).isEmpty,
                       "tgb intact after tga is down")
            try b.stop()
        }
    }

    func testResidueOfACrashIsRemovedFromTheJournal() {
        inPrivateNetworkNamespace {
            let gateway = try Engine()
            let before = try KernelSnapshot(gateway.netlink)
            let settings = try Self.settings()
            // Simulate a crash: journal and kernel objects stay, the TUN goes away with its descriptor.
            var tunnel: ActiveTunnel? = try gateway.up(settings, resolver: Fixed(), configPath: nil)
            let slot = tunnel!.plan.slot
            tunnel = nil  // no stop(): the lock and the TUN descriptor are released, the rules and throw routes remain
            try expect(try gateway.netlink.rules(family: .ipv4).contains { $0.spec.table == slot.table }, "rule left behind")
            try expect(try gateway.report(settings.name).residue, "status reports residue")
            // The dead owner's record last said connected (a pid no process has): while down holds the name
            // to clean up, status says disconnecting, never connected, nor connecting (the name held with
            // no record) before it is released.
            var record = try XCTUnwrap(TunnelRecord.read(from: gateway.state.statePath(settings.name)))
            record.pid = Int32.max
            record.status = .connected
            try record.write(to: gateway.state.statePath(settings.name))
            let seen = Mutex<[TunnelStatus]>([])
            let stop = Atomic<Bool>(false)
            nonisolated(unsafe) let observer = gateway
            let poller = Thread {
                for _ in 0..<1_000_000 where !stop.load(ordering: .relaxed) {
                    guard let s = try? observer.status(of: settings.name) else { continue }
                    seen.withLock { if $0.last != s { $0.append(s) } }
                }
            }
            poller.start()
            while seen.withLock({ $0.isEmpty }) { usleep(100) }
            try gateway.down(settings.name)
            stop.store(true, ordering: .relaxed)
            while !poller.isFinished { usleep(1000) }
            let sequence = seen.withLock { $0 }
            try expect(!sequence.contains(.connected) && !sequence.contains(.connecting),
                       "status while down cleans up a dead owner: \(sequence)")
            try expect(!FileSystem.exists(gateway.state.statePath(settings.name)), "the dead owner's record is gone")
            try expect(try KernelSnapshot(gateway.netlink) == before, "down removed the residue")
        }
    }
}

final class StateDirectoryTests: XCTestCase {
    func testADirectoryLeftByADeadNamespaceIsEmptied() {
        inPrivateNetworkNamespace {
            let first = try StateDirectory(create: true)
            try expect(!first.isStale, "a new directory is not stale")
            let journal = first.journalPath("tg0")
            try FileSystem.writeAtomically(journal, Array("tunnelgate-journal 1\ntunnel tg0 slot 0\n".utf8))
            try expect(first.tunnelNames() == ["tg0"], "the journal is seen")
            // Pretend the directory was written by an earlier namespace with the same inode.
            try FileSystem.writeAtomically("\(first.path)/namespace", Array("1\n".utf8))
            let reader = try StateDirectory(create: false)
            try expect(reader.isStale && reader.tunnelNames().isEmpty, "stale for readers: its tunnels are not this namespace's")
            _ = try StateDirectory(create: true)
            try expect(!FileSystem.exists(journal), "emptied when next written")
            try expect(!(try StateDirectory(create: false)).isStale, "current again")
        }
    }
}
