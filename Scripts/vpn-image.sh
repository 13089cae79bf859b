#!/usr/bin/env bash
# Builds the VPN container image (gluetun's pattern; docs/operations.md, VPN container) without a
# registry: a Debian 12 root made by mmdebstrap holding Debian's Essential packages and the Tunnelgate
# package with its dependencies (nothing else: no apt, no shell tools beyond Essential), plus the entry
# point and health check of packaging/container/; tarred by mmdebstrap with numeric owners and imported
# into a container engine as a local image.
#
#   Scripts/vpn-image.sh tar FILE [--deb DEB]             only the root file system, as a tarball
#   Scripts/vpn-image.sh podman [TAG] [--deb DEB]         podman import, then a podman build of no layer
#                                                         that adds the HEALTHCHECK (below). The caller's
#                                                         CONTAINERS_CONF, CONTAINERS_STORAGE_CONF.
#   Scripts/vpn-image.sh docker [TAG] [--deb DEB]         docker import, HEALTHCHECK by --change (the
#                                                         caller's DOCKER_HOST)
#
# DEB defaults to .build/package/tunnelgate_VERSION_ARCH.deb (Scripts/package-deb.sh; the newest there).
# TAG defaults to localhost/tunnelgate-vpn:latest. Prints the image ID on its last line. The packages
# come from the machine's own Debian sources (the same mirror apt uses here); downloads are kept in
# $TG_VPN_IMAGE_CACHE (default .build/vpn-image/cache), so a second build downloads only the lists.
#
# The image: ENTRYPOINT /usr/lib/tunnelgate/container/entrypoint (`tunnelgate up $TUNNELGATE_TUNNEL`,
# default wg0, configuration /etc/tunnelgate/wg0.json mounted by the user), STOPSIGNAL SIGTERM, and
# HEALTHCHECK /usr/lib/tunnelgate/container/healthcheck (healthy while `tunnelgate status` says
# connected), ENV TUNNELGATE_PLANE_MOUNT_NAMESPACE=off (below). Podman 4.3's `import --change` refuses
# HEALTHCHECK ("invalid instruction": it takes CMD, ENTRYPOINT, ENV, EXPOSE, LABEL, ONBUILD, STOPSIGNAL,
# USER, VOLUME, WORKDIR), and `podman commit` of a container made with --health-cmd does not carry the
# check into the image; a `podman build --format docker` whose Containerfile is FROM the imported image
# and HEALTHCHECK alone does (the OCI image format has no health check: the docker format is needed). No registry is contacted: `--pull=never`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
tag_default=localhost/tunnelgate-vpn:latest
entrypoint=/usr/lib/tunnelgate/container/entrypoint
healthcheck=/usr/lib/tunnelgate/container/healthcheck
# The packet plane without its mount namespace: a container given NET_ADMIN alone has no CAP_SYS_ADMIN
# to make one (docs/operations.md, VPN container, says what the plane then sees).
plane_env=TUNNELGATE_PLANE_MOUNT_NAMESPACE=off
# How often podman (or dockerd) runs the check, and how many failures in a row make "unhealthy".
health_interval=10s health_timeout=5s health_retries=1

die() { echo "Error: $*" >&2; exit 1; }
usage() {
  echo "Usage: Scripts/vpn-image.sh tar FILE [--deb DEB] | podman [TAG] [--deb DEB] | docker [TAG] [--deb DEB]" >&2
  exit 64
}

cmd=${1:-}
[ -n "$cmd" ] || usage
case $cmd in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
shift
positional=() deb=""
while [ $# -gt 0 ]; do
  case $1 in
  --deb) [ $# -ge 2 ] || usage; deb=$2; shift 2 ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) echo "Error: unknown option '$1'" >&2; usage ;;
  *) positional+=("$1"); shift ;;
  esac
done

if [ -z "$deb" ]; then
  deb=$(ls -1t "$root"/.build/package/tunnelgate_*_"$(dpkg --print-architecture)".deb 2>/dev/null | head -n 1 || true)
  [ -n "$deb" ] || die "no package in .build/package (build it with Scripts/package-deb.sh, or name one with --deb)"
fi
[ -f "$deb" ] || die "$deb: no such package"
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")
[ "$(dpkg-deb -f "$deb" Package 2>/dev/null)" = tunnelgate ] || die "$deb is not a tunnelgate package"
command -v mmdebstrap >/dev/null || die "mmdebstrap is not installed (Scripts/setup.sh installs it)"

# Work directories, removed however the script ends (a failed mmdebstrap ends it under set -e).
work_dirs=()
trap 'rm -rf "${work_dirs[@]}"' EXIT
cache=${TG_VPN_IMAGE_CACHE:-$root/.build/vpn-image/cache}
mkdir -p "$cache"

# rootfs_tar FILE: the root file system, as mmdebstrap writes a tarball (numeric owners, devices left
# to the engine).
rootfs_tar() {
  local out=$1 work sources
  work=$(mktemp -d /tmp/tunnelgate-vpn-image.XXXXXX)
  work_dirs+=("$work")
  mkdir -p "$work/downloads" "$work/deb"
  # apt (outside the root) hands the .deb's path to dpkg inside it: the package is put at the same
  # path inside the root for the installation, and removed from there afterwards.
  cp "$deb" "$work/deb/"
  local staged=$work/deb/${deb##*/}
  sources=/etc/apt/sources.list.d/debian.sources
  [ -f "$sources" ] || sources=/etc/apt/sources.list
  # Downloads come from and go back to the cache; the package's Depends are resolved by apt (from the
  # host, into the root) against the .deb given by path. The cached .debs are removed from the image
  # before it is tarred.
  mmdebstrap --variant=essential --include="$staged" --skip=download/empty \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
    --setup-hook="mkdir -p \"\$1$work/deb\" && cp '$staged' \"\$1$work/deb/\"" \
    --setup-hook="sync-in $cache /var/cache/apt/archives/" \
    --customize-hook="sync-out /var/cache/apt/archives $work/downloads" \
    --customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb' \
    --customize-hook="rm -rf \"\$1$work\"" \
    --customize-hook='mkdir -p "$1"/usr/lib/tunnelgate/container' \
    --customize-hook="copy-in $root/packaging/container/entrypoint $root/packaging/container/healthcheck /usr/lib/tunnelgate/container/" \
    --customize-hook='chmod 755 "$1"/usr/lib/tunnelgate/container/entrypoint "$1"/usr/lib/tunnelgate/container/healthcheck' \
    --customize-hook='chroot "$1" /usr/sbin/tunnelgate --version' \
    bookworm "$out" "$sources" >&2
  # Into the cache under a temporary name and renamed, so a build reading it at the same time never
  # sees half a file.
  local f
  for f in "$work"/downloads/*.deb; do
    [ -e "$f" ] && [ ! -e "$cache/${f##*/}" ] || continue
    cp "$f" "$cache/.${f##*/}.part" && mv "$cache/.${f##*/}.part" "$cache/${f##*/}"
  done
  return 0
}

case $cmd in
tar)
  [ ${#positional[@]} -eq 1 ] || usage
  case ${positional[0]} in *.tar) ;; *) die "${positional[0]}: the tarball's name must end in .tar" ;; esac
  rootfs_tar "${positional[0]}"
  ;;
podman | docker)
  [ ${#positional[@]} -le 1 ] || usage
  tag=${positional[0]:-$tag_default}
  work=$(mktemp -d /tmp/tunnelgate-vpn-image.XXXXXX)
  work_dirs+=("$work")
  version=$(dpkg-deb -f "$deb" Version)
  if [ "$cmd" = podman ]; then
    command -v podman >/dev/null || die "podman is not installed (Scripts/setup.sh installs it)"
    rootfs_tar "$work/rootfs.tar"
    base=localhost/tunnelgate-vpn-base:$version-$$
    podman import --quiet --change "ENTRYPOINT [\"$entrypoint\"]" --change 'STOPSIGNAL SIGTERM' --change "ENV $plane_env" \
      --change "LABEL org.opencontainers.image.version=$version" "$work/rootfs.tar" "$base" >/dev/null
    printf 'FROM %s\nHEALTHCHECK --interval=%s --timeout=%s --retries=%s CMD ["%s"]\n' \
      "$base" "$health_interval" "$health_timeout" "$health_retries" "$healthcheck" >"$work/Containerfile"
    if ! podman build --quiet --pull=never --format docker --tag "$tag" --file "$work/Containerfile" "$work" >"$work/build.out" 2>&1; then
      podman rmi "$base" >/dev/null 2>&1 || true
      cat "$work/build.out" >&2
      die "podman build of the HEALTHCHECK failed"
    fi
    # The base tag goes; its layer stays, the image's only one.
    podman untag "$base" >/dev/null 2>&1 || true
    podman image inspect --format '{{.Id}}' "$tag"
  else
    docker=/usr/bin/docker
    [ -x "$docker" ] || die "$docker is missing (Debian package docker.io; Scripts/setup.sh installs it)"
    rootfs_tar "$work/rootfs.tar"
    # dockerd's import refuses STOPSIGNAL ("not a valid change command"); SIGTERM is its default anyway.
    "$docker" import --change "ENTRYPOINT [\"$entrypoint\"]" --change "ENV $plane_env" \
      --change "LABEL org.opencontainers.image.version=$version" \
      --change "HEALTHCHECK --interval=$health_interval --timeout=$health_timeout --retries=$health_retries CMD [\"$healthcheck\"]" \
      "$work/rootfs.tar" "$tag"
  fi
  ;;
*)
  usage
  ;;
esac
