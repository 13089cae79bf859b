// What the CNI plugin (Sources/CNI) needs of the kernel beyond the lab's namespace calls: giving an
// existing network namespace, reached by a path, a name under /run/netns.
#ifndef CTUNNELGATE_SHIMS_CNI_H
#define CTUNNELGATE_SHIMS_CNI_H

/// The kind of namespace the descriptor `fd` refers to (ioctl NS_GET_NSTYPE): CLONE_NEWNET for a
/// network namespace; -1 with errno set (ENOTTY: not a namespace file at all).
int CTunnelgateShims_namespace_type(int fd);

/// CLONE_NEWNET, which Swift cannot import from <sched.h> without _GNU_SOURCE.
int CTunnelgateShims_clone_newnet(void);

/// Bind-mounts the namespace open at `fd` onto `path`, which is created first (exclusively, mode 0):
/// what `ip netns attach NAME PID` does with /proc/PID/ns/net. The bound file is /proc/self/fd/FD, so
/// the namespace bound is the one checked through `fd`. On failure `path` is removed; -1 with errno set.
int CTunnelgateShims_namespace_bind(int fd, const char *path);

#endif
