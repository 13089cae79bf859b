// The packet plane's process: started by the engine into a sandbox, and the channel between the two.
#ifndef CTUNNELGATE_SHIMS_PLANE_H
#define CTUNNELGATE_SHIMS_PLANE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/// How the engine starts a packet plane (CTunnelgateShims_spawn_plane).
struct CTunnelgateShims_plane_spawn {
    /// The executable, opened by the engine (O_RDONLY | O_CLOEXEC): run with execveat(AT_EMPTY_PATH),
    /// so the file checked is the file run, whatever happens to its path.
    int executable_fd;
    /// The plane's end of the control channel: descriptor 3 in the plane. Nothing else is inherited.
    int channel_fd;
    /// The plane's standard output and error (the tunnel's log), or -1 for /dev/null.
    int log_fd;
    /// The unprivileged user and group the plane runs as (never 0).
    uid_t uid;
    gid_t gid;
    /// argv, NULL-terminated. The environment is empty.
    char *const *argv;
    /// Directories hidden behind an empty, read-only tmpfs in the plane's mount namespace (NULL-terminated;
    /// those that do not exist are skipped): the engine's state, configurations, keys.
    const char *const *hidden;
    /// The plane's own writable directory: a private tmpfs (mode 0700, owned by uid) mounted here after
    /// everything else was made read-only. NULL for none.
    const char *writable;
    /// The environment, NULL-terminated (empty but for test hooks the engine was told to pass on).
    char *const *environment;
    /// Tests only: a directory of the host (opened O_PATH before the sandbox is made, or -1) bind-mounted
    /// read-write at `test_directory` inside the plane, so test fixtures can leave files there.
    int test_directory_fd;
    const char *test_directory;
    /// 1: the mount namespace above (hidden, writable, test_directory). 0: none (the engine lacks
    /// CAP_SYS_ADMIN, in a container, and was told to go on without it): the plane sees the file system
    /// as the engine does, limited by its own uid's permissions; hidden and writable are ignored and a
    /// test directory is refused.
    int mount_namespace;
};

/// Forks the packet plane: in the child, before the executable runs, a new mount namespace in which
/// every mount is read-only (mount_setattr AT_RECURSIVE), `hidden` are empty and `writable` is the only
/// writable place; stdin /dev/null, stdout/stderr the log, the channel as 3 and no other descriptor;
/// PR_SET_PDEATHSIG(SIGKILL) (the plane dies with the engine); no supplementary groups, the given gid
/// and uid (real, effective, saved), an empty capability bounding set and no ambient capabilities,
/// securebits locked (no root privileges regained), PR_SET_NO_NEW_PRIVS. Then execveat.
/// Returns 0 and the pid, or an errno value: the errno of the first step that failed in the child
/// (reported through a close-on-exec pipe), with *failed_step naming it.
int CTunnelgateShims_spawn_plane(const struct CTunnelgateShims_plane_spawn *spec, pid_t *pid,
                                 const char **failed_step);

/// pidfd_open(2): a descriptor that becomes readable when `pid` exits. -1 with errno set.
int CTunnelgateShims_pidfd_open(pid_t pid);

/// gettid(2): the calling thread's id.
pid_t CTunnelgateShims_gettid(void);

/// socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC): fds[0] the engine's, fds[1] the plane's.
int CTunnelgateShims_channel_pair(int fds[2]);

/// sendmsg of one datagram with up to `count` descriptors as SCM_RIGHTS (MSG_NOSIGNAL). Returns bytes
/// sent, or -1 with errno set.
ssize_t CTunnelgateShims_send_with_fds(int socket, const void *bytes, size_t length, const int *fds, int count);

/// recvmsg of one datagram (MSG_CMSG_CLOEXEC) with up to `capacity` descriptors. Returns its length
/// (0: the peer closed), or -1 with errno set. *truncated is set when the datagram or its descriptors
/// did not fit (MSG_TRUNC / MSG_CTRUNC; the descriptors that arrived are returned anyway, to be closed).
ssize_t CTunnelgateShims_receive_with_fds(int socket, void *buffer, size_t capacity, int *fds, int capacity_fds,
                                          int *received_fds, int *truncated);

/// Keeps only the capabilities in `keep` (a bit per CAP_*): every other one leaves the bounding set, and
/// the effective and permitted sets become `keep` (inheritable and ambient empty). 0, or -1 with errno.
int CTunnelgateShims_keep_capabilities(uint64_t keep);

#endif
