import LinuxSystem

ProcessControl.exit(CommandLine.run(Array(CommandLine.arguments.dropFirst())))
