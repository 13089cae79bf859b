#!/usr/bin/env python3
"""Reads a live process's memory the way an attacker with root does, for netns/tests/secrets-memory.sh.

  memscan.py PID LABEL=FILE...

Every mapping in /proc/PID/maps is read through /proc/PID/mem (also those without read permission: the
kernel lets a tracer read them, and so does this), and the bytes of each FILE (the pattern: a raw key, a
key's base64 text; taken from a file so that no command line carries it) are counted. Prints one JSON
object:

  {"LABEL": {"count": N, "hits": [{"address": "0x…", "mapping": "START-END PERMS PATH",
                                   "vmflags": ["rd", "wr", …]}]},
   …, "_scanned_bytes": N, "_unreadable": ["START-END PERMS PATH: error", …]}

vmflags are the mapping's VmFlags from /proc/PID/smaps ("dd": excluded from core dumps, "lo": locked).
The process is not stopped: it runs on while it is read, as it would under a real attack. The scanner's
own copies of the patterns are in its own memory, never in PID's.
"""
import json
import os
import sys

CHUNK = 1 << 20
SKIP = ("[vvar]", "[vvar_vclock]", "[vsyscall]")


def mappings(pid):
    out = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            start, end = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5].strip() if len(parts) > 5 else ""
            out.append((start, end, parts[1], path, line.strip()))
    return out


def vmflags(pid):
    """START -> list of VmFlags, from smaps."""
    flags, current = {}, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):
                current = int(first.split("-")[0], 16)
            elif first == "VmFlags:" and current is not None:
                flags[current] = line.split()[1:]
    return flags


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pid = int(sys.argv[1])
    patterns = {}
    for arg in sys.argv[2:]:
        label, path = arg.split("=", 1)
        with open(path, "rb") as f:
            patterns[label] = f.read()
        if not patterns[label]:
            sys.exit(f"memscan: the pattern {label} ({path}) is empty")
    longest = max(len(p) for p in patterns.values())
    result = {label: {"count": 0, "hits": []} for label in patterns}
    maps = mappings(pid)
    flags = vmflags(pid)
    scanned, unreadable = 0, []
    fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    try:
        for start, end, perms, path, line in maps:
            if path in SKIP:
                continue
            hits = {label: set() for label in patterns}
            tail = b""
            offset = start
            while offset < end:
                size = min(CHUNK, end - offset)
                try:
                    data = os.pread(fd, size, offset)
                except OSError as e:
                    unreadable.append(f"{line}: {e.strerror} at {offset:#x}")
                    break
                if not data:
                    unreadable.append(f"{line}: short read at {offset:#x}")
                    break
                scanned += len(data)
                window = tail + data
                base = offset - len(tail)
                for label, pattern in patterns.items():
                    i = window.find(pattern)
                    while i >= 0:
                        hits[label].add(base + i)
                        i = window.find(pattern, i + 1)
                tail = window[-(longest - 1):] if longest > 1 else b""
                offset += len(data)
            for label, found in hits.items():
                for address in sorted(found):
                    result[label]["hits"].append({"address": f"{address:#x}", "mapping": line,
                                                  "vmflags": flags.get(start, [])})
                result[label]["count"] += len(found)
    finally:
        os.close(fd)
    result["_scanned_bytes"] = scanned
    result["_unreadable"] = unreadable
    print(json.dumps(result))


if __name__ == "__main__":
    main()
