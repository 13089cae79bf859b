// The packet plane's seccomp allow-list. What a packet runtime needs: memory, threads (clone with
// CLONE_THREAD only), time, polling, reading and writing the descriptors it holds (the TUN, sockets,
// its channel), UDP/TCP/Unix sockets of its own (no netlink, no packet or raw sockets), files (the
// file system is read-only but for its own tmpfs), signals to itself. Not: ptrace, process_vm_*,
// mount and namespaces, modules, bpf, perf, keyrings, io_uring, exec, fork, uid or capability changes,
// clock or host changes. Anything else fails with EPERM.
#define _GNU_SOURCE
#include "CPlaneSeccomp.h"

#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <linux/if_tun.h>
#include <linux/sockios.h>
#include <termios.h>

static const char *const allowed[] = {
    // memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mlock", "mlock2", "munlock", "mlockall",
    "munlockall", "msync", "mincore", "membarrier",
    // threads and scheduling (clone is filtered below)
    "futex", "futex_waitv", "set_robust_list", "get_robust_list", "set_tid_address", "rseq", "gettid",
    "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_getscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "getpriority", "setpriority", "arch_prctl",
    // exit
    "exit", "exit_group", "restart_syscall",
    // identity (reading only)
    "getpid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
    "getpgid", "getpgrp", "getsid", "capget", "uname", "sysinfo", "getrusage", "getrlimit", "prlimit64",
    "getcpu", "times",
    // time
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    "timer_create", "timer_settime", "timer_gettime", "timer_delete", "timer_getoverrun",
    "timerfd_create", "timerfd_settime", "timerfd_gettime", "alarm", "setitimer", "getitimer",
    // signals (kill and tgkill are filtered below)
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait", "rt_sigsuspend",
    "sigaltstack", "signalfd4", "pause",
    // descriptors
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
    "close", "close_range", "dup", "dup2", "dup3", "fcntl", "lseek", "pipe", "pipe2", "eventfd2",
    "poll", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
    "epoll_pwait2", "splice", "tee", "sendfile", "copy_file_range", "flock", "fsync", "fdatasync",
    // files (the file system is read-only outside the plane's own tmpfs)
    "openat", "open", "openat2", "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
    "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents64", "getcwd", "chdir",
    "fchdir", "mkdir", "mkdirat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "ftruncate",
    "fallocate", "umask", "fchmod", "fadvise64", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
    "memfd_create",
    // sockets (socket itself is filtered below)
    "socketpair", "bind", "connect", "listen", "accept", "accept4", "getsockname", "getpeername",
    "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "setsockopt",
    "getsockopt",
    // randomness
    "getrandom",
};

int CPlaneSeccomp_allowed_count(void) { return (int)(sizeof allowed / sizeof allowed[0]); }
const char *CPlaneSeccomp_allowed_name(int index) { return allowed[index]; }

static int fail(char *error, size_t capacity, const char *step, int rc) {
    snprintf(error, capacity, "%s: %s", step, strerror(-rc));
    return rc;
}

int CPlaneSeccomp_install(int refusal, int own_pid, char *error, size_t capacity) {
    uint32_t deny = refusal == CPlaneSeccomp_refuse_log ? SCMP_ACT_LOG : SCMP_ACT_ERRNO(EPERM);
    scmp_filter_ctx ctx = seccomp_init(deny);
    if (!ctx) return fail(error, capacity, "seccomp_init", -ENOMEM);
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    if (rc < 0) { seccomp_release(ctx); return fail(error, capacity, "seccomp_attr_set(TSYNC)", rc); }

    for (int i = 0; i < CPlaneSeccomp_allowed_count(); i++) {
        int nr = seccomp_syscall_resolve_name(allowed[i]);
        if (nr == __NR_SCMP_ERROR) continue;  // not a call on this architecture
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
        if (rc < 0) { seccomp_release(ctx); return fail(error, capacity, allowed[i], rc); }
    }

    // Threads only: clone with CLONE_THREAD. clone3's flags are in memory, out of seccomp's reach: it
    // answers ENOSYS, and glibc falls back to clone.
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    if (rc < 0) { seccomp_release(ctx); return fail(error, capacity, "clone", rc); }

    // Signals to this process only.
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)own_pid));
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)own_pid));
    if (rc < 0) { seccomp_release(ctx); return fail(error, capacity, "kill", rc); }

    // Sockets: Unix, IPv4 and IPv6, stream, datagram and seqpacket. No netlink, packet or raw sockets.
    const int domains[] = { AF_UNIX, AF_INET, AF_INET6 };
    const int types[] = { SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET };
    for (int d = 0; d < 3 && rc == 0; d++) {
        for (int t = 0; t < 3 && rc == 0; t++) {
            rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)domains[d]),
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, (scmp_datum_t)types[t]));
        }
    }
    if (rc < 0) { seccomp_release(ctx); return fail(error, capacity, "socket", rc); }

    // ioctl: what reads a descriptor's state, and the TUN's own queries. Nothing that configures.
    const unsigned long requests[] = { FIONREAD, FIONBIO, FIOCLEX, FIONCLEX, TCGETS, TIOCGWINSZ, TUNGETIFF,
                                       TUNGETVNETHDRSZ, TUNGETFEATURES, SIOCGIFINDEX, SIOCGIFNAME, SIOCGIFMTU,
                                       SIOCGIFFLAGS, SIOCGSTAMP, SIOCGSTAMPNS };
    for (size_t r = 0; r < sizeof requests / sizeof requests[0] && rc == 0; r++) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)requests[r]));
    }
    if (rc < 0) { seccomp_release(ctx); return fail(error, capacity, "ioctl", rc); }

    // prctl: names and reads; PR_SET_DUMPABLE only to 0.
    const int options[] = { PR_SET_NAME, PR_GET_NAME, PR_GET_DUMPABLE, PR_GET_NO_NEW_PRIVS, PR_CAPBSET_READ,
                            PR_GET_SECUREBITS, PR_GET_PDEATHSIG, PR_SET_VMA, PR_GET_TIMERSLACK, PR_SET_TIMERSLACK };
    for (size_t o = 0; o < sizeof options / sizeof options[0] && rc == 0; o++) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)options[o]));
    }
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 2, SCMP_A0(SCMP_CMP_EQ, PR_SET_DUMPABLE), SCMP_A1(SCMP_CMP_EQ, 0));
    if (rc < 0) { seccomp_release(ctx); return fail(error, capacity, "prctl", rc); }

    rc = seccomp_load(ctx);
    seccomp_release(ctx);
    if (rc < 0) return fail(error, capacity, "seccomp_load", rc);
    return 0;
}
