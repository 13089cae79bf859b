# shellcheck shell=bash
# Scripts/release-flags.sh: how the binaries are built as installed, sourced by Scripts/install.sh (and so
# the package) and by the benchmarks that measure what a user runs; never run.
#
# Release; the Swift standard library and runtime (and, in tunnelgate-on-demand, Foundation) linked in
# statically, so the binaries need only Debian's libraries, and no $ORIGIN run path (docs/packaging.md).
# Every function in a section of its own (Swift and C), so that the linker can lay out the code a tunnel
# runs together in the order packaging/text-order/*.order lists it (Package.swift; docs/performance.md,
# "resident memory"): the kernel maps an executable's pages 64 KB at a time around each one touched, so
# code that runs scattered among code that never does costs its neighbours' pages too.
tg_release_flags=(-c release --static-swift-stdlib --disable-local-rpath
  -Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections)
#
# SwiftPM does not rebuild objects when only flags given on its command line change: a .build/release
# made before these flags has objects without function sections, and its binaries ignore the order
# (netns/tests/package.sh says so). Remove .build/release once; a fresh clone is always right.
