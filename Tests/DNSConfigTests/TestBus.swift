import CSystemd
import Glibc
import LinuxSystem
import Synchronization
import XCTest
@testable import DNSConfig

/// A private D-Bus daemon: Debian's dbus-daemon (Scripts/setup.sh installs
/// it) with a configuration of our own, listening at `socketPath`, that lets
/// any connection own any name and call anything. Stopped in deinit.
final class TestBusDaemon {
    static let executable = "/usr/bin/dbus-daemon"

    let socketPath: String
    let address: String
    private let pid: Int32
    private let configPath: String

    /// Starts the daemon and returns once its socket accepts connections.
    init(socketPath: String) throws {
        guard FileSystem.exists(Self.executable) else {
            throw TestBusError("\(Self.executable) is missing: Scripts/setup.sh installs dbus-daemon")
        }
        self.socketPath = socketPath
        address = "unix:path=" + SystemBus.escaped(socketPath)
        configPath = socketPath + ".conf"
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>tunnelgate-test</type>
              <listen>unix:path=\(socketPath)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
            </busconfig>

            """
        try FileSystem.writeAtomically(configPath, Array(config.utf8), mode: 0o600)
        pid = try ProcessControl.spawn(Self.executable,
                                       ["dbus-daemon", "--config-file=\(configPath)", "--nofork", "--nopidfile"])
        let path = socketPath
        let up = eventually(5) {
            guard let socket = try? FileDescriptor.socket(family: AF_UNIX, type: .stream, nonBlocking: false) else { return false }
            defer { socket.close() }
            return (try? socket.connect(to: .unix(path))) == true
        }
        guard up else {
            stop()
            throw TestBusError("dbus-daemon did not listen on \(socketPath) within 5 s")
        }
    }

    private func stop() {
        try? ProcessControl.signal(pid, SIGTERM)
        _ = try? ProcessControl.wait(for: pid)
        FileSystem.remove(configPath)
        FileSystem.remove(socketPath)
    }

    deinit { stop() }
}

struct TestBusError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The other end of calls: a connection of its own to a `TestBusDaemon`,
/// served by its own thread, optionally owning a well-known name. Every
/// method call to one of `objects` is recorded (interface, member, the body's
/// signature as it arrived, the values read back) and answered: `Echo`
/// returns its arguments, a member in `errors` gets that error, any other
/// member returns `replies[member]` (nothing by default; Properties.Get of
/// property P returns `replies["Get P"]`). Peer.Ping is answered by sd-bus itself.
final class TestPeer: Sendable {
    struct Call: Hashable, Sendable, CustomStringConvertible {
        var path: String
        var interface: String
        var member: String
        var signature: String
        var arguments: [DBusValue]
        /// Whether the file `watching` existed when the call arrived.
        var watchedFileExisted: Bool
        var description: String { "\(interface).\(member) \(signature) \(arguments)" }
    }

    let replies: [String: [DBusValue]]
    let errors: [String: String]
    let watching: String?
    private let recorded = Mutex<[Call]>([])
    private let state = Mutex<(ready: Bool, failure: String?, uniqueName: String?)>((false, nil, nil))
    private let stopping = Atomic<Bool>(false)
    private let thread = Mutex<SystemThread?>(nil)

    init(address: String, name: String? = nil, objects: [String] = [],
         replies: [String: [DBusValue]] = [:], errors: [String: String] = [:], watching: String? = nil) throws {
        self.replies = replies
        self.errors = errors
        self.watching = watching
        let userdata = UInt(bitPattern: Unmanaged.passUnretained(self).toOpaque())
        let spawned = try SystemThread.spawn { [self] in
            serve(address: address, name: name, objects: objects,
                  userdata: UnsafeMutableRawPointer(bitPattern: userdata)!)
        }
        thread.withLock { $0 = spawned }
        guard eventually(5, { state.withLock { $0.ready || $0.failure != nil } }) else {
            close()
            throw TestBusError("the test peer did not start within 5 s")
        }
        if let failure = state.withLock({ $0.failure }) {
            close()
            throw TestBusError(failure)
        }
    }

    var calls: [Call] { recorded.withLock { $0 } }
    var uniqueName: String? { state.withLock { $0.uniqueName } }

    /// Ends the thread and the connection. Idempotent.
    func close() {
        stopping.store(true, ordering: .relaxed)
        thread.withLock { thread in
            thread?.join()
            thread = nil
        }
    }

    deinit { close() }

    private func serve(address: String, name: String?, objects: [String], userdata: UnsafeMutableRawPointer) {
        let bus: SystemBus
        do {
            bus = try SystemBus(address: address)
            if let name {
                let reply = try bus.callBus("RequestName", [.string(name), .uint32(4)]) // DBUS_NAME_FLAG_DO_NOT_QUEUE
                guard reply.first == .uint32(1) else { throw TestBusError("RequestName(\(name)) answered \(reply)") }
            }
            let handler: sd_bus_message_handler_t = { message, userdata, error in
                Unmanaged<TestPeer>.fromOpaque(userdata!).takeUnretainedValue().handle(message!, error!)
            }
            for path in objects {
                let rc = sd_bus_add_object(bus.handle, nil, path, handler, userdata)
                guard rc >= 0 else { throw TestBusError("sd_bus_add_object(\(path)): \(Errno(rawValue: -rc))") }
            }
            let unique = bus.uniqueName
            state.withLock { $0.ready = true; $0.uniqueName = unique }
        } catch {
            state.withLock { $0.failure = "the test peer: \(error)" }
            return
        }
        while !stopping.load(ordering: .relaxed) {
            let rc = sd_bus_process(bus.handle, nil)
            if rc > 0 { continue }
            if rc < 0 { break }
            _ = sd_bus_wait(bus.handle, 20_000)
        }
    }

    private func handle(_ message: OpaquePointer, _ error: UnsafeMutablePointer<sd_bus_error>) -> Int32 {
        func text(_ pointer: UnsafePointer<CChar>?) -> String { pointer.map { String(cString: $0) } ?? "" }
        let member = text(sd_bus_message_get_member(message))
        let arguments = (try? SystemBus.readAll(message)) ?? [.string("<unreadable>")]
        let call = Call(path: text(sd_bus_message_get_path(message)), interface: text(sd_bus_message_get_interface(message)),
                        member: member, signature: text(sd_bus_message_get_signature(message, 1)), arguments: arguments,
                        watchedFileExisted: watching.map(FileSystem.exists) ?? false)
        recorded.withLock { $0.append(call) }
        if let name = errors[member] {
            return sd_bus_error_set(error, name, "test peer: \(member) fails")
        }
        var reply: OpaquePointer?
        guard sd_bus_message_new_method_return(message, &reply) >= 0, let reply else { return -EIO }
        defer { sd_bus_message_unref(reply) }
        var key = member
        if member == "Get", arguments.count == 2, case .string(let property) = arguments[1] { key += " " + property }
        for value in member == "Echo" ? arguments : replies[key] ?? [] {
            guard SystemBus.append(value, to: reply) >= 0 else { return -EINVAL }
        }
        return sd_bus_send(sd_bus_message_get_bus(message), reply, nil)
    }
}
