// tunnelgate-cni: the CNI plugin (docs/cni.md). The runtime runs it with CNI_COMMAND and friends in
// the environment and the network configuration on standard input; the result or the CNI error goes
// to standard output, logs to standard error.
import CNI
import LinuxSystem

let input: [UInt8]
do { input = try StandardStreams.readInput(limit: 1 << 20) } catch {
    let failure = CNIError(.ioFailure, "cannot read the network configuration from standard input", details: error.description)
    StandardStreams.write(failure.json(cniVersion: CNIVersion.latest.description) + "\n", to: 1)
    ProcessControl.exit(1)
}
var environment: [String: String] = [:]
for entry in ProcessControl.environment() {
    guard let eq = entry.firstIndex(of: "=") else { continue }
    environment[String(entry[..<eq])] = String(entry[entry.index(after: eq)...])
}
let outcome = CNIPlugin().run(environment: environment, input: input)
for line in outcome.log { StandardStreams.write(line + "\n", to: 2) }
if !outcome.standardOutput.isEmpty { StandardStreams.write(outcome.standardOutput + "\n", to: 1) }
ProcessControl.exit(outcome.exitStatus)
