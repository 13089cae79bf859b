import LinuxSystem

ProcessControl.exit(LabCommandLine.run(Array(CommandLine.arguments.dropFirst())))
