#!/usr/bin/env python3
"""Starts a provider host the way NEVPNConnection.startVPNTunnel does, for the scenarios that start one
by hand: its configuration as its descriptor 3, a sealed memfd named tunnelgate-host-configuration
(TunnelgateHostHandoff), never in its environment.

  handoff.py JSON CMD [ARG...]     JSON: {"interfaceName": "tge", "includeAllNetworks": false, …}

The memfd gets every seal (no write, shrink or grow, no more seals) before CMD runs, as the manager's;
this process execs CMD, so CMD has this pid.
"""
import fcntl
import os
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    fd = os.memfd_create("tunnelgate-host-configuration", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, sys.argv[1].encode())
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
    if fd != 3:
        os.dup2(fd, 3, inheritable=True)
        os.close(fd)
    else:
        os.set_inheritable(3, True)
    os.execvp(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
