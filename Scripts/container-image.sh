#!/usr/bin/env bash
# Builds the test image of the container scenarios without a registry: a root file system holding
# Debian's busybox-static (/bin/busybox and a symbolic link for each of its applets, as `busybox
# --install -s` would make them), a root and a nobody user, /tmp, and nothing else; tarred with numeric
# owners and imported into a container engine as a local image.
#
#   Scripts/container-image.sh tar FILE                   only the root file system, as a tarball
#   Scripts/container-image.sh podman [TAG]               podman import (the caller's CONTAINERS_CONF,
#                                                         CONTAINERS_STORAGE_CONF: the test's private ones)
#   Scripts/container-image.sh docker [TAG]               docker import (the caller's DOCKER_HOST)
#
# TAG defaults to localhost/tunnelgate-busybox:test. The image's command is /bin/sh. Prints the image ID.
# No registry is contacted: `import` reads the tarball, and nothing here pulls.
set -euo pipefail

tag_default=localhost/tunnelgate-busybox:test
busybox=/bin/busybox

die() { echo "Error: $*" >&2; exit 1; }

# rootfs_tar FILE: writes the root file system to FILE.
rootfs_tar() {
  local out=$1 root applet
  [ -x "$busybox" ] || die "$busybox is missing (Debian package busybox-static; Scripts/setup.sh installs it)"
  # A static binary is what makes the image self-contained: a dynamic one (package busybox) would need
  # its libc inside.
  dpkg-query -S "$busybox" 2>/dev/null | grep -q '^busybox-static:' \
    || die "$busybox is not busybox-static's (the dynamically linked busybox needs a libc in the image)"
  root=$(mktemp -d /tmp/tunnelgate-rootfs.XXXXXX)
  chmod 755 "$root"
  trap 'rm -rf "$root"' RETURN
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,proc,sys,dev,root,run,var}
  chmod 1777 "$root/tmp"
  chmod 700 "$root/root"
  cp "$busybox" "$root/bin/busybox"
  # --list-full names each applet with its directory (usr/bin/wget, sbin/ip, ...).
  for applet in $("$busybox" --list-full); do
    [ "$applet" = bin/busybox ] && continue
    ln -sf /bin/busybox "$root/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  tar --numeric-owner --owner=0 --group=0 -C "$root" -cf "$out" .
}

cmd=${1:-}
case $cmd in
tar)
  [ $# -eq 2 ] || die "usage: $0 tar FILE"
  rootfs_tar "$2"
  ;;
podman | docker)
  tag=${2:-$tag_default}
  tarball=$(mktemp /tmp/tunnelgate-rootfs.XXXXXX.tar)
  trap 'rm -f "$tarball"' EXIT
  rootfs_tar "$tarball"
  if [ "$cmd" = podman ]; then
    command -v podman >/dev/null || die "podman is not installed (Scripts/setup.sh installs it)"
    podman import --quiet --change 'CMD=/bin/sh' "$tarball" "$tag"
  else
    # The Debian package's client (another docker may be earlier on PATH).
    docker=/usr/bin/docker
    [ -x "$docker" ] || die "$docker is missing (Debian package docker.io; Scripts/setup.sh installs it)"
    "$docker" import --change 'CMD ["/bin/sh"]' "$tarball" "$tag"
  fi
  ;;
*)
  die "usage: $0 tar FILE | podman [TAG] | docker [TAG]"
  ;;
esac
