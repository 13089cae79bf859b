import Engine
import LinuxSystem
import PlaneProtocol
import RuntimeABI

/// Why a session step failed: one line (or a few) for the user, never a secret.
public struct SessionError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The engine's side of one packet plane: the sandboxed process, its channel, and what it last said.
public final class PlaneProcess {
    public let process: SandboxedProcess
    let channel: ChannelEndpoint<EngineMessage, PlaneMessage>
    /// The plane's last report (its runtime's state and counters).
    public private(set) var lastReport: PlaneReport?
    /// When the plane last said anything (CLOCK_MONOTONIC): it reports at least once a second.
    public private(set) var lastHeard: Double
    /// Datagrams from the plane that were not messages, and messages it should not have sent.
    public private(set) var garbage = 0
    /// Why the plane said it failed, if it did.
    public private(set) var failure: String?
    /// The plane's wait status once it exited.
    public private(set) var exitStatus: Int32?
    private var nextMessageID: UInt64 = 1
    /// The runtime's one-line summary, as the plane said it when it loaded it.
    public private(set) var runtimeSummary: String?
    /// Whether the plane has its read-only mount namespace (TUNNELGATE_PLANE_MOUNT_NAMESPACE).
    public private(set) var mountNamespace = true

    /// The directories a plane never sees: the engine's state, configurations and keys.
    public static let hidden = ["/run/tunnelgate", "/run/wireguard", "/etc/tunnelgate", "/etc/wireguard",
                                "/var/lib/tunnelgate", "/root", "/home"]
    /// The plane's only writable directory (a private tmpfs).
    public static let writable = "/tmp"
    /// A plane that says nothing for this long is hung.
    public static let silenceLimit = 10.0
    /// More garbage than this from one plane ends it.
    public static let garbageLimit = 16

    private init(process: SandboxedProcess, channel: ChannelEndpoint<EngineMessage, PlaneMessage>) {
        self.process = process
        self.channel = channel
        lastHeard = ProcessControl.monotonicSeconds()
    }

    deinit {
        if exitStatus == nil {
            process.signal(9)
            _ = process.wait(seconds: 2)
        }
        process.exitDescriptor.close()
        channel.descriptor.close()
    }

    /// The packet plane's executable, installed with tunnelgate: beside it (a build tree, a copy in
    /// /opt/tunnelgate/bin) or in its prefix's lib/tunnelgate (an installed system).
    public static let planeExecutableName = "tunnelgate-plane"

    /// Opens the plane's executable (CompanionExecutable: beside tunnelgate's own or in its prefix's
    /// lib/tunnelgate, trusted as tunnelgate's own is). The plane is handed the tunnel's secrets, so a
    /// file another user could replace is refused, never run.
    public static func openPlaneExecutable() throws(SessionError) -> FileDescriptor {
        try CompanionExecutable.open(planeExecutableName, role: "the packet plane's executable")
    }

    /// Starts a plane running as `user`: `executable` (a provider host's own, for its provider) or, when
    /// nil, the packet plane's executable (`openPlaneExecutable`).
    public static func spawn(user: PlaneUser, log: FileDescriptor?, arguments: [String] = [planeExecutableName],
                             executable: FileDescriptor? = nil, environment: [String] = []) throws(SessionError) -> PlaneProcess {
        let exe: FileDescriptor
        if let executable { exe = executable } else { exe = try openPlaneExecutable() }
        defer { if executable == nil { exe.close() } }
        let pair: (engine: SeqPacketChannel, plane: SeqPacketChannel)
        do { pair = try SeqPacketChannel.pair() } catch { throw SessionError("the packet plane's channel: \(error)") }
        defer { pair.plane.descriptor.close() }
        let mounts = try mountNamespace()
        let process: SandboxedProcess
        do {
            var spec = SandboxedProcess.Spec(executable: exe, channel: pair.plane.descriptor, log: log,
                                             uid: user.uid, gid: user.gid, arguments: arguments,
                                             hidden: hidden, writable: writable)
            (spec.environment, spec.testDirectory) = testHooks()
            spec.environment += environment
            spec.mountNamespace = mounts
            process = try SandboxedProcess.spawn(spec)
        } catch {
            pair.engine.descriptor.close()
            throw SessionError("\(error)")
        }
        let plane = PlaneProcess(process: process, channel: ChannelEndpoint(pair.engine))
        plane.mountNamespace = mounts
        return plane
    }

    /// The variable that lets a plane start without its mount namespace: `off` where the engine has no
    /// CAP_SYS_ADMIN (a container given NET_ADMIN alone: the VPN image of Scripts/vpn-image.sh sets it).
    /// Unset or `on`: the mount namespace, and `up` fails without CAP_SYS_ADMIN.
    public static let mountNamespaceVariable = "TUNNELGATE_PLANE_MOUNT_NAMESPACE"

    /// Whether the plane gets its read-only mount namespace (TUNNELGATE_PLANE_MOUNT_NAMESPACE).
    public static func mountNamespace() throws(SessionError) -> Bool {
        switch ProcessControl.environmentValue(mountNamespaceVariable) {
        case nil, "on": return true
        case "off": return false
        case let other?:
            throw SessionError("\(mountNamespaceVariable)=\(other): not on or off")
        }
    }

    /// Test hooks, never set by Tunnelgate: TUNNELGATE_PLANE_PASS_ENVIRONMENT names variables of the
    /// engine's environment the plane gets (a test fixture's switches; never secrets), and
    /// TUNNELGATE_PLANE_TEST_DIRECTORY a host directory the plane may write in (bind-mounted at the same
    /// path). Without them the plane's environment is empty and only its own tmpfs is writable.
    static func testHooks() -> ([String], String?) {
        var environment: [String] = []
        for name in (ProcessControl.environmentValue("TUNNELGATE_PLANE_PASS_ENVIRONMENT") ?? "").split(separator: ",") {
            if let value = ProcessControl.environmentValue(String(name)) { environment.append("\(name)=\(value)") }
        }
        return (environment, ProcessControl.environmentValue("TUNNELGATE_PLANE_TEST_DIRECTORY"))
    }

    // MARK: Steps

    /// Sends `load` and waits for `loaded`: the runtime's library, symbols and secret are checked in the
    /// plane before the engine touches the kernel.
    public func load(_ load: PlaneLoad, descriptors: [FileDescriptor], tail: UnsafeRawBufferPointer?,
                     timeout: Double = 30) throws(SessionError) {
        do { try channel.send(.load(load), tail: tail, descriptors: descriptors) } catch {
            throw SessionError("sending the runtime to the packet plane: \(error)")
        }
        let deadline = ProcessControl.monotonicSeconds() + timeout
        while true {
            for event in poll(until: deadline) {
                switch event {
                case .loaded(nil, let summary): runtimeSummary = summary; return
                case .loaded(let error?, _): throw SessionError(error)
                case .exited(let status): throw SessionError("the packet plane \(SandboxedProcess.describe(status: status)) while loading the runtime"
                                                             + (failure.map { ": \($0)" } ?? ""))
                default: continue
                }
            }
            if ProcessControl.monotonicSeconds() >= deadline {
                throw SessionError("the packet plane did not load the runtime within \(Int(timeout)) s")
            }
        }
    }

    /// Sends `start` with the TUN (first) and the carrier sockets.
    public func start(_ start: PlaneStart, descriptors: [FileDescriptor]) throws(SessionError) {
        do { try channel.send(.start(start), descriptors: descriptors) } catch {
            throw SessionError("starting the packet plane's runtime: \(error)")
        }
    }

    /// Waits until the runtime reports an interface (ready, or reconnecting with one), fails, or
    /// `timeout` passes.
    public func waitUntilReady(timeout: Double) throws(SessionError) -> RuntimeState {
        let deadline = ProcessControl.monotonicSeconds() + timeout
        while true {
            for event in poll(until: min(deadline, ProcessControl.monotonicSeconds() + 0.25)) {
                switch event {
                case .report(let r):
                    let state = r.runtimeState
                    if state.phase == .failed { throw SessionError("the runtime failed while starting: \(state.error ?? "no message")") }
                    if state.phase == .ready || state.phase == .reconnecting, state.interface != nil { return state }
                    if state.phase == .stopped { throw SessionError("the runtime stopped while starting") }
                case .failed(let reason): throw SessionError(reason)
                case .exited(let status):
                    throw SessionError(failure ?? "the packet plane \(SandboxedProcess.describe(status: status)) while the runtime was starting")
                default: continue
                }
            }
            if ProcessControl.monotonicSeconds() >= deadline {
                let phase = lastReport?.phase.rawValue ?? "no report"
                throw SessionError("the runtime did not become ready within \(Int(timeout)) s (state \(phase))")
            }
        }
    }

    // MARK: Running

    /// What the plane did.
    public enum Event {
        case loaded(String?, summary: String?)
        case report(PlaneReport)
        case reply(id: UInt64, data: [UInt8]?, error: String?)
        case failed(String)
        /// A datagram that is not a message (counted; the plane is ended after `garbageLimit`).
        case garbage(String)
        case exited(Int32)
        /// A provider's messages (the NetworkExtension host).
        case provider(PlaneMessage, descriptors: [FileDescriptor])
    }

    /// Everything the plane has sent, without waiting, and its exit: first what arrived while an app
    /// message waited for its answer.
    public func drain() -> [Event] {
        let held = backlog
        backlog = []
        return held + receive()
    }

    /// Events that arrived during `message` with no one to handle them, for the next `drain`.
    private var backlog: [Event] = []

    private func receive() -> [Event] {
        var events: [Event] = []
        while true {
            let event: ChannelEndpoint<EngineMessage, PlaneMessage>.Event?
            do throws(SystemCallError) { event = try channel.receive() } catch {
                events.append(.garbage("the channel: \(error)"))
                break
            }
            guard let event else { break }
            lastHeard = ProcessControl.monotonicSeconds()
            switch event {
            case .closed:
                break
            case .garbage(let why):
                garbage += 1
                events.append(.garbage(why.description))
                continue
            case .message(let m, _, let fds):
                switch m {
                case .loaded(let error, let summary): for fd in fds { fd.close() }; events.append(.loaded(error, summary: summary))
                case .state(let r): for fd in fds { fd.close() }; lastReport = r; events.append(.report(r))
                case .reply(let id, let data, let error): for fd in fds { fd.close() }; events.append(.reply(id: id, data: data, error: error))
                case .failed(let reason): for fd in fds { fd.close() }; failure = reason; events.append(.failed(reason))
                default: events.append(.provider(m, descriptors: fds))
                }
                continue
            }
            break
        }
        if exitStatus == nil, let status = process.reap() {
            exitStatus = status
            events.append(.exited(status))
        }
        return events
    }

    /// Waits for events until `deadline` (or the first events).
    func poll(until deadline: Double) -> [Event] {
        while true {
            let events = receive()
            if !events.isEmpty || exitStatus != nil { return events }
            let left = deadline - ProcessControl.monotonicSeconds()
            if left <= 0 { return [] }
            var set = PollSet()
            set.add(channel.descriptor, .readable)
            set.add(process.exitDescriptor, .readable)
            _ = try? set.wait(timeoutMilliseconds: Int32(max(1, min(left, 1) * 1000)))
        }
    }

    /// The descriptors the owner's loop polls for this plane.
    public var descriptors: [FileDescriptor] { [channel.descriptor, process.exitDescriptor] }

    /// An app message to the runtime, answered within `timeout`. What else the plane sends meanwhile
    /// goes to `during` as it arrives (a provider asking for settings while it handles the message must
    /// be answered, or both wait); `during` returns false to stop waiting. Without `during` those events
    /// are kept for the next `drain`, so an exit or a failure is never lost.
    public func message(_ data: [UInt8], timeout: Double = 10,
                        during: ((Event) -> Bool)? = nil) -> Result<[UInt8], ControlFailure> {
        let id = nextMessageID
        nextMessageID += 1
        do throws(SystemCallError) { try channel.send(.message(id: id, data: data)) } catch {
            return .failure(ControlFailure("the packet plane: \(error)"))
        }
        let deadline = ProcessControl.monotonicSeconds() + timeout
        var answer: Result<[UInt8], ControlFailure>?
        var stopped = false
        while answer == nil, ProcessControl.monotonicSeconds() < deadline {
            // Every event of a batch is handed on, also those after the answer (a provider that replies
            // and then cancels sends both at once).
            for event in poll(until: deadline) {
                if answer == nil, case .reply(let got, let data, let error) = event, got == id {
                    answer = error.map { .failure(ControlFailure($0)) } ?? .success(data ?? [])
                    continue
                }
                if let during, !stopped {
                    if !during(event) {
                        stopped = true
                        answer = answer ?? .failure(ControlFailure("the tunnel is stopping"))
                    }
                } else {
                    backlog.append(event)
                }
                if case .exited = event, answer == nil { answer = .failure(ControlFailure("the packet plane exited")) }
            }
        }
        return answer ?? .failure(ControlFailure("the runtime did not answer within \(Int(timeout)) s"))
    }

    /// Sends a message as is (a provider's answers).
    public func send(_ message: EngineMessage, tail: UnsafeRawBufferPointer? = nil, descriptors: [FileDescriptor] = []) throws(SessionError) {
        do { try channel.send(message, tail: tail, descriptors: descriptors) } catch { throw SessionError("the packet plane: \(error)") }
    }

    /// Asks the plane to stop its runtime and exit; after `timeout` it is killed. Returns its wait status.
    @discardableResult
    public func stop(timeout: Double = 10) -> Int32? {
        if exitStatus == nil { try? channel.send(.stop) }
        if exitStatus == nil, let status = process.wait(seconds: timeout) { exitStatus = status }
        if exitStatus == nil {
            process.signal(9)
            exitStatus = process.wait(seconds: 5)
        }
        _ = drain()
        return exitStatus
    }

    /// Kills the plane at once (hung, flooding, garbling).
    public func kill() {
        guard exitStatus == nil else { return }
        process.signal(9)
        exitStatus = process.wait(seconds: 5)
    }
}
