#!/usr/bin/env bash
# Builds tunnelgate_VERSION_ARCH.deb with dpkg-deb from a tree staged by Scripts/install.sh
# (docs/packaging.md). VERSION is what the built `tunnelgate --version` prints; Depends: is derived:
#   - the shared libraries the binaries link, by dpkg-shlibdeps (package names and minimum versions
#     from Debian's shlibs and symbols files): libc6, libmnl0, libnftnl11, libsodium23, libsystemd0 …
#   - the packages of the programs the maintainer scripts need (none today), by dpkg -S
# and Built-Using: names the openssl source whose static libcrypto's ChaCha20 and Poly1305 are linked in.
#   - nothing for programs tunnelgate runs: it starts only itself (/proc/self/exe, for --detach) and its
#     packet plane (/usr/lib/tunnelgate/tunnelgate-plane, in the package), and
#     talks to the kernel through libmnl/libnftnl, never through ip(8) or nft(8)
#     (netns/tests/package.sh checks that claim against the sources).
#
#   Scripts/package-deb.sh [--output DIR]     default DIR: .build/package
#
# Prints the path of the .deb on its last line.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
output=$root/.build/package
while [ $# -gt 0 ]; do
  case $1 in
  --output) [ $# -ge 2 ] || { echo "Error: --output needs a directory" >&2; exit 64; }; output=$2; shift 2 ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "Error: unknown argument '$1'" >&2; echo "Usage: Scripts/package-deb.sh [--output DIR]" >&2; exit 64 ;;
  esac
done
for tool in dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || { echo "Error: $tool not found (Scripts/setup.sh installs dpkg-dev)" >&2; exit 1; }
done
mkdir -p "$output"
output=$(cd "$output" && pwd)

# A work directory of its own, so that two runs at once (two tests) do not share one.
mkdir -p "$root/.build"
work=$(mktemp -d "$root/.build/package-work.XXXXXX")
trap 'rm -rf "$work"' EXIT
# dpkg-shlibdeps expects the tree where debhelper would put it: debian/PACKAGE of a source directory.
tree=$work/src/debian/tunnelgate

# --- The tree -----------------------------------------------------------------------------------------
bash Scripts/install.sh --prefix /usr --destdir "$tree" >"$work/install.log" || {
  cat "$work/install.log" >&2
  exit 1
}
tail -n 1 "$work/install.log"
# dpkg keeps its own list of the package's files; install.sh's manifest is not shipped.
rm -f "$tree/usr/lib/tunnelgate/install-manifest" "$tree/usr/lib/tunnelgate/install-manifest.dirs"

version=$("$tree/usr/sbin/tunnelgate" --version)
[[ $version =~ ^[0-9][A-Za-z0-9.+~-]*$ ]] || { echo "Error: '$version' (tunnelgate --version) is not a Debian version" >&2; exit 1; }
arch=$(dpkg --print-architecture)

# --- Depends ------------------------------------------------------------------------------------------
# dpkg-shlibdeps reads debian/control of a source package; a minimal one in a directory of its own.
# (The tree is in its debian/ already; its DEBIAN/ tells dpkg-shlibdeps where the package's root is.)
mkdir -p "$tree/DEBIAN"
printf 'Source: tunnelgate\n\nPackage: tunnelgate\nArchitecture: any\n' >"$work/src/debian/control"
elfs=()
while IFS= read -r -d '' f; do
  if [ "$(head -c 4 "$work/src/$f" | od -An -c | tr -d ' ')" = '177ELF' ]; then elfs+=("$f"); fi
done < <(cd "$work/src" && find debian/tunnelgate -type f -print0 | sort -z)
(cd "$work/src" && dpkg-shlibdeps -O --warnings=1 "${elfs[@]/#/-e}") >"$work/shlibs" 2>"$work/shlibs.err" || {
  cat "$work/shlibs.err" >&2
  exit 1
}
shlib_depends=$(sed -n 's/^shlibs:Depends=//p' "$work/shlibs")
[ -n "$shlib_depends" ] || { echo "Error: dpkg-shlibdeps found no dependencies" >&2; cat "$work/shlibs.err" >&2; exit 1; }

# The programs the maintainer scripts cannot do without (none today: they run systemctl and
# systemd-tmpfiles only where systemd runs).
tool_depends=()
for tool in; do
  path=$(command -v "$tool") || { echo "Error: $tool is not installed here, so its package is unknown" >&2; exit 1; }
  path=$(readlink -f "$path")
  package=$(dpkg -S "$path" 2>/dev/null | sed -n 's/^\([^:]*\): .*/\1/p' | head -n 1)
  # With /usr merged, dpkg may know the file under its unmerged name (/sbin/… for /usr/sbin/…).
  [ -n "$package" ] || package=$(dpkg -S "${path#/usr}" 2>/dev/null | sed -n 's/^\([^:]*\): .*/\1/p' | head -n 1)
  [ -n "$package" ] || { echo "Error: no package owns $path (dpkg -S)" >&2; exit 1; }
  tool_depends+=("$package")
done
depends="$shlib_depends"
for p in "${tool_depends[@]}"; do depends+=", $p"; done

# --- Built-Using --------------------------------------------------------------------------------------
# Code linked in from another source package's static library (Debian policy 7.8): the transport AEAD's
# ChaCha20 and Poly1305 from libssl-dev's libcrypto.a (Sources/CTransportAEAD). A security update of
# openssl reaches them only through a rebuild of this package, which this field lets the archive find.
built_using=$(dpkg-query -W -f='${source:Package} (= ${source:Version})' libssl-dev 2>/dev/null) ||
  { echo "Error: libssl-dev is not installed (dpkg-query), so the openssl linked in is unknown" >&2; exit 1; }

# --- Control ------------------------------------------------------------------------------------------
maintainer="${DEBFULLNAME:-$(git config user.name 2>/dev/null || echo Tunnelgate maintainers)} <${DEBEMAIL:-$(git config user.email 2>/dev/null || echo root@localhost)}>"
cat >"$tree/DEBIAN/control" <<EOF
Package: tunnelgate
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$tree" | cut -f1)
Depends: $depends
Built-Using: $built_using
Section: net
Priority: optional
Description: NetworkExtension's packet-tunnel settings applied on Linux
 Tunnelgate takes the settings an iOS packet-tunnel provider hands to the
 system (addresses, MTU, included and excluded routes, DNS), as JSON with
 NetworkExtension's names or as a wg-quick file, applies them to the kernel
 through rtnetlink and nftables in any network namespace, hosts the packet
 runtime (a C ABI, MeshGuard, a built-in userspace WireGuard) and removes
 every trace when the tunnel stops, also after a crash.
 .
 Includes the systemd units tunnelgate@.service, tunnelgate-netns@.service
 and tunnelgate-on-demand@.service, the man pages tunnelgate(8) and
 tunnelgate.json(5), bash and zsh completion, and the example packet runtime. The Swift runtime is linked in statically.
EOF
for script in postinst prerm postrm; do install -m 0755 "packaging/debian/$script" "$tree/DEBIAN/$script"; done
(cd "$tree" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$tree/DEBIAN/md5sums"

deb=$output/tunnelgate_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz -z6 --build "$tree" "$deb" >/dev/null
echo "Depends: $depends"
echo "$deb"
