// The namespace and mount calls the lab (Sources/Lab) needs: named network namespaces as
// `ip netns add/del` make them, and the mount namespace `ip netns exec` gives a command.
#ifndef CTUNNELGATE_SHIMS_LAB_H
#define CTUNNELGATE_SHIMS_LAB_H

/// Makes `directory` (/run/netns) a shared mount point, bind-mounting it onto itself first when it
/// is not a mount point yet, so that namespaces bound under it are seen from every mount namespace.
/// 0, or -1 with errno set.
int CTunnelgateShims_netns_prepare_directory(const char *directory);

/// Creates `path` (exclusively, mode 0), moves the calling thread into a new network namespace
/// (unshare(CLONE_NEWNET)) and bind-mounts /proc/thread-self/ns/net onto `path`, which then names
/// the namespace for as long as the bind mount lasts. Call it on a thread made for it: the thread
/// stays in the new namespace. On failure the file is removed; -1 with errno set.
int CTunnelgateShims_netns_create(const char *path);

/// Detaches the bind mount at `path` (umount2 MNT_DETACH) and removes the file. The namespace
/// ends when nothing else holds it. 0, or -1 with errno set (ENOENT when `path` is absent).
int CTunnelgateShims_netns_remove(const char *path);

/// What `ip netns exec NAME` does to the mount namespace before it runs a command: a private mount
/// namespace (unshare(CLONE_NEWNS), / made a recursive slave), /sys remounted for the calling
/// thread's network namespace, and each file in /etc/netns/NAME bind-mounted over the same name in
/// /etc. 0, or -1 with errno set; `failed_step` (64 bytes) names the call that failed.
int CTunnelgateShims_netns_exec_mounts(const char *name, char *failed_step);

/// execvp(3): returns only on failure, -1 with errno set.
int CTunnelgateShims_execvp(const char *file, char *const argv[]);

/// getppid(2).
int CTunnelgateShims_parent_pid(void);

#endif
