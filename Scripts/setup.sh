#!/usr/bin/env bash
# Installs the Debian packages Tunnelgate builds and tests with. Idempotent:
# packages already present are not fetched again, and apt's lists are only
# refreshed when something is missing.
set -euo pipefail

packages=(
  pkg-config      # finds libmnl/libnftnl/libsodium/libsystemd for the system-library targets
  libmnl-dev      # netlink (rtnetlink) over libmnl
  libnftnl-dev    # nftables objects over libnftnl
  libseccomp-dev  # the packet plane's seccomp allow-list (CPlaneSeccomp)
  libsodium-dev   # X25519 and the handshake's AEADs for the built-in WireGuard; the example runtime's AEAD
  libssl-dev      # OpenSSL 3: ChaCha20 and Poly1305 of libcrypto.a, linked into the transport AEAD (CTransportAEAD); TLS of a
                  # NetworkExtension provider's createTCPConnection (COpenSSL, CTunnelgateTLS)
  ca-certificates # the system trust store (/etc/ssl/certs) those connections verify servers against
  openssl         # openssl(1): the provider-connection scenario makes its CA and runs its TLS server with it
  libsystemd-dev  # sd-bus: the D-Bus client of the systemd-resolved DNS backend
  dbus-daemon     # a private message bus for the D-Bus unit tests and the systemd-resolved scenario
  iproute2        # ip(8): tests and the demo observe kernel state with it
  nftables        # nft(8): tests observe the ruleset with it
  iputils-ping    # real traffic in end-to-end tests
  procps          # sysctl, pgrep
  jq              # tests read configs and status --json with it
  dnsmasq-base    # real DNS servers: the LAN's and the tunnel's resolvers in tests
  iperf3          # real TCP and UDP transfers through tunnels (tests and benchmarks)
  wireguard-go    # the real WireGuard peer the built-in runtime is tested and measured against
  wireguard-tools # wg(8): configures wireguard-go, and reads Tunnelgate's WireGuard API socket
  libxml2-utils   # xmllint: the lab's tests check that its JUnit files are well-formed XML
  strace          # the leak scenarios' order check slows the engine's ioctls (its TUN) when a look cannot tell
  python3         # the WireGuard scenario's hostile-traffic sender (garbage, replay, flood); Scripts/man.py
  binutils        # strip and objdump: Scripts/install.sh, Scripts/package-deb.sh
  dpkg-dev        # dpkg-shlibdeps: the package's Depends from the libraries the binaries link
  groff-base      # groff: the man pages' test renders and lints them
  man-db          # lexgrog: the man pages' test checks that their NAME line can be indexed
  mmdebstrap      # the package test installs the .deb into a clean Debian root it makes; Scripts/vpn-image.sh builds the VPN image from one
  systemd         # systemd-analyze verify of the units (systemd need not be running)
  systemd-container # systemd-nspawn: the unit test boots a Debian container to run the units under systemd
  zsh             # the completion test exercises the zsh completion too
  prometheus      # a real Prometheus scrapes `tunnelgate metrics` in netns/tests/metrics.sh (run by the test, not as a service)
  python3-dbus    # a stand-in for logind on a private bus: sends PrepareForSleep (netns/tests/networkextension-sleep.sh, netns/tests/logind_standin.py)
  python3-gi      # GLib's main loop for that stand-in, which serves Inhibit and ListInhibitors as logind does
  nodejs          # runs the PAC files the proxy writer makes (NetworkExtensionTests), as a browser would
  # Real container engines for the container scenarios (netns/containers.sh, docs/cni.md). Each test runs
  # them with private configuration and storage under its temporary directory, never the machine's own.
  podman          # Podman 4.3 with its CNI backend: calls tunnelgate-cni as Kubernetes' runtimes do
  runc            # the OCI runtime podman and dockerd use (crun cannot set a container's rlimits in this VM)
  containernetworking-plugins # bridge, host-local, loopback: the main plugins tunnelgate-cni chains after
  busybox-static  # the test image's root file system: one static binary (Scripts/container-image.sh)
  docker.io       # dockerd, started by hand by the Docker scenario (brings containerd, tini and iptables)
)

if [ "$(id -u)" -ne 0 ]; then
  echo "Error: Scripts/setup.sh installs packages and must run as root" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Installing a package must not start its service (docker.io's dockerd would take over the machine's
  # iptables): without a policy of the machine's own, invoke-rc.d is told "not now" (101) meanwhile.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
  fi
  rc=0
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
  [ "$own_policy" = 1 ] && rm -f "$policy"
  [ "$rc" -eq 0 ] || exit "$rc"
fi

command -v swift >/dev/null || { echo "Error: swift is not on PATH (expected the Swift toolchain, e.g. /opt/swift/usr/bin)" >&2; exit 1; }
