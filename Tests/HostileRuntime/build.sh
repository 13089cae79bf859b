#!/usr/bin/env bash
# Builds the hostile runtime (a TEST FIXTURE, see hostile_runtime.c) into OUTDIR/libhostile-runtime.so.
set -euo pipefail
out=${1:?usage: build.sh OUTDIR}
src=$(dirname "${BASH_SOURCE[0]}")/hostile_runtime.c
mkdir -p "$out"
gcc -std=gnu11 -O2 -Wall -Wextra -Werror -shared -fPIC -pthread -o "$out/libhostile-runtime.so" "$src"
