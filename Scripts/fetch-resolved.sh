#!/usr/bin/env bash
# Scripts/fetch-resolved.sh DIR: puts Debian's systemd-resolved (the daemon and resolvectl) and the
# libsystemd-shared it links against, unpacked, under DIR (DIR/lib/systemd/systemd-resolved,
# DIR/usr/bin/resolvectl), for the systemd-resolved scenario (netns/tests/dns-resolved.sh).
#
# The packages are downloaded with `apt-get download` (kept in .build/debs/ for later runs) and unpacked
# with `dpkg-deb -x`: never installed. Installing systemd-resolved would make the host's /etc/resolv.conf
# a link to resolved's stub (its postinst does that), and this machine does not run systemd.
#
# Prints DIR's multiarch library directory (where libsystemd-shared-*.so is) on success; exits non-zero,
# saying why on stderr, when the packages cannot be had.
set -euo pipefail

dest=${1:?usage: Scripts/fetch-resolved.sh DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=$root/.build/debs
mkdir -p "$cache"

# systemd-resolved depends on exactly its own version of libsystemd-shared: take both at that version.
version() {
  apt-cache show --no-all-versions systemd-resolved 2>/dev/null | sed -n 's/^Version: //p' | head -n 1
}
v=$(version)
if [ -z "$v" ]; then
  apt-get update -qq >/dev/null 2>&1 || true
  v=$(version)
fi
[ -n "$v" ] || { echo "fetch-resolved: apt knows no systemd-resolved package (apt-get update failed?)" >&2; exit 1; }
file_version=${v//:/%3a}
debs=("$cache/systemd-resolved_${file_version}_"*.deb "$cache/libsystemd-shared_${file_version}_"*.deb)
if ! [ -f "${debs[0]}" ] || ! [ -f "${debs[1]}" ]; then
  work=$(mktemp -d "$cache/download.XXXXXX")
  log=$work/apt.log
  if ! (cd "$work" && apt-get download "systemd-resolved=$v" "libsystemd-shared=$v") >"$log" 2>&1; then
    # Stale lists name files the mirror no longer has: refresh once and try again.
    apt-get update -qq >>"$log" 2>&1 || true
    if ! (cd "$work" && apt-get download "systemd-resolved=$v" "libsystemd-shared=$v") >>"$log" 2>&1; then
      echo "fetch-resolved: apt-get download systemd-resolved=$v libsystemd-shared=$v failed:" >&2
      cat "$log" >&2
      rm -rf "$work"
      exit 1
    fi
  fi
  mv -f "$work"/*.deb "$cache"/
  rm -rf "$work"
  debs=("$cache/systemd-resolved_${file_version}_"*.deb "$cache/libsystemd-shared_${file_version}_"*.deb)
fi

mkdir -p "$dest"
for deb in "${debs[@]}"; do
  dpkg-deb -x "$deb" "$dest"
done
binary=$dest/lib/systemd/systemd-resolved
[ -x "$binary" ] || { echo "fetch-resolved: $binary is missing after unpacking ${debs[*]}" >&2; exit 1; }
shared=$(find "$dest" -name 'libsystemd-shared-*.so' -print -quit)
[ -n "$shared" ] || { echo "fetch-resolved: no libsystemd-shared-*.so in ${debs[*]}" >&2; exit 1; }
libdir=$(dirname "$shared")
# The daemon takes no arguments; resolvectl, from the same package and library, says its version.
LD_LIBRARY_PATH=$libdir "$dest/usr/bin/resolvectl" --version >/dev/null ||
  { echo "fetch-resolved: $dest/usr/bin/resolvectl does not run (LD_LIBRARY_PATH=$libdir)" >&2; exit 1; }
if LD_LIBRARY_PATH=$libdir ldd "$binary" | grep -q 'not found'; then
  echo "fetch-resolved: $binary lacks libraries:" >&2
  LD_LIBRARY_PATH=$libdir ldd "$binary" | grep 'not found' >&2
  exit 1
fi
printf '%s\n' "$libdir"
