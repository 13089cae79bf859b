import LinuxSystem
import Session
import TUN
import WireGuard

/// `tunnelgate wireguard [-f] IFACE`: the built-in WireGuard as a drop-in for wireguard-go, for
/// whatever drives one (wg-quick's WG_QUICK_USERSPACE_IMPLEMENTATION, scripts that run `wireguard-go
/// wg0` and then `wg setconf`).
///
/// As wireguard-go does: the TUN IFACE (with TSO and checksum offload) and the UAPI socket
/// /var/run/wireguard/IFACE.sock are made before anything returns, so the caller's `wg setconf` finds
/// them; without -f the device then runs in a process of its own, detached, and the command exits 0
/// once it is ready (or 1 with the reason). It ends, removing the interface, when its UAPI socket file
/// is removed (wg-quick's `down` of a userspace interface), when the interface is deleted, and on
/// SIGINT or SIGTERM. All configuration comes through `wg set`/`wg setconf`:
/// the device starts with no peers, listening on a random port, with a throwaway private key of its
/// own until one is set (wireguard-go has none; with no peers, none can be used). The carrier sockets
/// stay in the namespace the command ran in when the interface is moved elsewhere.
///
/// This is the one-process mode (the device, its TUN and sockets in one privileged process), as
/// wireguard-go runs; `tunnelgate up` is the mode with the packet plane's sandbox.
extension CommandLine {
    static let wireGuardUsage = "tunnelgate wireguard [-f|--foreground] IFACE"

    static func wireGuard(_ arguments: [String]) throws -> Int32 {
        var rest = arguments
        let foreground = takeFlag(&rest, "-f") || takeFlag(&rest, "--foreground")
        let readyFD = try takeOption(&rest, "--ready-fd", .help).map { value -> Int32 in
            guard let fd = Int32(value), fd > 2 else { throw UsageError(message: "--ready-fd takes a descriptor number", command: nil) }
            return fd
        }
        guard rest.count == 1, let name = rest.first, !name.hasPrefix("-") else {
            throw WireGuardUsage("expected one interface name")
        }
        guard (1...15).contains(name.utf8.count), name != ".", name != "..",
              name.utf8.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: ":") }) else {
            throw WireGuardUsage("'\(name)' is not an interface name (1-15 printable characters, no '/', ':' or spaces)")
        }
        if !foreground && readyFD == nil { return try wireGuardDetached(name) }
        return wireGuardRun(name, readyFD: readyFD.map { FileDescriptor(rawValue: $0) })
    }

    struct WireGuardUsage: Error, CustomStringConvertible {
        let description: String
        init(_ text: String) { description = "\(text)\nUsage: \(CommandLine.wireGuardUsage)" }
    }

    /// Starts `tunnelgate wireguard --ready-fd 3 IFACE` detached and waits for its word: "ready", or
    /// why it could not start.
    static func wireGuardDetached(_ name: String) throws -> Int32 {
        let (readEnd, writeEnd) = try FileDescriptor.pipe()
        defer { readEnd.close() }
        let pid: Int32
        do {
            pid = try ProcessControl.spawnDetached("/proc/self/exe", ["tunnelgate", "wireguard", "--ready-fd", "3", name],
                                                   environment: [], logPath: "/dev/null", passing: writeEnd)
        } catch {
            writeEnd.close()
            throw error
        }
        writeEnd.close()
        var word: [UInt8] = [], chunk = [UInt8](repeating: 0, count: 512)
        let deadline = ProcessControl.monotonicSeconds() + 10
        while ProcessControl.monotonicSeconds() < deadline {
            guard (try? Poll.readable(readEnd, timeoutMilliseconds: 100)) == true else { continue }
            guard let n = try? chunk.withUnsafeMutableBytes({ try readEnd.read(into: $0) }), n > 0 else { break }
            word += chunk[0..<n]
        }
        let text = String(decoding: word, as: UTF8.self)
        if text == "ready\n" { return ExitCode.success }
        printError("Error: \(name): \(text.isEmpty ? "the device process (pid \(pid)) ended without a word" : text.trimmingSuffixNewline)")
        return ExitCode.failure
    }

    /// The device in this process, until its interface is deleted or a termination signal.
    static func wireGuardRun(_ name: String, readyFD: FileDescriptor?) -> Int32 {
        func fail(_ text: String) -> Int32 {
            if let readyFD { _ = try? readyFD.writeAll(Array(text.utf8)); readyFD.close() } else { printError("Error: \(name): \(text)") }
            return ExitCode.failure
        }
        let signals: FileDescriptor
        do { signals = try TerminationSignals.block() } catch { return fail("\(error)") }
        let tun: TunDevice
        do { tun = try TunDevice(name: name, offloads: true) } catch { return fail("the TUN \(name): \(error)") }
        let log: @Sendable (String) -> Void = { printError("tunnelgate wireguard[\(name)]: \($0)") }
        let device: WireGuardDevice
        do {
            device = try WireGuardDevice(DeviceConfiguration(privateKey: PrivateKey.generate(), listenPort: 0, fwmark: 0, peers: []),
                                         timers: .standard, log: log)
            // The interface's MTU is the caller's to set (wg-quick sets it after); the device takes up to
            // jumbo frames, the largest packet it sizes its buffers for.
            try device.start(tun: tun.packetIO(mtu: 9000), fwmark: nil, uapi: .path("/var/run/wireguard/\(name).sock"))
        } catch {
            return fail("\(error)")
        }
        if let readyFD {
            _ = try? readyFD.writeAll(Array("ready\n".utf8))
            readyFD.close()
        }
        // Until the interface is deleted (the device's TUN reports an error), its UAPI socket file is
        // removed (wg-quick's down does that for a userspace interface, as wireguard-go watches for), or
        // a signal.
        let socketPath = "/var/run/wireguard/\(name).sock"
        let changes = try? DirectoryChanges(watching: "/var/run/wireguard")
        defer { changes?.close() }
        var poll = PollSet()
        poll.add(signals, .readable)
        poll.add(changes?.descriptor ?? FileDescriptor(rawValue: -1), .readable)
        var exit = ExitCode.success
        while true {
            _ = try? poll.wait(timeoutMilliseconds: 500)
            if !poll.events(at: 0).isEmpty {
                _ = TerminationSignals.read(signals)
                break
            }
            if !poll.events(at: 1).isEmpty {
                changes?.drain()
                if !FileSystem.exists(socketPath) {
                    log("its UAPI socket \(socketPath) was removed; the device stops")
                    break
                }
            }
            if let failure = device.snapshot().failure {
                log(failure)
                exit = failure == "the TUN interface is gone" ? ExitCode.success : ExitCode.failure
                break
            }
        }
        device.stop()
        _ = tun
        return exit
    }
}

extension String {
    var trimmingSuffixNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
}
