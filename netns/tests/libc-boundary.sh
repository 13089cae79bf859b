#!/usr/bin/env bash
# libc-boundary: every libc call goes through Sources/LinuxSystem (and the C shims); nothing else imports
# Glibc; every setsockopt(2) and ioctl(2) result is checked. A static check of the source tree, by
# netns/tests/libc_boundary.py, and a check of that checker: defects planted in a scratch tree must be
# found, or a clean result here would prove nothing.
#
#   Sources/ Examples/ (*.swift) ──► libc_boundary.py imports   no `import Glibc`, no `Glibc.` name
#                                    libc_boundary.py calls     (Sources/) no libc call through
#                                                               Foundation's or a C module's re-export
#                                    no `import CTunnelgateShims` (its module map re-exports libc)
#                                    libc_boundary.py sockopts  no setsockopt/ioctl from Swift
#   Sources/ (*.swift *.c *.h)   ──► libc_boundary.py unchecked no setsockopt/ioctl result thrown away
#   $TG_TMP/planted (a scratch tree: defects of each kind, and look-alikes) ──► found, look-alikes not
#
# Tests/ and Fuzz/ (test harnesses) may use libc directly. Examples/ programs may call Foundation's
# exit(3) as a provider's or manager's author would; they import no Glibc. No namespace is made; nothing
# outside $TG_TMP is written.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
tg_begin --no-topology --no-binary --tmp

checker=$TG_ROOT/netns/tests/libc_boundary.py
# findings ROOT CHECK: what the checker reports (its own failure shows as a finding too).
findings() { python3 "$checker" "$1" "$2" 2>&1 || echo "libc_boundary.py $2 exited $?"; }

# --- The tree --------------------------------------------------------------------------------------------
check_eq "no Swift file outside LinuxSystem (and Tests/, Fuzz/) imports or names Glibc" \
  "" "$(findings "$TG_ROOT" imports)"
check_eq "no Swift file in Sources/ outside LinuxSystem calls libc or reads errno" \
  "" "$(findings "$TG_ROOT" calls | grep -v '^Examples/')"
shims=$(cd "$TG_ROOT" && grep -rnE '^\s*(@\w+\s+)*import\s+CTunnelgateShims\b' --include='*.swift' Sources Examples |
  grep -v '^Sources/LinuxSystem/')
check_eq "no Swift file outside LinuxSystem imports CTunnelgateShims (which re-exports libc)" "" "$shims"
check_eq "no Swift file outside LinuxSystem calls setsockopt or ioctl" "" "$(findings "$TG_ROOT" sockopts)"
check_eq "every setsockopt and ioctl result in Sources/ is used (compared, thrown on, returned)" \
  "" "$(findings "$TG_ROOT" unchecked)"
check_match "… and the check sees LinuxSystem's checked calls (SO_MARK through syscall())" \
  'setsockopt\(rawValue, SOL_SOCKET, SO_MARK' "$(cat "$TG_ROOT/Sources/LinuxSystem/Socket+Carrier.swift")"

# --- The checker finds what it looks for ----------------------------------------------------------------
# A scratch tree: one module per kind of defect, and the forms the checker must let through.
planted=$TG_TMP/planted
mkdir -p "$planted/Sources/A" "$planted/Sources/B" "$planted/Sources/C" "$planted/Sources/D" \
  "$planted/Sources/LinuxSystem" "$planted/Sources/CShim" "$planted/Tests/ATests" "$planted/Examples/e"
cat >"$planted/Sources/A/Imports.swift" <<'EOF'
import Glibc
@_exported import Glibc
import struct Glibc.pollfd
let fine = "import Glibc" // in a string: not an import
EOF
cat >"$planted/Sources/B/Calls.swift" <<'EOF'
import Foundation
func pid() -> Int32 { getpid() }
func failed() -> Bool { errno == EINTR }
func wait() { usleep(10); Glibc.usleep(10) }
struct S { func close() {}; func use() { close() } }   // its own close(): not libc's
let text = "getpid() in a string"
func report() -> E { E(errno: errno) }   // a call's label declares nothing: errno is libc's
EOF
cat >"$planted/Sources/B/Own.swift" <<'EOF'
struct F { let code: Int32; init(errno: Int32) { code = errno } }   // its own parameter
EOF
cat >"$planted/Sources/C/Options.swift" <<'EOF'
func mark(_ fd: Int32) { var v: Int32 = 1; _ = setsockopt(fd, 1, 36, &v, 4) }
func mark2(_ fd: Int32) {
    var v: Int32 = 1
    setsockopt(fd, 1, 36, &v, 4)
}
EOF
cat >"$planted/Sources/LinuxSystem/Checked.swift" <<'EOF'
import Glibc
func ok(_ fd: Int32) throws {
    var v: Int32 = 1
    _ = try syscall("setsockopt(SO_MARK)") {
        setsockopt(fd, SOL_SOCKET, SO_MARK, &v, 4)
    }
    guard setsockopt(fd, 1, 2, &v, 4) == 0 else { throw E() }
}
func dropped(_ fd: Int32) { var v: Int32 = 1; _ = setsockopt(fd, 1, 2, &v, 4) }
EOF
cat >"$planted/Sources/CShim/shim.c" <<'EOF'
#include <sys/ioctl.h>
int checked(int fd) { if (ioctl(fd, 1, 0) < 0) return -1; return ioctl(fd, 2, 0); }
void unchecked(int fd) { (void)ioctl(fd, 3, 0); ioctl(fd, 4, 0); /* ioctl(fd, 5) in a comment */ }
EOF
cat >"$planted/Tests/ATests/T.swift" <<'EOF'
import Glibc
let p = getpid()
EOF
check_eq "the imports check finds each import form and a Glibc. name, not a string, LinuxSystem or Tests/" \
  "Sources/A/Imports.swift:1 Sources/A/Imports.swift:2 Sources/A/Imports.swift:3 Sources/B/Calls.swift:4" \
  "$(findings "$planted" imports | cut -d: -f1-2 | sort | tr '\n' ' ' | sed 's/ $//')"
check_eq "the calls check finds getpid(), errno, usleep() and setsockopt(), not a file's own close() or errno" \
  "Sources/B/Calls.swift:2 Sources/B/Calls.swift:3 Sources/B/Calls.swift:4 Sources/B/Calls.swift:7 Sources/C/Options.swift:1 Sources/C/Options.swift:4" \
  "$(findings "$planted" calls | cut -d: -f1-2 | sort | tr '\n' ' ' | sed 's/ $//')"
check_eq "the sockopts check finds setsockopt outside LinuxSystem, not inside it" \
  "Sources/C/Options.swift:1 Sources/C/Options.swift:4" \
  "$(findings "$planted" sockopts | cut -d: -f1-2 | sort | tr '\n' ' ' | sed 's/ $//')"
check_eq "the unchecked check finds \`_ =\`, a bare statement and (void), in Swift and C, not checked calls" \
  "Sources/C/Options.swift:1 Sources/C/Options.swift:4 Sources/CShim/shim.c:3 Sources/CShim/shim.c:3 Sources/LinuxSystem/Checked.swift:9" \
  "$(findings "$planted" unchecked | cut -d: -f1-2 | sort | tr '\n' ' ' | sed 's/ $//')"

tg_summary
