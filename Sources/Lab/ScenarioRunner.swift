import FoundationEssentials
import LinuxSystem

/// `tunnelgate-lab run SCENARIO`: a fresh run of the topology, the scenario script run against it
/// with the lab's shell functions, the results collected, the run torn down whatever happens
/// (the script fails, SIGINT, SIGTERM), TAP and JUnit written.
public struct ScenarioRunner {
    public var scenario: String
    public var scenarioArguments: [String]
    public var topologyPath: String
    public var runID: String?
    public var tapPath: String?
    public var junitPath: String?
    /// This program, for the scenario's `lab` function.
    public var labBinary: String

    public init(scenario: String, scenarioArguments: [String], topologyPath: String, runID: String?, tapPath: String?,
                junitPath: String?, labBinary: String) {
        self.scenario = scenario
        self.scenarioArguments = scenarioArguments
        self.topologyPath = topologyPath
        self.runID = runID
        self.tapPath = tapPath
        self.junitPath = junitPath
        self.labBinary = labBinary
    }

    /// The functions every scenario has (sourced before it).
    public static let library = #"""
    # tunnelgate-lab scenario library: sourced by `tunnelgate-lab run` before the scenario.
    lab() { "$TUNNELGATE_LAB" "$@"; }
    phase() { "$TUNNELGATE_LAB" phase "$@"; }
    expect() { "$TUNNELGATE_LAB" expect "$@"; }
    expect-no-leaks() { "$TUNNELGATE_LAB" expect-no-leaks "$@"; }
    # in_node NODE CMD...: CMD inside NODE.
    in_node() { local node=$1; shift; "$TUNNELGATE_LAB" exec "$node" -- "$@"; }
    # in_node_background NODE LOG CMD...: CMD inside NODE in the background, output to LOG; its pid in $!.
    in_node_background() { local node=$1 log=$2; shift 2; "$TUNNELGATE_LAB" exec "$node" -- "$@" >"$log" 2>&1 & }
    # lab_wait TIMEOUT_S CMD...: polls CMD every 0.1 s until it succeeds; false after TIMEOUT_S seconds.
    lab_wait() {
      local timeout=$1 start=$SECONDS; shift
      until "$@" >/dev/null 2>&1; do
        [ $((SECONDS - start)) -ge "$timeout" ] && return 1
        sleep 0.1
      done
    }
    # note TEXT: a line in the scenario's output (not a result).
    note() { printf '# %s\n' "$*"; }
    """#

    public func run() -> Int32 {
        let signals: TerminationSignalDescriptor
        do { signals = try TerminationSignalDescriptor() } catch {
            ProcessControl.writeStandardError("tunnelgate-lab: \(error)\n")
            return 1
        }
        let started = ProcessControl.wallClockSeconds()
        let bytes: [UInt8]
        let topology: Topology
        do {
            guard let b = try FileSystem.read(topologyPath) else { throw LabError("no topology file \(topologyPath)") }
            bytes = b
            topology = try Topology.parse(json: b)
        } catch let e as ConfigurationErrorLike {
            ProcessControl.writeStandardError(e.lines.map { "tunnelgate-lab: \(topologyPath): \($0)\n" }.joined())
            return 1
        } catch {
            ProcessControl.writeStandardError("tunnelgate-lab: \(topologyPath): \(error)\n")
            return 1
        }
        guard FileSystem.exists(scenario) else {
            ProcessControl.writeStandardError("tunnelgate-lab: no scenario file \(scenario)\n")
            return 1
        }
        let lab: Lab
        do {
            lab = try Lab.up(topology: topology, topologyBytes: bytes, topologyPath: topologyPath, id: runID, owner: ProcessControl.id)
        } catch {
            ProcessControl.writeStandardError("tunnelgate-lab: up: \(error)\n")
            return 1
        }
        let dir = lab.registry.directory(lab.state.id)
        // Results and the library live outside the run's directory, which goes at teardown.
        let work = "/tmp/tunnelgate-lab-\(lab.state.id)-\(ProcessControl.id)"
        try? FileSystem.makeDirectory(work, mode: 0o700)
        defer { FileSystem.removeTree(work) }
        let results = "\(work)/results.jsonl", libraryPath = "\(work)/lib.sh"
        try? FileSystem.write(libraryPath, Self.library + "\n")
        print("# run \(lab.state.id): \(scenario) on \(topologyPath)")
        for n in topology.nodes { print("# node \(n.name) \(lab.state.namespaces[n.name] ?? "?")") }
        ProcessControl.flushStandardOutput()
        _ = dir
        var env = ProcessControl.environment().filter {
            !$0.hasPrefix("TUNNELGATE_LAB_RUN=") && !$0.hasPrefix("TUNNELGATE_LAB_RESULTS=") && !$0.hasPrefix("TUNNELGATE_LAB=")
        }
        env += ["TUNNELGATE_LAB_RUN=\(lab.state.id)", "TUNNELGATE_LAB_RESULTS=\(results)", "TUNNELGATE_LAB=\(labBinary)",
                "TUNNELGATE_LAB_LIB=\(libraryPath)", "TUNNELGATE_LAB_TOPOLOGY=\(topologyPath)", "TUNNELGATE_LAB_WORK=\(work)"]
        let script = "set -u; . \"$TUNNELGATE_LAB_LIB\"; . \"$0\""
        var interrupted: Int32?
        var exitStatus: ProcessControl.Termination?
        do {
            let pid = try ProcessControl.spawnProcess(["bash", "--noprofile", "--norc", "-c", script, scenario] + scenarioArguments,
                                                      environment: env, newProcessGroup: true)
            while exitStatus == nil {
                if let s = signals.wait(timeoutMilliseconds: 100) {
                    interrupted = s
                    ProcessControl.signalGroup(pid, 15)
                    if !Lab.poll(seconds: 5, { (try? ProcessControl.wait(for: pid, block: false)).flatMap { $0 } != nil || ProcessControl.hasExited(pid) }) {
                        ProcessControl.signalGroup(pid, 9)
                    }
                    exitStatus = (try? ProcessControl.wait(for: pid)) ?? .signalled(s)
                    break
                }
                exitStatus = try ProcessControl.wait(for: pid, block: false)
            }
            // Whatever the script left running in its group.
            ProcessControl.signalGroup(pid, 9)
        } catch {
            ProcessControl.writeStandardError("tunnelgate-lab: cannot run the scenario: \(error)\n")
            exitStatus = .exited(127)
        }
        var list = TestResult.parse(lines: String(decoding: ((try? FileSystem.read(results)) ?? nil) ?? [], as: UTF8.self))
        let phase = (try? lab.registry.load(lab.state.id))?.phase ?? ""
        if let s = interrupted {
            let r = TestResult(phase: phase, name: "scenario interrupted by \(s == 2 ? "SIGINT" : s == 15 ? "SIGTERM" : "signal \(s)")",
                               passed: false, detail: "the run was torn down")
            Expectations.record(r)
            list.append(r)
        } else if let e = exitStatus, e != .exited(0), list.allSatisfy(\.passed) {
            let words: String
            switch e {
            case .exited(let c): words = "exit status \(c)"
            case .signalled(let s): words = "signal \(s)"
            }
            let r = TestResult(phase: phase, name: "scenario script ends successfully", passed: false,
                               detail: "it ended with \(words) without a failed assertion")
            Expectations.record(r)
            list.append(r)
        }
        if list.isEmpty {
            let r = TestResult(phase: phase, name: "scenario made at least one assertion", passed: false, detail: "it made none")
            Expectations.record(r)
            list.append(r)
        }
        let problems = lab.tearDown()
        for p in problems {
            let r = TestResult(phase: "teardown", name: "teardown removes everything", passed: false, detail: p)
            Expectations.record(r)
            list.append(r)
        }
        let timestamp = Date(timeIntervalSince1970: started).formatted(.iso8601)
        do {
            if let tapPath { try FileSystem.write(tapPath, TAPWriter.render(scenario: scenario, results: list)) }
            if let junitPath {
                try FileSystem.write(junitPath, JUnitWriter.render(scenario: scenario, results: list, timestamp: timestamp,
                                                                   hostname: ProcessControl.hostName))
            }
        } catch {
            ProcessControl.writeStandardError("tunnelgate-lab: cannot write the results: \(error)\n")
            return 1
        }
        let failed = list.filter { !$0.passed }.count
        print("\(list.count - failed) passed, \(failed) failed")
        ProcessControl.flushStandardOutput()
        if let s = interrupted { return 128 + s }
        return failed == 0 ? 0 : 1
    }
}

/// A parse error of a topology (ConfigurationError) seen through what the runner prints.
protocol ConfigurationErrorLike: Error { var lines: [String] { get } }
