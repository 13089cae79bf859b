#!/usr/bin/env bash
# package: the Debian package installs, works and goes away on a clean Debian 12 that has no Swift.
#
#   this machine                                  ROOT: mmdebstrap --variant=apt bookworm
#   ┌──────────────────────────────────┐          (+ systemd and man-db, not running: for
#   │ Scripts/package-deb.sh           │  .deb    systemd-analyze verify and man; no /opt/swift)
#   │   → tunnelgate_VERSION_ARCH.deb  │ ───────► ┌──────────────────────────────────────────┐
#   └──────────────────────────────────┘          │ dpkg -i, apt-get -f install (Depends)    │
#                                                 │ tunnelgate --version, validate, verify   │
#                                                 │ dpkg -r: no file left; dpkg -P: no state │
#                                                 └──────────────────────────────────────────┘
#
# No network namespace is made; the root is entered with chroot in a private mount namespace (its
# /proc and the apt cache are mounted there, and vanish with it). Downloaded packages are kept in
# .build/package-test/cache, so a second run downloads only the package lists. The root is removed
# by the cleanup stack (netns/lib.sh). Timed: the whole run must stay under TG_PACKAGE_BUDGET seconds (default 280).
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
started=$(_tg_now_ms)
budget=${TG_PACKAGE_BUDGET:-280}

# $TG_TMP is removed by lib.sh's cleanup stack; nothing is mounted outside the private mount namespaces,
# the root is plain files.
tg_begin --no-topology --no-binary --tmp
cache=$TG_ROOT/.build/package-test/cache
mkdir -p "$cache"
ROOT=$TG_TMP/root

# in_root CMD...: runs CMD in ROOT (chroot) with /proc, /dev/null and friends, and the apt cache.
in_root() {
  unshare --mount --propagation private -- bash -c '
    root=$1 cache=$2; shift 2
    mount -t proc proc "$root/proc" &&
    mount --rbind /dev "$root/dev" &&
    mount --bind "$cache" "$root/var/cache/apt/archives" &&
    exec chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"' \
    in_root "$ROOT" "$cache" "$@"
}

# --- Scripts/install.sh: idempotent, and --uninstall removes exactly what it installed --------------------
# Into a staged tree that already holds someone else's files, as a real /usr/local would.
stage=$TG_TMP/stage
mkdir -p "$stage/usr/local/share/man/man1" "$stage/usr/local/lib/python3"
echo other >"$stage/usr/local/share/man/man1/other.1"
listing() { (cd "$1" && find . -printf '%p %y %m %s %T@\n' | sort); }
listing "$stage" >"$TG_TMP/stage-before"
tg_run bash "$TG_ROOT/Scripts/install.sh" --destdir "$stage"
check_rc "install.sh --destdir (prefix /usr/local) installs" 0
check_match "… and says how many files" '^install: tunnelgate .*: [0-9]+ files installed, 0 unchanged' "$TG_OUT"
check "… tunnelgate in PREFIX/sbin" test -x "$stage/usr/local/sbin/tunnelgate"
check "… its packet plane in PREFIX/lib/tunnelgate, where the engine looks" test -x "$stage/usr/local/lib/tunnelgate/tunnelgate-plane"
check "… and its on-demand watcher there too" test -x "$stage/usr/local/lib/tunnelgate/tunnelgate-on-demand"
check_match "… the unit's ExecStart= names the installed binary" '^ExecStart=/usr/local/sbin/tunnelgate up %i$' \
  "$(cat "$stage/usr/local/lib/systemd/system/tunnelgate@.service")"
check_eq "… /etc/tunnelgate is made empty, mode 700" "700 0" \
  "$(stat -c %a "$stage/etc/tunnelgate") $(find "$stage/etc/tunnelgate" -mindepth 1 | wc -l)"
listing "$stage" >"$TG_TMP/stage-installed"
tg_run bash "$TG_ROOT/Scripts/install.sh" --destdir "$stage"
check_rc "a second install.sh run succeeds" 0
check_match "… and says it changed nothing" '^install: nothing changed: ' "$TG_OUT"
listing "$stage" >"$TG_TMP/stage-again"
check_same_snapshot "… and changed nothing (paths, modes, sizes, mtimes)" "$TG_TMP/stage-installed" "$TG_TMP/stage-again"
tg_run bash "$TG_ROOT/Scripts/install.sh" --destdir "$stage" --uninstall
check_rc "install.sh --uninstall" 0
listing "$stage" >"$TG_TMP/stage-after"
# The directories that were there before keep their content, but their mtimes moved with what was
# added and removed in them: compare without mtimes.
check_eq "… leaves exactly what was there before, someone else's files included" \
  "$(cut -d' ' -f1-4 "$TG_TMP/stage-before")" "$(cut -d' ' -f1-4 "$TG_TMP/stage-after")"
bash "$TG_ROOT/Scripts/install.sh" --destdir "$stage" >/dev/null
echo '{}' >"$stage/etc/tunnelgate/mine.json"
tg_run bash "$TG_ROOT/Scripts/install.sh" --destdir "$stage" --uninstall
check_match "--uninstall keeps /etc/tunnelgate holding a configuration, and says so" '^kept /etc/tunnelgate/: ' "$TG_OUT"
check "… with the configuration in it" test -f "$stage/etc/tunnelgate/mine.json"

# --- The package ----------------------------------------------------------------------------------------
tg_run bash "$TG_ROOT/Scripts/package-deb.sh" --output "$TG_TMP/out"
check_rc "Scripts/package-deb.sh builds the package" 0
deb=$(printf '%s\n' "$TG_OUT" | tail -n 1)
[ -f "$deb" ] || tg_bail "the package is at the path package-deb.sh printed" "$TG_OUT" "$TG_ERR"
version=$("$TG_ROOT/.build/install/tunnelgate" --version)
check_eq "the package's file name carries tunnelgate --version" \
  "tunnelgate_${version}_$(dpkg --print-architecture).deb" "$(basename "$deb")"
check_eq "its Version: field is tunnelgate --version" "$version" "$(dpkg-deb -f "$deb" Version)"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libc6 libmnl0 libnftnl11 libsodium23 libsystemd0 libseccomp2; do
  check_match "Depends: names $lib" "(^|, )$lib( |,|$)" "$depends"
done
check_no_match "Depends: names no Swift toolchain or runtime package" 'swift' "$depends"
# The transport AEAD's ChaCha20 and Poly1305 are linked in from libssl-dev's libcrypto.a: Built-Using names
# the very openssl source version built against (so a rebuild after its security update can be found),
# and neither binary a tunnel runs on loads libcrypto.so.
check_eq "Built-Using: names the openssl source linked in" \
  "$(dpkg-query -W -f='${source:Package} (= ${source:Version})' libssl-dev)" "$(dpkg-deb -f "$deb" Built-Using)"
for bin in tunnelgate tunnelgate-plane; do
  check_no_match "$bin NEEDs no libcrypto.so (its AEAD's primitives are linked in)" 'libcrypto' \
    "$(objdump -p "$TG_ROOT/.build/install/$bin" | awk '$1 == "NEEDED" {print $2}')"
done
# The engine and the plane as installed lay out their functions in packaging/text-order's order (functions
# in sections of their own, Scripts/release-flags.sh; lld's ordering file, Package.swift): of the listed
# names the binary defines once, consecutive ones lie at increasing addresses. A binary linked in any
# other order has about half of them so; this one must have nearly all.
for bin in tunnelgate tunnelgate-plane; do
  in_order=$(nm --defined-only "$TG_ROOT/.build/install/$bin" | python3 -c '
import sys
order = [line.strip() for line in open(sys.argv[1]) if line.strip()]
seen = {}
for line in sys.stdin:
    fields = line.split()
    if len(fields) == 3 and fields[1] in "tTwW": seen.setdefault(fields[2], []).append(int(fields[0], 16))
addresses = [seen[name][0] for name in order if len(seen.get(name, ())) == 1]
pairs = sum(1 for a, b in zip(addresses, addresses[1:]) if b > a)
print(f"{pairs * 100 // max(1, len(addresses) - 1)} {len(addresses)}")' "$TG_ROOT/packaging/text-order/$bin.order")
  check_match "$bin: its listed functions lie in the order file's order (percent of pairs in order, names: $in_order)" \
    '^(9[5-9]|100) [0-9]{4,}$' "$in_order"
done
# ip(8) and nft(8) are not dependencies because nothing in the binaries runs them: the programs the linked
# modules start are tunnelgate itself (/proc/self/exe: `up --detach`, `exec`'s command entering its
# namespace through `exec-enter`, the detached `tunnelgate wireguard`), its packet plane (tunnelgate-plane,
# in the package, started through LinuxSystem's SandboxedProcess), its on-demand watcher
# (tunnelgate-on-demand, in the package, which `on-demand` becomes and `down` runs), only for `--netns
# podman:NAME` the user's own podman (`podman inspect`; Podman has no daemon to ask), and, in
# tunnelgate-on-demand (which links NetworkExtension), the registered provider host a saved
# configuration names, started from the sealed copy of the file it checked (/proc/self/fd/N). The primitives
# that start processes are defined in LinuxSystem and the shims (ProcessControl.spawn…, capture, execute,
# run, replaceProcess, CTunnelgateShims_spawn…/exec…); every other module linked into either binary is
# searched for calls of them and of libc's own (posix_spawn, fork, exec*, popen; system(3) only with a literal).
modules=$(for product in tunnelgate tunnelgate-on-demand; do
  sed -n 's|.*/release/\([^/]*\)\.build/.*|\1|p' "$TG_ROOT/.build/release/$product.product/Objects.LinkFileList"; done | sort -u)
check_match "the modules of both binaries are known (NetworkExtension among them)" '^NetworkExtension$' "$modules"
spawns=""
for m in $modules; do
  [ -d "$TG_ROOT/Sources/$m" ] || m=${m//_/-}  # an executable's module: tunnelgate_on_demand
  [ -d "$TG_ROOT/Sources/$m" ] && [ "$m" != LinuxSystem ] && [ "$m" != CTunnelgateShims ] || continue
  spawns+=$(cd "$TG_ROOT" && grep -rnE '(^|[^.A-Za-z0-9_])((ProcessControl\.(spawn[A-Za-z]*|capture|execute|run|replaceProcess)|CTunnelgateShims_(spawn|exec)[a-z_]*|posix_spawnp?|fork|vfork|execv[pe]*|execl[pe]*|popen)\(|system\(")' \
    "Sources/$m" ; true)
  spawns+=$'\n'
done
check_eq "the binaries' modules start programs in six places only" \
  "$(printf '%s\n' Sources/NetworkExtension/NEVPNConnection.swift Sources/Session/NamespaceReference+Open.swift Sources/tunnelgate/Commands+Exec.swift Sources/tunnelgate/Commands+OnDemand.swift Sources/tunnelgate/Commands+WireGuard.swift Sources/tunnelgate/Commands.swift)" \
  "$(printf '%s\n' "$spawns" | grep . | cut -d: -f1 | sort -u)"
check_match "… Commands+OnDemand.swift's is the on-demand watcher, opened as the plane is" \
  'CompanionExecutable\.open\(onDemandExecutableName' "$(cat "$TG_ROOT/Sources/tunnelgate/Commands+OnDemand.swift")"
check_match "… Commands.swift's is tunnelgate itself (/proc/self/exe)" 'let executable = "/proc/self/exe"' \
  "$(cat "$TG_ROOT/Sources/tunnelgate/Commands.swift")"
check_match "… and so are exec's and wireguard's" '"/proc/self/exe", "exec-enter"' "$(cat "$TG_ROOT/Sources/tunnelgate/Commands+Exec.swift")"
check_match "… wireguard's detached device is tunnelgate itself too" 'spawnDetached\("/proc/self/exe", \["tunnelgate", "wireguard"' "$(cat "$TG_ROOT/Sources/tunnelgate/Commands+WireGuard.swift")"
check_match "… NEVPNConnection's is the provider host, from its sealed image" 'spawnDetached\("/proc/self/fd/\\\(image.rawValue\)"' \
  "$(cat "$TG_ROOT/Sources/NetworkExtension/NEVPNConnection.swift")"
check_match "… and the namespace reference's is podman inspect, nothing else" '^\["podman", "inspect"' \
  "$(grep -oE 'capture\(\[.*' "$TG_ROOT/Sources/Session/NamespaceReference+Open.swift" | sed 's/^capture(//')"
files=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|; s|/$||' | grep -vx '')
for f in /usr/sbin/tunnelgate /usr/sbin/tunnelgate-wireguard /usr/lib/systemd/system/tunnelgate@.service /usr/lib/systemd/system/tunnelgate-netns@.service \
  /usr/lib/systemd/system/tunnelgate-on-demand@.service \
  /usr/share/man/man8/tunnelgate.8.gz /usr/share/man/man5/tunnelgate.json.5.gz \
  /usr/share/bash-completion/completions/tunnelgate /usr/share/zsh/vendor-completions/_tunnelgate \
  /usr/lib/tunnelgate/libTunnelgateExampleRuntime.so /usr/lib/tunnelgate/tunnelgate-plane /usr/lib/tunnelgate/tunnelgate-on-demand /etc/tunnelgate; do
  check_match "the package holds $f" "^$(tg_re "$f")\$" "$files"
done
check_no_match "the package does not ship install.sh's manifest" 'install-manifest' "$files"

# --- A clean Debian 12 ------------------------------------------------------------------------------------
# The host's own Debian sources (the same mirror apt uses here). Package lists are kept in the root
# (cleanup/apt/lists skipped) for apt-get -f install; downloaded .debs go to and come from $cache.
# keep_downloads FROM CACHE: the .debs mmdebstrap downloaded, into CACHE under a temporary name and
# renamed, so a run reading CACHE at the same time never sees half a file.
mkdir -p "$TG_TMP/cache-out"
keep_downloads() {
  local f
  for f in "$1"/*.deb; do
    [ -e "$f" ] && [ ! -e "$2/${f##*/}" ] || continue
    cp "$f" "$2/.${f##*/}.part" && mv "$2/.${f##*/}.part" "$2/${f##*/}"
  done
  return 0
}
sources=/etc/apt/sources.list.d/debian.sources
[ -f "$sources" ] || sources=/etc/apt/sources.list
t0=$(_tg_now_ms)
tg_run mmdebstrap --variant=apt --include=systemd,man-db --skip=download/empty --skip=cleanup/apt/lists \
  --skip=essential/unlink \
  --setup-hook="mkdir -p \"\$1\"/var/cache/apt/archives" \
  --setup-hook="sync-in $cache /var/cache/apt/archives/" \
  --customize-hook="sync-out /var/cache/apt/archives $TG_TMP/cache-out" \
  bookworm "$ROOT" "$sources"
keep_downloads "$TG_TMP/cache-out" "$cache"
check_rc "mmdebstrap makes a Debian 12 root ($(( ($(_tg_now_ms) - t0) / 1000 )) s)" 0 || tg_bail "no root" "$TG_ERR"
check_eq "the root is Debian 12" 12 "$(cut -d. -f1 "$ROOT/etc/debian_version")"
check_fails "the root has no Swift toolchain (/opt/swift)" test -e "$ROOT/opt/swift"
check_eq "the root has no Swift runtime library anywhere" "" "$(find "$ROOT" -name 'libswift*' -print -quit)"

before=$TG_TMP/before.list
in_root find / -xdev \( -path /proc -o -path /dev -o -path /var/cache/apt/archives -o -path /tmp \) -prune -o -print |
  sort >"$before"

# --- Install: dpkg -i, then apt for the Depends ----------------------------------------------------------
cp "$deb" "$ROOT/tmp/"
pkg=/tmp/$(basename "$deb")
tg_run in_root dpkg -i "$pkg"
check_match "dpkg -i alone stops at the unmet Depends (a clean root lacks them)" 'dependency problems' "$TG_ERR"
t0=$(_tg_now_ms)
tg_run in_root apt-get -f install -y -q --no-install-recommends
check_rc "apt-get -f install satisfies the Depends and configures the package ($(( ($(_tg_now_ms) - t0) / 1000 )) s)" 0
check_eq "dpkg says tunnelgate is installed" "install ok installed" \
  "$(in_root dpkg-query -W -f='${Status}' tunnelgate 2>&1)"

tg_run in_root /usr/sbin/tunnelgate --version
check_rc "the installed tunnelgate --version runs" 0
check_eq "it prints the package's version" "$version" "$TG_OUT"
tg_run in_root ldd /usr/sbin/tunnelgate
check_no_match "the installed binary links no Swift library" 'swift|not found' "$TG_OUT"
tg_run in_root ldd /usr/lib/tunnelgate/tunnelgate-plane
check_rc "the installed packet plane's libraries all resolve in the root (ldd)" 0
check_no_match "… and it links no Swift library either" 'swift|not found' "$TG_OUT"
tg_run in_root ldd /usr/lib/tunnelgate/tunnelgate-on-demand
check_rc "the installed on-demand watcher's libraries all resolve in the root (ldd)" 0
check_no_match "… no Swift library (Foundation is linked in)" 'swift|not found' "$TG_OUT"
# (Its preferences in a scratch directory: the namespace's state directory would outlive dpkg -r below.)
in_root mkdir -p /tmp/on-demand-check
tg_run in_root env TUNNELGATE_PREFERENCES=/tmp/on-demand-check/preferences.json /usr/sbin/tunnelgate on-demand --clean
check_eq "the installed tunnelgate on-demand --clean runs the installed watcher" "0 nothing to clean" "$TG_RC $TG_OUT"
in_root rm -rf /tmp/on-demand-check

# A sample configuration, validated inside the root (IP literals only: no name resolution needed).
cat >"$ROOT/etc/tunnelgate/tg0.json" <<'EOF'
{
  "name": "tg0",
  "tunnelRemoteAddress": "198.18.0.10",
  "mtu": 1400,
  "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"],
                   "includedRoutes": ["0.0.0.0/0"], "excludedRoutes": ["198.18.0.20/32"]},
  "ipv6Settings": {"addresses": ["fd00:8::2"], "networkPrefixLengths": [64], "includedRoutes": ["::/0"]},
  "carrierEndpoints": ["198.18.0.10", "[2001:db8:18::10]:51820"]
}
EOF
tg_run in_root /usr/sbin/tunnelgate validate /etc/tunnelgate/tg0.json
check_rc "the installed tunnelgate validates a sample configuration" 0
check_match "validate reports the tunnel, its routes (the carriers are excluded routes too) and carriers" \
  '^/etc/tunnelgate/tg0\.json: valid: tunnel tg0, 2 included and 3 excluded routes, 2 carrier addresses$' "$TG_OUT"
jq '.ipv4Settings.subnetMasks = ["255.0.255.0"]' "$ROOT/etc/tunnelgate/tg0.json" >"$ROOT/tmp/bad.json"
tg_run in_root /usr/sbin/tunnelgate validate /tmp/bad.json
check_rc "… and refuses a bad one (exit 1)" 1
check_match "… naming the key" '^ipv4Settings\.subnetMasks\[0\]: ' "$TG_ERR"
rm -f "$ROOT/etc/tunnelgate/tg0.json" "$ROOT/tmp/bad.json"

# The example runtime loads where a user would load it: dlopen through Python's ctypes is not in the
# root, so ask the dynamic linker to resolve every symbol of it.
tg_run in_root ldd -r /usr/lib/tunnelgate/libTunnelgateExampleRuntime.so
check_rc "the example runtime's libraries and symbols all resolve in the root (ldd -r)" 0
check_no_match "… with none missing and no Swift runtime" 'undefined symbol|not found|swift' "$TG_OUT$TG_ERR"

# No account: the packet planes run as uids of a range of their own (0x74670000 and up), chosen at up.
check_eq "postinst made no user or group (the planes' uids need no account)" "" \
  "$(in_root getent passwd tunnelgate; in_root getent group tunnelgate)"

# The units as installed: systemd-analyze verify loads them with the installed binary and man pages
# (systemd is installed in the root but not running; verify needs neither a running manager nor PID 1).
for unit in tunnelgate@wg0.service tunnelgate-netns@wg0.service tunnelgate-on-demand@wg0.service; do
  tg_run in_root systemd-analyze verify "$unit"
  check_rc "systemd-analyze verify $unit passes (its ExecStart binary and man: pages found)" 0
  check_eq "… and prints nothing" "" "$TG_OUT$TG_ERR"
done
tg_run in_root systemd-analyze security --offline=yes --no-pager tunnelgate@wg0.service
check_match "systemd-analyze security rates tunnelgate@wg0 (for the record: $(printf '%s\n' "$TG_OUT" | tail -n 1 | sed 's/.*Overall exposure level for [^:]*: //'))" \
  'Overall exposure level' "$TG_OUT"
tg_run in_root man -w tunnelgate.json
check_eq "man finds tunnelgate.json(5) in the root" "/usr/share/man/man5/tunnelgate.json.5.gz" "$TG_OUT"

# --- Remove: no file of the package is left; purge: nor its state ----------------------------------
pkg_files=$(in_root dpkg-query -L tunnelgate | grep -vx '/.')
tg_run in_root dpkg -r tunnelgate
check_rc "dpkg -r tunnelgate" 0
left=""
for f in $pkg_files; do
  # Directories other packages own too (/usr, /usr/share/man …) stay; the package's own go.
  if [ -e "$ROOT$f" ] && ! in_root dpkg -S "$f" >/dev/null 2>&1; then left+="$f"$'\n'; fi
done
check_eq "after dpkg -r no file or directory the package listed is left but those other packages own" "" "$left"
after=$TG_TMP/after.list
in_root find / -xdev \( -path /proc -o -path /dev -o -path /var/cache/apt/archives -o -path /tmp \) -prune -o -print |
  sort >"$after"
# What apt installed for the Depends stays, as with any package; the package's own paths must not.
# Allowed: dpkg's record of a removed package (its postrm runs again at purge), and man-db's cache of
# formatted pages, which `systemd-analyze verify` filled by running man(1) for Documentation=.
leftover() {
  comm -13 "$before" "$after" | grep tunnelgate | grep -vE '^/var/lib/dpkg/info/tunnelgate\.|^/var/cache/man/' || true
}
check_eq "after dpkg -r no new path names tunnelgate (but dpkg's record and man's cache)" "" "$(leftover)"
tg_run in_root dpkg -P tunnelgate
check_rc "dpkg -P tunnelgate" 0
in_root find / -xdev \( -path /proc -o -path /dev -o -path /var/cache/apt/archives -o -path /tmp \) -prune -o -print |
  sort >"$after"
check_eq "after purge no new path names tunnelgate (but man's cache)" "" "$(leftover)"
check_eq "after purge dpkg has no record of tunnelgate" "" "$(comm -13 "$before" "$after" | grep '^/var/lib/dpkg/info/tunnelgate' || true)"
check_eq "after purge /etc/passwd, /etc/group and /etc/shadow name no tunnelgate" "" \
  "$(grep -l tunnelgate "$ROOT/etc/passwd" "$ROOT/etc/group" "$ROOT/etc/shadow" "$ROOT/etc/gshadow" 2>/dev/null || true)"

elapsed=$(( ($(_tg_now_ms) - started) / 1000 ))
if [ "$elapsed" -le "$budget" ]; then
  tg_pass "the package test took ${elapsed} s (budget ${budget} s)"
else
  tg_fail "the package test took ${elapsed} s, over its budget of ${budget} s"
fi
tg_summary
