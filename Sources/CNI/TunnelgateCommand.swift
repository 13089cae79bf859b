import LinuxSystem

/// The `tunnelgate` command, run by the plugin: checked as a trusted file (root's, no directory on
/// the way others can write) and run through the descriptor that was checked, with a clean
/// environment, its output in files of the plugin's state directory, and a bound on its time.
public struct TunnelgateCommand: Sendable {
    public let executable: String
    let scratch: String

    /// Where the command is looked for when the configuration names none, in this order.
    public static let searchPath = ["/usr/sbin/tunnelgate", "/usr/bin/tunnelgate", "/usr/local/sbin/tunnelgate", "/usr/local/bin/tunnelgate"]

    /// `executable`: the configuration's `tunnelgate`, or nil to search. `scratch`: a path prefix in
    /// the state directory for the output files (one attachment's: operations on one attachment are
    /// serialized by its lock).
    public init(_ executable: String?, scratch: String) throws(CNIError) {
        if let executable {
            self.executable = executable
        } else if let found = Self.searchPath.first(where: { FileSystem.exists($0) }) {
            self.executable = found
        } else {
            throw CNIError(.invalidConfiguration, "tunnelgate is not installed",
                           details: "none of \(Self.searchPath.joined(separator: ", ")) exists; name the command with \"tunnelgate\"")
        }
        self.scratch = scratch
    }

    public struct Outcome: Sendable {
        public var exitStatus: Int32
        public var standardOutput: String
        public var standardError: String
        public var succeeded: Bool { exitStatus == 0 }
        /// The error lines, for a CNI error's details (tunnelgate's errors carry no secret).
        public var message: String {
            let text = standardError.isEmpty ? standardOutput : standardError
            return text.split(separator: "\n").map { $0.hasPrefix("Error: ") ? String($0.dropFirst(7)) : String($0) }
                .joined(separator: "; ")
        }
    }

    /// Runs `tunnelgate ARGS…` and waits for it, at most `timeout` seconds: then it is stopped
    /// (SIGTERM, SIGKILL 2 s later) and the outcome is an error.
    public func run(_ arguments: [String], timeout: Double) throws(CNIError) -> Outcome {
        let file: TrustedFile
        do { file = try TrustedFile.open(executable) } catch {
            throw CNIError(.invalidConfiguration, "the tunnelgate command cannot be used", details: error.description)
        }
        defer { file.close() }
        let out = scratch + ".out", err = scratch + ".err"
        defer { FileSystem.remove(out); FileSystem.remove(err) }
        let pid: Int32
        do {
            pid = try ProcessControl.spawnProcess([file.procPath] + arguments,
                                                  environment: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                                                  standardOutput: out, standardError: err)
        } catch {
            throw CNIError(.ioFailure, "cannot start \(executable)", details: error.description)
        }
        let deadline = ProcessControl.monotonicSeconds() + timeout
        var termination: ProcessControl.Termination?
        var stopped = false
        while termination == nil {
            termination = try? ProcessControl.wait(for: pid, block: false)
            if termination != nil { break }
            let now = ProcessControl.monotonicSeconds()
            if now >= deadline + 2 {
                try? ProcessControl.signal(pid, SignalNumber.kill)
                termination = try? ProcessControl.wait(for: pid)
                break
            }
            if now >= deadline, !stopped {
                try? ProcessControl.signal(pid, SignalNumber.terminate)
                stopped = true
            }
            ProcessControl.sleep(seconds: 0.01)
        }
        let read = { (path: String) in String(decoding: (try? FileSystem.read(path)) ?? nil ?? [], as: UTF8.self) }
        if stopped {
            throw CNIError(.tunnelFailed, "tunnelgate \(arguments.first ?? "") did not finish within \(Int(timeout)) s and was stopped",
                           details: read(err))
        }
        let status: Int32
        switch termination {
        case .exited(let code)?: status = code
        case .signalled(let signal)?: status = 128 + signal
        case nil: status = 255
        }
        return Outcome(exitStatus: status, standardOutput: read(out), standardError: read(err))
    }
}
