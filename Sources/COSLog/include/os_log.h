// os.log: the submodule `import os.log` names. Everything it offers is Swift, in the overlay
// (Sources/os: Logger, OSLog, OSLogType, os_log); this header only gives the submodule a body.
#ifndef TUNNELGATE_OS_LOG_H
#define TUNNELGATE_OS_LOG_H

/// The version of Tunnelgate's os.log stand-in (for C code that wants to tell it from Apple's).
#define TUNNELGATE_OS_LOG 1

#endif
