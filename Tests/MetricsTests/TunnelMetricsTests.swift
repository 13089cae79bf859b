import Engine
import Foundation
@testable import Metrics
import TunnelgateSettings
import XCTest

final class TunnelMetricsTests: XCTestCase {
    /// A report as `tunnelgate status --json` prints it, with the members of `extra` (a JSON object's
    /// members, without braces) put in place of the defaults.
    func report(_ extra: String = "", runtime: String? = nil) throws -> TunnelReport {
        let base = """
        {"name": "tg0", "status": "connected", "pid": 4242, "addresses": [], "ipv4Routes": {"included": 1, "excluded": 0},
         "ipv6Routes": {"included": 0, "excluded": 0}, "rules": 1, "killSwitch": false, "firewallDifferences": [],
         "residue": false}
        """
        var members = try JSONSerialization.jsonObject(with: Data(base.utf8)) as! [String: Any]
        if !extra.isEmpty {
            let text = "{" + extra.drop { $0 == "," || $0 == " " } + "}"
            for (k, v) in try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any] { members[k] = v }
        }
        var r = try JSONDecoder().decode(TunnelReport.self, from: JSONSerialization.data(withJSONObject: members))
        if let runtime { r.runtime = try JSONParser.parse(Array(runtime.utf8)) }
        return r
    }

    func lines(_ snapshots: [TunnelSnapshot], now: Double = 1_000_000) -> [String] {
        let text = TunnelMetrics.exposition([NamespaceSnapshot(name: "ns1", tunnels: snapshots)], now: now,
                                            scrapeSeconds: 0.01, collector: CollectorCounters()).render()
        return text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
    }

    func testTheStatusIsOneSeriesPerNEVPNStatusWithOneSet() throws {
        let out = lines([TunnelSnapshot(report: try report(#", "status": "reasserting""#))])
        let status = out.filter { $0.hasPrefix("tunnelgate_tunnel_status{") }
        XCTAssertEqual(status, [
            #"tunnelgate_tunnel_status{tunnel="tg0",namespace="ns1",status="disconnected"} 0"#,
            #"tunnelgate_tunnel_status{tunnel="tg0",namespace="ns1",status="connecting"} 0"#,
            #"tunnelgate_tunnel_status{tunnel="tg0",namespace="ns1",status="connected"} 0"#,
            #"tunnelgate_tunnel_status{tunnel="tg0",namespace="ns1",status="reasserting"} 1"#,
            #"tunnelgate_tunnel_status{tunnel="tg0",namespace="ns1",status="disconnecting"} 0"#,
        ])
        XCTAssertTrue(out.contains(#"tunnelgate_namespace_up{namespace="ns1"} 1"#))
        XCTAssertTrue(out.contains(#"tunnelgate_tunnels{namespace="ns1"} 1"#))
    }

    func testReassertingSaysWhetherTheCarrierPathOrTheRuntimeCausedIt() throws {
        let carrier = lines([TunnelSnapshot(report: try report(#", "status": "reasserting""#, runtime: #"{"state": "ready"}"#))])
        XCTAssertTrue(carrier.contains(#"tunnelgate_reasserting{tunnel="tg0",namespace="ns1",cause="carrier_path"} 1"#))
        XCTAssertTrue(carrier.contains(#"tunnelgate_reasserting{tunnel="tg0",namespace="ns1",cause="runtime"} 0"#))
        let runtime = lines([TunnelSnapshot(report: try report(#", "status": "reasserting""#, runtime: #"{"state": "reconnecting"}"#))])
        XCTAssertTrue(runtime.contains(#"tunnelgate_reasserting{tunnel="tg0",namespace="ns1",cause="carrier_path"} 0"#))
        XCTAssertTrue(runtime.contains(#"tunnelgate_reasserting{tunnel="tg0",namespace="ns1",cause="runtime"} 1"#))
        let connected = lines([TunnelSnapshot(report: try report(runtime: #"{"state": "reconnecting"}"#), lastReassertAt: 999_990)])
        XCTAssertEqual(connected.filter { $0.hasPrefix("tunnelgate_reasserting{") && $0.hasSuffix(" 1") }, [])
        XCTAssertTrue(connected.contains(#"tunnelgate_last_reassert_timestamp_seconds{tunnel="tg0",namespace="ns1"} 999990"#))
    }

    func testCountersComeFromTheKernelAndTheRecord() throws {
        let counters = """
        , "interfaceCounters": {"txPackets": 10, "rxPackets": 20, "txBytes": 1000, "rxBytes": 18446744073709551615},
        "counters": {"packetsFromHost": 5, "bytesFromHost": 500, "packetsToHost": 6, "bytesToHost": 600,
          "droppedNoRuntime": 1, "droppedNotIP": 2, "droppedOverMTU": 3, "droppedMalformed": 4, "droppedWriteFailed": 5,
          "droppedRefused": 6, "queueFull": 7, "retries": 8, "handOffs": 9, "handOffSeconds": 0.25, "repairs": 2}
        """
        let out = lines([TunnelSnapshot(report: try report(counters))])
        let labels = #"{tunnel="tg0",namespace="ns1"}"#
        for expected in [
            "tunnelgate_interface_transmit_bytes_total\(labels) 1000", "tunnelgate_interface_transmit_packets_total\(labels) 10",
            "tunnelgate_interface_receive_bytes_total\(labels) 18446744073709551615",
            "tunnelgate_interface_receive_packets_total\(labels) 20",
            "tunnelgate_host_to_tunnel_packets_total\(labels) 5", "tunnelgate_tunnel_to_host_bytes_total\(labels) 600",
            #"tunnelgate_dropped_packets_total{tunnel="tg0",namespace="ns1",reason="over_mtu"} 3"#,
            #"tunnelgate_dropped_packets_total{tunnel="tg0",namespace="ns1",reason="write_failed"} 5"#,
            #"tunnelgate_dropped_packets_total{tunnel="tg0",namespace="ns1",reason="refused"} 6"#,
            "tunnelgate_backpressure_queue_full_total\(labels) 7", "tunnelgate_backpressure_resent_packets_total\(labels) 8",
            "tunnelgate_runtime_handoffs_total\(labels) 9", "tunnelgate_runtime_handoff_seconds_total\(labels) 0.25",
            "tunnelgate_repairs_total\(labels) 2", "tunnelgate_failed_closed\(labels) 0",
        ] {
            XCTAssertTrue(out.contains(expected), "missing: \(expected)")
        }
    }

    func testWireGuardPeersHaveTheirHandshakeAgeAndTransfer() throws {
        let runtime = """
        {"state": "ready", "kind": "wireguard", "peers": [
          {"publicKey": "AbC+/=", "latestHandshake": 999950, "rxBytes": 100, "txBytes": 200},
          {"publicKey": "never", "latestHandshake": 0, "rxBytes": 0, "txBytes": 0}]}
        """
        let out = lines([TunnelSnapshot(report: try report(runtime: runtime))], now: 1_000_000)
        XCTAssertTrue(out.contains(#"tunnelgate_wireguard_peer_last_handshake_timestamp_seconds{tunnel="tg0",namespace="ns1",peer="AbC+/="} 999950"#))
        XCTAssertTrue(out.contains(#"tunnelgate_wireguard_peer_handshake_age_seconds{tunnel="tg0",namespace="ns1",peer="AbC+/="} 50"#))
        XCTAssertTrue(out.contains(#"tunnelgate_wireguard_peer_receive_bytes_total{tunnel="tg0",namespace="ns1",peer="AbC+/="} 100"#))
        XCTAssertTrue(out.contains(#"tunnelgate_wireguard_peer_transmit_bytes_total{tunnel="tg0",namespace="ns1",peer="AbC+/="} 200"#))
        XCTAssertTrue(out.contains(#"tunnelgate_wireguard_peer_last_handshake_timestamp_seconds{tunnel="tg0",namespace="ns1",peer="never"} 0"#))
        XCTAssertFalse(out.contains { $0.hasPrefix("tunnelgate_wireguard_peer_handshake_age_seconds") && $0.contains("never") },
                       "no age before the first handshake")
    }

    func testMeshPeersAndTheRuntimesOwnQueueFull() throws {
        let runtime = #"{"state": "ready", "alivePeers": 2, "queueFull": 12, "peers": [{"state": "alive"}, {"state": "alive"}, {"state": "dead"}]}"#
        let out = lines([TunnelSnapshot(report: try report(runtime: runtime))])
        XCTAssertTrue(out.contains(#"tunnelgate_mesh_peers_alive{tunnel="tg0",namespace="ns1"} 2"#))
        XCTAssertTrue(out.contains(#"tunnelgate_mesh_peers{tunnel="tg0",namespace="ns1"} 3"#))
        XCTAssertTrue(out.contains(#"tunnelgate_runtime_queue_full_total{tunnel="tg0",namespace="ns1"} 12"#))
        XCTAssertFalse(out.contains { $0.hasPrefix("tunnelgate_wireguard_") }, "not a WireGuard runtime")
    }

    func testTheKillSwitchIsOnAndWhetherItsContentMatches() throws {
        let tampered = #", "firewall": "tampered with", "firewallIsKillSwitch": true, "firewallDifferences": ["nftables: a", "nftables: b"]"#
        let out = lines([TunnelSnapshot(report: try report(tampered))])
        XCTAssertTrue(out.contains(#"tunnelgate_kill_switch_enabled{tunnel="tg0",namespace="ns1"} 1"#))
        XCTAssertTrue(out.contains(#"tunnelgate_kill_switch_intact{tunnel="tg0",namespace="ns1"} 0"#))
        XCTAssertTrue(out.contains(#"tunnelgate_firewall_state{tunnel="tg0",namespace="ns1",state="tampered_with"} 1"#))
        XCTAssertTrue(out.contains(#"tunnelgate_firewall_state{tunnel="tg0",namespace="ns1",state="as_planned"} 0"#))
        XCTAssertTrue(out.contains(#"tunnelgate_firewall_differences{tunnel="tg0",namespace="ns1"} 2"#))
        let intact = lines([TunnelSnapshot(report: try report(#", "firewall": "as planned", "firewallIsKillSwitch": true, "killSwitch": true"#))])
        XCTAssertTrue(intact.contains(#"tunnelgate_kill_switch_intact{tunnel="tg0",namespace="ns1"} 1"#))
        let none = lines([TunnelSnapshot(report: try report())])
        XCTAssertFalse(none.contains { $0.hasPrefix("tunnelgate_kill_switch") || $0.hasPrefix("tunnelgate_firewall") },
                       "a tunnel without a table has no kill-switch series")
    }

    func testALastErrorIsALabelEscapedAsTheFormatWants() throws {
        let r = try report(#", "status": "disconnected", "pid": null, "lastDisconnectError": "the runtime failed: \"x\"\nline 2""#)
        let out = lines([TunnelSnapshot(report: r)])
        XCTAssertTrue(out.contains(#"tunnelgate_last_disconnect_error_info{tunnel="tg0",namespace="ns1",message="the runtime failed: \"x\"\nline 2"} 1"#))
        XCTAssertFalse(out.contains { $0.hasPrefix("tunnelgate_failed_closed") }, "no owner, no residue: nothing to fail closed")
    }

    func testANamespaceThatCannotBeReadIsDownWithNoTunnels() {
        let text = TunnelMetrics.exposition([NamespaceSnapshot(name: "gone", error: "no such namespace")], now: 0,
                                            scrapeSeconds: 0, collector: CollectorCounters()).render()
        XCTAssertTrue(text.contains("tunnelgate_namespace_up{namespace=\"gone\"} 0\n"))
        XCTAssertFalse(text.contains("tunnelgate_tunnels{"))
    }
}
