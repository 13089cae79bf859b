#!/usr/bin/env bash
# Runs every Tunnelgate test, as root, from a fresh clone: installs the Debian packages (Scripts/setup.sh),
# builds, runs the unit tests (swift test), the example runtime's C tests, the WireGuard parsers' fuzz
# target for a bounded time (Scripts/fuzz-wireguard.sh, TG_FUZZ_TIME seconds, default 60), the DNS
# parsers' (Scripts/fuzz-dns.sh, half of TG_FUZZ_TIME, default 30), then every network-namespace
# scenario in netns/tests/ (two at a time; each builds its own namespaces). Each scenario's output goes to a log that is printed when it ends.
# The last line is the total, "N passed, N failed", counting swift test's executed tests and the scenarios'
# checks; the exit status is non-zero if anything failed.
#
#   Scripts/test.sh                  everything
#   Scripts/test.sh netns/tests/split-tunnel.sh ...   only these scenarios (after setup and build)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
root=$(pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "Error: Scripts/test.sh creates network namespaces and must run as root" >&2
  exit 1
fi
# The toolchain's usual place, for a shell whose PATH does not have it.
if ! command -v swift >/dev/null && [ -x /opt/swift/usr/bin/swift ]; then
  PATH=/opt/swift/usr/bin:$PATH
fi

passed=0
failed=0
netns_before=$(ip netns list 2>/dev/null | awk '{print $1}')
logs=$(mktemp -d /tmp/tunnelgate-test.XXXXXX)
trap 'rm -rf "$logs"' EXIT
# A scenario that hangs is stopped (SIGTERM, so its trap removes its namespaces) after this many seconds.
scenario_timeout=${TG_SCENARIO_TIMEOUT:-300}
parallel=${TG_PARALLEL:-2}

section() { printf '\n=== %s\n' "$*"; }
fail_step() { failed=$((failed + 1)); echo "not ok - $*"; }

# --- Setup and build ----------------------------------------------------------------------------------
section "setup: Scripts/setup.sh"
if ! bash Scripts/setup.sh; then
  fail_step "Scripts/setup.sh"
  printf '%d passed, %d failed\n' "$passed" "$failed"
  exit 1
fi

section "build: swift build"
built=1
if ! swift build 2>&1 | tee "$logs/build.log"; then
  built=0
  fail_step "swift build (the scenarios that need the binary will fail too)"
fi

# The package test (netns/tests/package.sh) and the VPN container's (container-vpn.sh, docker-vpn.sh)
# build the release binary through Scripts/install.sh; built here, before the scenarios, its minutes do
# not count against their timeouts.
if [ "$built" -eq 1 ] && { [ $# -eq 0 ] || printf '%s\n' "$@" | grep -qE '(package|container-vpn|docker-vpn)\.sh$'; }; then
  section "build: Scripts/install.sh --build-only (the release binary for the package test)"
  bash Scripts/install.sh --build-only 2>&1 | tee "$logs/build-release.log" ||
    fail_step "Scripts/install.sh --build-only (the package test will fail too)"
fi

# --- Unit tests ---------------------------------------------------------------------------------------
# swift test prints XCTest's "Executed N tests" and Swift Testing's "Test run with N tests"; a test that
# failed has a "Test Case '…' failed" (XCTest) or "✘ Test … failed after" (Swift Testing) line.
if [ $# -eq 0 ] && [ "$built" -eq 1 ]; then
  section "unit tests: swift test"
  swift test 2>&1 | tee "$logs/swift-test.log"
  unit_rc=${PIPESTATUS[0]}
  xc_total=$(sed -n "s/^[[:space:]]*Executed \([0-9]*\) tests\{0,1\}, with .*/\1/p" "$logs/swift-test.log" | tail -n 1)
  xc_failed=$(grep -c "^Test Case '.*' failed (" "$logs/swift-test.log")
  st_total=$(sed -n 's/.* Test run with \([0-9]*\) tests\{0,1\} .*/\1/p' "$logs/swift-test.log" | tail -n 1)
  st_failed=$(grep -E '✘ Test .* failed after' "$logs/swift-test.log" | grep -vc '✘ Test run with')
  unit_total=$(( ${xc_total:-0} + ${st_total:-0} ))
  unit_failed=$(( xc_failed + st_failed ))
  passed=$((passed + unit_total - unit_failed))
  failed=$((failed + unit_failed))
  echo "swift test: $((unit_total - unit_failed)) passed, $unit_failed failed (exit $unit_rc)"
  if [ "$unit_rc" -ne 0 ] && [ "$unit_failed" -eq 0 ]; then
    fail_step "swift test exited $unit_rc without a failed test (a crash or a build error?)"
  fi
fi

# --- The example runtime's C tests (dlopen of the built library, two instances over loopback) ----------
if [ $# -eq 0 ] && [ "$built" -eq 1 ]; then
  section "example runtime: Tests/ExampleRuntimeTests/run_tests.sh"
  bash Tests/ExampleRuntimeTests/run_tests.sh >"$logs/example-runtime.log" 2>&1
  er_rc=$?
  sed 's/^/    /' "$logs/example-runtime.log"
  summary=$(tail -n 1 "$logs/example-runtime.log" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
  if [ -z "$summary" ]; then
    fail_step "example runtime tests ended without a summary line (exit $er_rc)"
  else
    read -r p f <<<"$summary"
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$er_rc" -ne 0 ] && [ "$f" -eq 0 ] && fail_step "example runtime tests exited $er_rc with no failed check"
  fi
fi

# --- The WireGuard parsers under libFuzzer, for a bounded time (one check: libFuzzer exited 0) ----------
# A crash or broken invariant leaves its input in .build/fuzz-wireguard/artifacts/; the log names it.
if [ $# -eq 0 ]; then
  section "fuzz: Scripts/fuzz-wireguard.sh (${TG_FUZZ_TIME:-60}s)"
  WG_FUZZ_TIME=${TG_FUZZ_TIME:-60} bash Scripts/fuzz-wireguard.sh >"$logs/fuzz-wireguard.log" 2>&1
  fz_rc=$?
  sed 's/^/    /' "$logs/fuzz-wireguard.log"
  summary=$(tail -n 1 "$logs/fuzz-wireguard.log" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
  if [ -z "$summary" ]; then
    fail_step "the WireGuard fuzz target ended without a summary line (exit $fz_rc)"
  else
    read -r p f <<<"$summary"
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$fz_rc" -ne 0 ] && [ "$f" -eq 0 ] && fail_step "the WireGuard fuzz target exited $fz_rc with no failed check"
  fi
fi

# --- The DNS message parsers under libFuzzer, for half that time (one check: libFuzzer exited 0) --------
# A crash or broken invariant leaves its input in .build/fuzz-dns/artifacts/; the log names it.
if [ $# -eq 0 ]; then
  dns_fuzz_time=$(( ${TG_FUZZ_TIME:-60} / 2 ))
  [ "$dns_fuzz_time" -ge 1 ] || dns_fuzz_time=1
  section "fuzz: Scripts/fuzz-dns.sh (${dns_fuzz_time}s)"
  DNS_FUZZ_TIME=$dns_fuzz_time bash Scripts/fuzz-dns.sh >"$logs/fuzz-dns.log" 2>&1
  fz_rc=$?
  sed 's/^/    /' "$logs/fuzz-dns.log"
  summary=$(tail -n 1 "$logs/fuzz-dns.log" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
  if [ -z "$summary" ]; then
    fail_step "the DNS fuzz target ended without a summary line (exit $fz_rc)"
  else
    read -r p f <<<"$summary"
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$fz_rc" -ne 0 ] && [ "$f" -eq 0 ] && fail_step "the DNS fuzz target exited $fz_rc with no failed check"
  fi
fi

# --- Namespace scenarios ------------------------------------------------------------------------------
if [ $# -gt 0 ]; then
  scenarios=("$@")
else
  scenarios=(netns/tests/*.sh)
fi
section "end-to-end: ${#scenarios[@]} scenarios in network namespaces, $parallel at a time"
# The scenarios' topologies are tunnelgate-lab runs (netns/lib.sh); a run whose scenario was killed
# (SIGKILL, no trap ran) is removed by a sweep, here and after the scenarios.
lab_sweep() {
  [ -x .build/debug/tunnelgate-lab ] || return 0
  .build/debug/tunnelgate-lab sweep | sed 's/^/# lab: /'
}
lab_sweep

# run_scenario INDEX PATH: runs one scenario with its output in $logs/INDEX.log, its exit code in .rc.
run_scenario() {
  local log=$logs/$1.log rc
  timeout --kill-after=20 "$scenario_timeout" "$root/$2" >"$log" 2>&1 && rc=0 || rc=$?
  echo "$rc" >"$logs/$1.rc"
}

# The container scenarios run one after another, as one job started first: their checks compare
# host-wide names (/run/netns, /etc/netns) where another one's podman makes netns-UUID entries.
container_indices=()
other_indices=()
for i in "${!scenarios[@]}"; do
  case ${scenarios[$i]##*/} in
    cni-*.sh | container-*.sh | docker-*.sh) container_indices+=("$i") ;;
    *) other_indices+=("$i") ;;
  esac
done
if [ "${#container_indices[@]}" -gt 0 ]; then
  (for i in "${container_indices[@]}"; do run_scenario "$i" "${scenarios[$i]}"; done) &
fi
for i in "${other_indices[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do
    wait -n
  done
  run_scenario "$i" "${scenarios[$i]}" &
done
wait

for i in "${!scenarios[@]}"; do
  name=${scenarios[$i]}
  log=$logs/$i.log
  rc=$(cat "$logs/$i.rc" 2>/dev/null || echo 1)
  section "$name (exit $rc)"
  sed 's/^/    /' "$log"
  summary=$(tail -n 1 "$log" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
  if [ -z "$summary" ]; then
    fail_step "$name ended without a summary line (exit $rc)"
    continue
  fi
  read -r p f <<<"$summary"
  passed=$((passed + p))
  failed=$((failed + f))
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    fail_step "$name timed out after ${scenario_timeout}s"
  elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    fail_step "$name exited $rc with no failed check"
  fi
done

lab_sweep
leftover=$(ip netns list | awk '{print $1}' | grep -vxF -f <(printf '%s\n' "$netns_before") || true)
if [ -n "$leftover" ]; then
  fail_step "network namespaces left behind: $(printf '%s' "$leftover" | tr '\n' ' ')"
fi

printf '\n%d passed, %d failed\n' "$passed" "$failed"
[ "$failed" -eq 0 ]
