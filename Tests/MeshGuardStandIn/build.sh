#!/usr/bin/env bash
# Builds the MeshGuard stand-in (a TEST FIXTURE, see meshguard_standin.c; needs gcc and libsodium) into OUTDIR:
#   libmeshguard-standin.so          the stand-in with every symbol the mesh runtime binds
#   libmeshguard-standin-norecv.so   the same without meshguard_tunnel_recv (a required symbol)
set -euo pipefail
out=${1:?usage: build.sh OUTDIR}
src=$(dirname "${BASH_SOURCE[0]}")/meshguard_standin.c
mkdir -p "$out"
gcc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -pthread -o "$out/libmeshguard-standin.so" "$src" -lsodium
gcc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -pthread -DSTANDIN_OMIT_RECV -o "$out/libmeshguard-standin-norecv.so" "$src" -lsodium
