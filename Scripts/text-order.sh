#!/usr/bin/env bash
# Writes packaging/text-order/tunnelgate.order and tunnelgate-plane.order: the functions a tunnel's
# engine and plane run, which Package.swift has the linker lay out first and together (docs/performance.md,
# "resident memory"). Run it by hand, as root, when the code that starts a tunnel or moves its packets
# has changed much; the order files are committed. A function missing from them still runs, from the
# rest of the text, at the cost of the 64 KB the kernel maps around each page of it.
#
# How it knows what runs: the binaries are linked from the same objects with every input section on a
# page of its own (a linker script's SUBALIGN(4096)), copied to a directory of a block-device file system,
# their pages dropped from the page cache, and the disk's read-ahead set to 0 while one tunnelgate ⇄
# tunnelgate tunnel (IPv4 and IPv6 inside) runs: up, pings, iperf3 TCP both ways and UDP, status, down.
# Every page of the copies in the page cache afterwards is one some process touched (mincore(2)), and
# nothing else; so a function ran exactly when its page is there. That is done RUNS times and the union
# taken (what runs now and then, such as a timer's work, counts).
#
#   Scripts/text-order.sh [RUNS]      (default 2, at most 10)
#
# The disk's read-ahead is restored on exit; the namespaces (tgto-PID-a/b) are removed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=Scripts/bench-topology.sh
. Scripts/bench-topology.sh
# shellcheck source=Scripts/release-flags.sh
. Scripts/release-flags.sh
[ "$(id -u)" -eq 0 ] || { echo "Error: Scripts/text-order.sh must run as root" >&2; exit 1; }
command -v swift >/dev/null || PATH=/opt/swift/usr/bin:$PATH
runs=${1:-2}
if ! [[ $runs =~ ^[0-9]+$ ]] || [ "$runs" -lt 1 ] || [ "$runs" -gt 10 ]; then
  echo "Error: RUNS must be a whole number from 1 to 10, not '$runs'" >&2; exit 64
fi
for tool in iperf3 wg python3 cc; do
  command -v "$tool" >/dev/null || { echo "Error: $tool is missing (Scripts/setup.sh installs it)" >&2; exit 1; }
done

products=(tunnelgate tunnelgate-plane)
work=$(mktemp -d /var/tmp/tunnelgate-text-order.XXXXXX)
A=tgto-$$-a B=tgto-$$-b
# The disk under $work: its read-ahead is the file system's (a partition's is its disk's).
dev=$(stat -c '%Hd:%Ld' "$work")
read_ahead=/sys/dev/block/$dev/queue/read_ahead_kb
[ -f "$read_ahead" ] || read_ahead=/sys/dev/block/$dev/../queue/read_ahead_kb
[ -f "$read_ahead" ] || { echo "Error: $work is not on a block device's file system (no $read_ahead)" >&2; exit 1; }
saved_read_ahead=$(cat "$read_ahead")
restore() {
  echo "$saved_read_ahead" >"$read_ahead"
  [ -f "$work/text.ld.before" ] && cp "$work/text.ld.before" packaging/text-order/text.ld
  for s in a b; do
    [ -x "$work/run/tunnelgate" ] && ip netns exec "tgto-$$-$s" "$work/run/tunnelgate" down "tgto$$$s" >/dev/null 2>&1 || true
  done
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$work"
}
trap restore EXIT
trap 'exit 130' INT TERM

# pagecache: mincore(2) of a file's pages (evict: drop them first, with POSIX_FADV_DONTNEED).
cat >"$work/pagecache.c" <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: pagecache evict|list FILE\n"); return 64; }
    int fd = open(argv[2], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) { perror(argv[2]); return 1; }
    if (strcmp(argv[1], "evict") == 0) return posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 ? 0 : 1;
    size_t pages = ((size_t)st.st_size + 4095) / 4096;
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    unsigned char *in = malloc(pages);
    if (map == MAP_FAILED || in == NULL || mincore(map, (size_t)st.st_size, in) != 0) { perror("mincore"); return 1; }
    for (size_t i = 0; i < pages; i++) if (in[i] & 1) printf("%zu\n", i);
    return 0;
}
C
cc -O2 -o "$work/pagecache" "$work/pagecache.c"

umask 077
wg genkey >"$work/a.key"; wg pubkey <"$work/a.key" >"$work/a.pub"
wg genkey >"$work/b.key"; wg pubkey <"$work/b.key" >"$work/b.pub"
for s in a b; do
  [ $s = a ] && host=1 peer=2 other=b || host=2 peer=1 other=a
  cat >"$work/tgto$$$s.conf" <<CONF
[Interface]
PrivateKey = $(cat "$work/$s.key")
Address = 10.79.0.$host/24, fd00:79::$host/64
ListenPort = 51820
MTU = 1420
[Peer]
PublicKey = $(cat "$work/$other.pub")
Endpoint = 10.77.0.$peer:51820
AllowedIPs = 10.79.0.$peer/32, fd00:79::$peer/128
CONF
done
umask 022

# poll TRIES CMD...: CMD every 20 ms until it succeeds, at most TRIES times.
poll() { local n=$1; shift; for _ in $(seq "$n"); do "$@" && return 0; sleep 0.02; done; return 1; }

listening() { [ -n "$(ip netns exec "$B" ss -Hltn 'sport = :5201')" ]; }
# workload: one tunnel from $work/run's binaries, through what a tunnel does in its life.
workload() {
  local tg=$work/run/tunnelgate s
  bench_veth_pair "$A" "$B"
  for s in a b; do
    ip netns exec "tgto-$$-$s" "$tg" up "$work/tgto$$$s.conf" --detach >/dev/null
  done
  ip netns exec "$A" ping -c 3 -i 0.2 -W 2 10.79.0.2 >/dev/null
  ip netns exec "$A" ping -c 3 -i 0.2 -W 2 fd00:79::2 >/dev/null
  ip netns exec "$B" iperf3 -s -D -p 5201 --pidfile "$work/iperf3.pid"
  poll 250 listening || { echo "Error: iperf3 -s in $B did not listen" >&2; exit 1; }
  ip netns exec "$A" timeout 30 iperf3 -c 10.79.0.2 -p 5201 -t 2 >/dev/null
  ip netns exec "$A" timeout 30 iperf3 -c 10.79.0.2 -p 5201 -t 2 -R >/dev/null
  ip netns exec "$A" timeout 30 iperf3 -c fd00:79::2 -p 5201 -t 1 -P 2 >/dev/null
  ip netns exec "$A" timeout 30 iperf3 -c 10.79.0.2 -p 5201 -t 1 -u -b 500M -l 1000 >/dev/null
  kill "$(cat "$work/iperf3.pid")" 2>/dev/null || true
  for s in a b; do
    ip netns exec "tgto-$$-$s" "$tg" status "tgto$$$s" >/dev/null
    ip netns exec "tgto-$$-$s" "$tg" status "tgto$$$s" --json >/dev/null
    ip netns exec "tgto-$$-$s" "$tg" down "tgto$$$s" >/dev/null
  done
  ip netns del "$A"
  ip netns del "$B"
}

# A build directory of its own: SwiftPM does not rebuild objects when only flags given on its command line
# change, so a .build/release made before Scripts/release-flags.sh asked for function sections has none.
scratch=(--scratch-path .build/text-order)
bin=$(swift build "${scratch[@]}" "${tg_release_flags[@]}" --show-bin-path)
for product in "${products[@]}"; do
  [ -f "packaging/text-order/$product.order" ] && cp "packaging/text-order/$product.order" "$work/$product.order.before"
  : >"packaging/text-order/$product.order"      # measured in a layout that follows no order
done
# Every input section of .text on pages of its own: for these links text.ld (which Package.swift gives
# the linker) says so instead, and is put back after them.
cp packaging/text-order/text.ld "$work/text.ld.before"
cat >packaging/text-order/text.ld <<'LD'
SECTIONS {
  .text : SUBALIGN(4096) { *(.text..L*) *(.text .text.*) }
} INSERT AFTER .init;
LD
mkdir -p "$work/profile"
for product in "${products[@]}"; do
  rm -f "$bin/$product"
  swift build "${scratch[@]}" "${tg_release_flags[@]}" \
    -Xlinker "-Map=$work/profile/$product.map" -Xlinker --no-demangle --product "$product" >"$work/build.log" 2>&1 ||
    { cat "$work/build.log" >&2; echo "Error: swift build of $product (a section a page) failed" >&2; exit 1; }
  cp "$bin/$product" "$work/profile/$product"
  rm -f "$bin/$product"
done
cp "$work/text.ld.before" packaging/text-order/text.ld
for run in $(seq "$runs"); do
  mkdir -p "$work/run"
  for product in "${products[@]}"; do
    install -m 0755 "$work/profile/$product" "$work/run/$product"
    sync "$work/run/$product"
    "$work/pagecache" evict "$work/run/$product"
  done
  echo 0 >"$read_ahead"
  workload
  echo "$saved_read_ahead" >"$read_ahead"
  for product in "${products[@]}"; do "$work/pagecache" list "$work/run/$product" >"$work/profile/$product.pages-$run"; done
  echo "text-order: run $run: $(for p in "${products[@]}"; do printf '%s %s pages touched  ' "$p" "$(wc -l <"$work/profile/$p.pages-$run")"; done)"
  rm -rf "$work/run"
done

# The functions on touched pages, by name. One the compiler gave a section of its own (.text.NAME) is
# placed by its name, so those come first, in name order. The rest are in sections that hold many (the
# .text of an object built without function sections: the Swift standard library's own, _Concurrency,
# _StringProcessing, libdispatch): each moves whole, so each such section that holds a function that ran
# is named once, by one of its functions, after all the others.
python3 - "$work/profile" "$runs" "${products[@]}" <<'PY'
import re, subprocess, sys
profile, runs, products = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load_segments(binary):
    out = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True, check=True).stdout
    return [(int(f[1], 16), int(f[2], 16), int(f[5], 16)) for f in (l.split() for l in out.splitlines()) if f and f[0] == "LOAD"]
def page_of(segments, address):
    for offset, vaddr, size in segments:
        if vaddr <= address < vaddr + size: return (address - vaddr + offset) // 4096
    return None
def text_sections(map_file):
    """lld's map: each input section of .text (address, size, name) and the symbols it defines."""
    sections, in_text = [], False
    for line in open(map_file):
        fields = line.split(None, 4)
        if len(fields) < 5: continue
        name = fields[4].strip()
        if re.fullmatch(r"\.[A-Za-z0-9_.]+", name) and ":(" not in name:
            in_text = name == ".text"; continue
        if not in_text: continue
        if ":(" in name: sections.append([int(fields[0], 16), int(fields[2], 16), name, []])
        elif sections: sections[-1][3].append(name)
    return sections
for product in products:
    binary = f"{profile}/{product}"
    segments = load_segments(binary)
    pages = set()
    for run in range(1, runs + 1): pages |= {int(p) for p in open(f"{profile}/{product}.pages-{run}")}
    single, shared, in_shared = set(), {}, set()
    for address, size, name, symbols in text_sections(f"{profile}/{product}.map"):
        own = re.search(r":\(\.text\.[^)]+\)$", name) is not None
        if not own: in_shared.update(symbols)
        if size == 0 or not symbols: continue
        first, last = page_of(segments, address), page_of(segments, address + size - 1)
        if first is None or not any(p in pages for p in range(first, last + 1)): continue
        if own: single.update(symbols)
        else: shared.setdefault(name, sorted(symbols)[0])
    # A name also defined in a shared section (a local helper many objects have a copy of) would pull that
    # whole section forward to its place: such names come last, after the shared sections' own.
    first_part, last_part = sorted(single - in_shared), sorted(single & in_shared)
    with open(f"packaging/text-order/{product}.order", "w") as f:
        for name in first_part: f.write(name + "\n")
        for section in sorted(shared): f.write(shared[section] + "\n")
        for name in last_part: f.write(name + "\n")
    print(f"text-order: {product}: {len(first_part) + len(last_part)} functions with sections of their own "
          f"and {len(shared)} shared sections ran")
PY
echo "text-order: wrote packaging/text-order/*.order; remove a built tunnelgate and tunnelgate-plane to have them relinked in that order"
