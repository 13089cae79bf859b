// The packet plane's sandboxed start and the engine-plane channel (CTunnelgateShimsPlane.h).
#define _GNU_SOURCE
#include "CTunnelgateShimsPlane.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <pthread.h>

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

// What the child reports when a step fails: the step (an index into step_names) and its errno.
struct plane_failure { int step; int error; };

static const char *const step_names[] = {
    "prctl(PR_SET_PDEATHSIG)", "dup2 of the standard descriptors", "close_range",
    "unshare(CLONE_NEWNS)", "mount(/, MS_REC | MS_PRIVATE)", "mount(tmpfs) over a hidden directory",
    "mount_setattr(/, AT_RECURSIVE, MOUNT_ATTR_RDONLY)", "mount(tmpfs) on the writable directory",
    "setgroups(0)", "setresgid", "prctl(PR_CAPBSET_DROP)", "prctl(PR_SET_SECUREBITS)", "setresuid",
    "prctl(PR_CAP_AMBIENT_CLEAR_ALL)", "prctl(PR_SET_NO_NEW_PRIVS)", "execveat", "the engine is gone",
    "mount(the test directory, MS_BIND)",
};

static void child_fail(int report, int step) {
    struct plane_failure f = { step, errno };
    ssize_t ignored = write(report, &f, sizeof f);
    (void)ignored;
    _exit(127);
}

// Runs in the forked child of a multithreaded process: only async-signal-safe calls until execveat.
static void plane_child(const struct CTunnelgateShims_plane_spawn *spec, int report, pid_t parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(report, 0);
    if (getppid() != parent) { errno = ESRCH; child_fail(report, 16); }

    // Descriptors: 0 /dev/null, 1 and 2 the log, 3 the channel, 4 the report pipe (close-on-exec), the
    // executable at 5 (close-on-exec); nothing else.
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0) child_fail(report, 1);
    int log_fd = spec->log_fd >= 0 ? spec->log_fd : null_fd;
    // Move everything we need above the low numbers first, so no dup2 overwrites another.
    int channel = fcntl(spec->channel_fd, F_DUPFD_CLOEXEC, 10);
    int log_high = fcntl(log_fd, F_DUPFD_CLOEXEC, 10);
    int report_high = fcntl(report, F_DUPFD_CLOEXEC, 10);
    int exe_high = fcntl(spec->executable_fd, F_DUPFD_CLOEXEC, 10);
    int null_high = fcntl(null_fd, F_DUPFD_CLOEXEC, 10);
    if (channel < 0 || log_high < 0 || report_high < 0 || exe_high < 0 || null_high < 0) child_fail(report, 1);
    report = report_high;
    if (dup2(null_high, 0) < 0 || dup2(log_high, 1) < 0 || dup2(log_high, 2) < 0 || dup2(channel, 3) < 0
        || dup3(report_high, 4, O_CLOEXEC) < 0 || dup3(exe_high, 5, O_CLOEXEC) < 0) {
        child_fail(report, 1);
    }
    report = 4;
    if (syscall(SYS_close_range, 6, ~0U, 0) != 0) child_fail(report, 2);

    // A mount namespace where everything is read-only and the engine's files are not there at all
    // (skipped only when the engine was told to do without one: a container without CAP_SYS_ADMIN).
    if (!spec->mount_namespace && spec->test_directory && spec->test_directory_fd >= 0) {
        errno = EINVAL;
        child_fail(report, 17);
    }
    if (spec->mount_namespace) {
        if (unshare(CLONE_NEWNS) != 0) child_fail(report, 3);
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) child_fail(report, 4);
        // The test directory, named in this namespace (a bind mount's source must be one of its mounts)
        // before anything covers it.
        if (spec->test_directory && spec->test_directory_fd >= 0) {
            int t = open(spec->test_directory, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (t < 0) child_fail(report, 17);
            if (t != 6) {
                if (dup3(t, 6, O_CLOEXEC) < 0) child_fail(report, 17);
                close(t);
            }
        }
        for (const char *const *dir = spec->hidden; dir && *dir; dir++) {
            struct stat st;
            if (stat(*dir, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
            if (mount("tmpfs", *dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=16k") != 0) child_fail(report, 5);
        }
        struct mount_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.attr_set = MOUNT_ATTR_RDONLY;
        if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &attr, sizeof attr) != 0) child_fail(report, 6);
        if (spec->writable) {
            char options[64];
            // Built without snprintf (not async-signal-safe): "mode=0700,size=16m,uid=U,gid=G".
            char digits[2][12];
            unsigned long ids[2] = { (unsigned long)spec->uid, (unsigned long)spec->gid };
            for (int k = 0; k < 2; k++) {
                char tmp[12]; int n = 0; unsigned long v = ids[k];
                do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v && n < 11);
                for (int j = 0; j < n; j++) digits[k][j] = tmp[n - 1 - j];
                digits[k][n] = 0;
            }
            const char *parts[] = { "mode=0700,size=16m,uid=", digits[0], ",gid=", digits[1] };
            size_t at = 0;
            for (int k = 0; k < 4; k++) for (const char *c = parts[k]; *c && at + 1 < sizeof options; c++) options[at++] = *c;
            options[at] = 0;
            if (mount("tmpfs", spec->writable, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options) != 0) child_fail(report, 7);
        }
        if (spec->test_directory && spec->test_directory_fd >= 0) {
            // The mount point is made in the writable tmpfs when it lies there (the usual /tmp/...).
            char path[4096];
            size_t n = 0;
            for (const char *c = spec->test_directory; *c && n + 1 < sizeof path; c++) {
                path[n++] = *c;
                if (*c == '/' && n > 1) { path[n - 1] = 0; mkdir(path, 0755); path[n - 1] = '/'; }
            }
            path[n] = 0;
            mkdir(path, 0755);
            char source[32];
            const char *prefix = "/proc/self/fd/";
            size_t k = 0;
            for (const char *c = prefix; *c; c++) source[k++] = *c;
            char digits[12]; int d = 0; int v = 6;  // the test directory is descriptor 6 by then
            do { digits[d++] = (char)('0' + v % 10); v /= 10; } while (v);
            while (d) source[k++] = digits[--d];
            source[k] = 0;
            if (mount(source, spec->test_directory, NULL, MS_BIND, NULL) != 0) child_fail(report, 17);
            close(6);
            // A bind of a read-only mount is read-only: this one is the plane's to write in.
            struct mount_attr rw;
            memset(&rw, 0, sizeof rw);
            rw.attr_clr = MOUNT_ATTR_RDONLY;
            if (syscall(SYS_mount_setattr, AT_FDCWD, spec->test_directory, 0, &rw, sizeof rw) != 0) child_fail(report, 17);
        }
    }

    // The user, and no way back to privileges.
    if (setgroups(0, NULL) != 0) child_fail(report, 8);
    if (setresgid(spec->gid, spec->gid, spec->gid) != 0) child_fail(report, 9);
    for (int cap = 0; cap <= 63; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap) != 0 && errno != EINVAL) child_fail(report, 10);
    }
    if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP
              | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE
              | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) != 0) {
        child_fail(report, 11);
    }
    if (setresuid(spec->uid, spec->uid, spec->uid) != 0) child_fail(report, 12);
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) child_fail(report, 13);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fail(report, 14);

    char *const empty_environment[] = { NULL };
    syscall(SYS_execveat, 5, "", spec->argv, spec->environment ? spec->environment : empty_environment, AT_EMPTY_PATH);
    child_fail(report, 15);
}

int CTunnelgateShims_spawn_plane(const struct CTunnelgateShims_plane_spawn *spec, pid_t *pid,
                                 const char **failed_step) {
    *failed_step = NULL;
    if (spec->uid == 0 || spec->gid == 0) return EPERM;
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return errno;
    pid_t parent = getpid();
    // Signals blocked across fork, so no handler of the parent runs in the child (execve keeps the mask,
    // so the child unblocks everything itself before it runs the plane).
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t child = fork();
    if (child == 0) {
        close(pipe_fds[0]);
        sigset_t none;
        sigemptyset(&none);
        // Default dispositions for what the parent catches, then nothing blocked.
        for (int s = 1; s < NSIG; s++) if (s != SIGKILL && s != SIGSTOP) signal(s, SIG_DFL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        plane_child(spec, pipe_fds[1], parent);
        _exit(127);
    }
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(pipe_fds[1]);
    if (child < 0) { close(pipe_fds[0]); return fork_errno; }
    struct plane_failure f;
    ssize_t n;
    do { n = read(pipe_fds[0], &f, sizeof f); } while (n < 0 && errno == EINTR);
    close(pipe_fds[0]);
    if (n == (ssize_t)sizeof f) {
        // The child failed before execveat and exits: reap it.
        int status;
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
        if (f.step >= 0 && f.step < (int)(sizeof step_names / sizeof step_names[0])) *failed_step = step_names[f.step];
        return f.error ? f.error : EIO;
    }
    *pid = child;
    return 0;
}

int CTunnelgateShims_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

int CTunnelgateShims_channel_pair(int fds[2]) { return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds); }

ssize_t CTunnelgateShims_send_with_fds(int socket, const void *bytes, size_t length, const int *fds, int count) {
    struct iovec iov = { .iov_base = (void *)bytes, .iov_len = length };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    union { char buffer[CMSG_SPACE(sizeof(int) * 16)]; struct cmsghdr align; } control;
    if (count > 16) { errno = EINVAL; return -1; }
    if (count > 0) {
        memset(&control, 0, sizeof control);
        msg.msg_control = control.buffer;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)count);
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)count);
        memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * (size_t)count);
    }
    ssize_t n;
    do { n = sendmsg(socket, &msg, MSG_NOSIGNAL); } while (n < 0 && errno == EINTR);
    return n;
}

ssize_t CTunnelgateShims_receive_with_fds(int socket, void *buffer, size_t capacity, int *fds, int capacity_fds,
                                          int *received_fds, int *truncated) {
    struct iovec iov = { .iov_base = buffer, .iov_len = capacity };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    union { char buffer[CMSG_SPACE(sizeof(int) * 16)]; struct cmsghdr align; } control;
    memset(&control, 0, sizeof control);
    msg.msg_control = control.buffer;
    msg.msg_controllen = sizeof control.buffer;
    *received_fds = 0;
    *truncated = 0;
    ssize_t n;
    do { n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT); } while (n < 0 && errno == EINTR);
    if (n < 0) return n;
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
        int count = (int)((cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int *arrived = (int *)CMSG_DATA(cmsg);
        for (int i = 0; i < count; i++) {
            if (*received_fds < capacity_fds) fds[(*received_fds)++] = arrived[i];
            else { close(arrived[i]); *truncated = 1; }
        }
    }
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) *truncated = 1;
    return n;
}


int CTunnelgateShims_keep_capabilities(uint64_t keep) {
    struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    // Only what the process has can be kept: one started without a capability (capsh --drop) goes on
    // without it, and whatever needs it fails there with its own error.
    if (syscall(SYS_capget, &header, data) != 0) return -1;
    keep &= ((uint64_t)data[1].permitted << 32) | data[0].permitted;
    for (int cap = 0; cap <= 63; cap++) {
        if (keep & (1ULL << cap)) continue;
        if (prctl(PR_CAPBSET_DROP, cap) != 0 && errno != EINVAL) return -1;
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) return -1;
    memset(data, 0, sizeof data);
    data[0].effective = data[0].permitted = (uint32_t)(keep & 0xffffffffu);
    data[1].effective = data[1].permitted = (uint32_t)(keep >> 32);
    return (int)syscall(SYS_capset, &header, data);
}

pid_t CTunnelgateShims_gettid(void) { return (pid_t)syscall(SYS_gettid); }
