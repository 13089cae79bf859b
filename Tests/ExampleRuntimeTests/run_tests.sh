#!/usr/bin/env bash
# Tests the example packet runtime (Sources/CExampleRuntime) through its C ABI, as a host uses it:
# runtime_test.c dlopens the shared library and drives instances on 127.0.0.1 (see its header for the
# topologies). No root needed except for --fwmark (SO_MARK), which the tests use once.
#
#   Tests/ExampleRuntimeTests/run_tests.sh              SwiftPM's library: swift build --product TunnelgateExampleRuntime
#   Tests/ExampleRuntimeTests/run_tests.sh --all        that, plus every stage below
#   Tests/ExampleRuntimeTests/run_tests.sh STAGE...     only these: swiftpm warnings exports asan tsan valgrind
#
#   swiftpm   the tests against .build/debug/libTunnelgateExampleRuntime.so
#   warnings  the runtime's sources under gcc and clang, -std=c11 -Wall -Wextra -Wpedantic -Wconversion -Werror
#   exports   the library exports the ABI's ten functions and nothing else (nm -D)
#   asan      runtime and tests built with -fsanitize=address,undefined (leaks checked at exit)
#   tsan      runtime and tests built with -fsanitize=thread
#   valgrind  SwiftPM's library (debug sections stripped) under valgrind --leak-check=full; skipped when
#             valgrind is not installed
#
# Prints each stage's TAP-like lines; the last line is "N passed, N failed" over all stages.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root" || exit 1
if ! command -v swift >/dev/null && [ -x /opt/swift/usr/bin/swift ]; then PATH=/opt/swift/usr/bin:$PATH; fi
cc=${CC:-$(command -v gcc || command -v cc || command -v clang)}

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(swiftpm)
[ "${stages[0]}" = "--all" ] && stages=(warnings swiftpm exports asan tsan valgrind)

work=$(mktemp -d /tmp/tunnelgate-example-runtime.XXXXXX)
trap 'rm -rf "$work"' EXIT
lib_swiftpm=$root/.build/debug/libTunnelgateExampleRuntime.so
runtime_sources=(Sources/CExampleRuntime/*.c)
includes=(-I Sources/CTunnelgateRuntime/include)
passed=0
failed=0

section() { printf '\n=== %s\n' "$*"; }
ok() { passed=$((passed + 1)); echo "ok - $*"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $*"; }

# run_suite LABEL COMMAND...: runs runtime_test, adds its "N passed, N failed" to the totals.
run_suite() {
  local label=$1 log=$work/$1.log rc
  shift
  "$@" >"$log" 2>&1
  rc=$?
  cat "$log"
  local summary
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
  if [ -z "$summary" ]; then
    not_ok "$label: the test program ended without a summary (exit $rc)"
    return
  fi
  passed=$((passed + $(cut -d' ' -f1 <<<"$summary")))
  failed=$((failed + $(cut -d' ' -f3 <<<"$summary")))
  [ "$rc" -ne 0 ] && [ "$(cut -d' ' -f3 <<<"$summary")" -eq 0 ] && not_ok "$label: exit $rc with no failed check"
}

build_swiftpm() {
  [ -n "${built_swiftpm:-}" ] && return 0
  if swift build --product TunnelgateExampleRuntime >"$work/swift-build.log" 2>&1; then
    built_swiftpm=1
    return 0
  fi
  cat "$work/swift-build.log"
  not_ok "swift build --product TunnelgateExampleRuntime"
  return 1
}

# build_test NAME FLAGS...: the test program with these flags into $work/NAME.
build_test() {
  local name=$1
  shift
  "$cc" -std=gnu11 -g -O1 -Wall -Wextra -Werror "$@" "${includes[@]}" Tests/ExampleRuntimeTests/runtime_test.c \
    -o "$work/$name" -ldl -lsodium -pthread
}

# build_runtime NAME FLAGS...: the runtime's sources, straight from the tree, into $work/NAME.so.
build_runtime() {
  local name=$1
  shift
  "$cc" -std=c11 -g -O1 -fPIC -shared -fvisibility=hidden "$@" "${includes[@]}" "${runtime_sources[@]}" \
    -o "$work/$name.so" -lsodium -pthread
}

for stage in "${stages[@]}"; do
  case $stage in
  warnings)
    section "warnings: the runtime under strict flags"
    for compiler in gcc clang; do
      if ! command -v "$compiler" >/dev/null; then
        echo "# $compiler not found, skipped"
        continue
      fi
      if "$compiler" -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Werror \
        -fsyntax-only "${includes[@]}" "${runtime_sources[@]}" 2>"$work/warn.log"; then
        ok "$compiler -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror: no warnings"
      else
        cat "$work/warn.log"
        not_ok "$compiler -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror"
      fi
    done
    ;;
  swiftpm)
    section "swiftpm: the tests against $lib_swiftpm"
    build_swiftpm || continue
    build_test runtime_test || { not_ok "compile runtime_test.c"; continue; }
    run_suite swiftpm "$work/runtime_test" "$lib_swiftpm"
    ;;
  exports)
    section "exports: the library's dynamic symbols"
    build_swiftpm || continue
    expected=$'mehs_ios_runtime_packet_in\nmehs_ios_runtime_start\nmehs_runtime_status\nmehs_runtime_stop\ntunnelgate_runtime_app_message\ntunnelgate_runtime_packet_in\ntunnelgate_runtime_packet_in_batch\ntunnelgate_runtime_start\ntunnelgate_runtime_status\ntunnelgate_runtime_stop'
    actual=$(nm -D --defined-only "$lib_swiftpm" | awk '$2 == "T" {print $3}' | sort)
    if [ "$actual" = "$expected" ]; then
      ok "exports exactly the ten ABI functions (six tunnelgate_runtime_*, four mehs_*)"
    else
      not_ok "exports: expected the ten ABI functions, got:"
      sed 's/^/#   /' <<<"$actual"
    fi
    ;;
  asan)
    section "asan: -fsanitize=address,undefined"
    flags=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
    build_runtime runtime_asan "${flags[@]}" || { not_ok "build the runtime with ASan+UBSan"; continue; }
    build_test runtime_test_asan "${flags[@]}" || { not_ok "compile runtime_test.c with ASan+UBSan"; continue; }
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
      run_suite asan "$work/runtime_test_asan" "$work/runtime_asan.so"
    ;;
  tsan)
    section "tsan: -fsanitize=thread"
    build_runtime runtime_tsan -fsanitize=thread || { not_ok "build the runtime with TSan"; continue; }
    build_test runtime_test_tsan -fsanitize=thread || { not_ok "compile runtime_test.c with TSan"; continue; }
    # gcc 12's TSan cannot map its shadow with the kernel's full ASLR entropy; setarch -R turns ASLR off
    # for this process only.
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 TG_TEST_WAIT_MS=15000 \
      run_suite tsan setarch "$(uname -m)" -R "$work/runtime_test_tsan" "$work/runtime_tsan.so"
    ;;
  valgrind)
    section "valgrind: SwiftPM's library, memcheck with full leak checking"
    if ! command -v valgrind >/dev/null; then
      echo "# valgrind is not installed: skipped (apt-get install valgrind)"
      continue
    fi
    build_swiftpm || continue
    build_test runtime_test || { not_ok "compile runtime_test.c"; continue; }
    # valgrind 3.19 cannot read the DWARF the toolchain's clang writes ("possibly corrupted debuginfo"):
    # it checks a copy with the debug sections stripped; the code is the same bytes, the symbols stay.
    objcopy --strip-debug "$lib_swiftpm" "$work/libTunnelgateExampleRuntime.so"
    TG_TEST_WAIT_MS=20000 run_suite valgrind valgrind --suppressions="$here/valgrind.supp" --error-exitcode=99 \
      --leak-check=full \
      --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
      "$work/runtime_test" "$work/libTunnelgateExampleRuntime.so"
    ;;
  *)
    echo "Error: unknown stage '$stage' (swiftpm warnings exports asan tsan valgrind, or --all)" >&2
    exit 64
    ;;
  esac
done

printf '\n%d passed, %d failed\n' "$passed" "$failed"
[ "$failed" -eq 0 ]
