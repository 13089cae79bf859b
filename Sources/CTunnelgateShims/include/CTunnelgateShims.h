// What Swift cannot import from the kernel and glibc headers: ioctl request
// macros, variadic calls and flock/setns wrappers with fixed signatures.
// Every function is prefixed with the target's name.
#ifndef CTUNNELGATE_SHIMS_H
#define CTUNNELGATE_SHIMS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/epoll.h>
#include "CTunnelgateShimsLab.h"
#include "CTunnelgateShimsPlane.h"
#include "CTunnelgateShimsCNI.h"

/// Opens /dev/net/tun and attaches an IFF_TUN | IFF_NO_PI interface named
/// `name` (created if absent). Returns the fd, or -1 with errno set.
/// `actual_name` (IFNAMSIZ bytes) receives the name the kernel used.
/// With `offloads`, asks for IFF_VNET_HDR too, TUNSETVNETHDRSZ(10) and
/// TUNSETOFFLOAD(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6): every read and write
/// then starts with a struct virtio_net_hdr. A kernel that refuses gets a
/// plain TUN instead; CTunnelgateShims_tun_flags tells which it is.
int CTunnelgateShims_tun_open(const char *name, char *actual_name, int nonblocking, int offloads);

/// The TUN's ifr_flags (TUNGETIFF), or -1 with errno set.
int CTunnelgateShims_tun_flags(int fd);

/// IFF_VNET_HDR.
int CTunnelgateShims_iff_vnet_hdr(void);

/// IFNAMSIZ, including the terminating NUL.
int CTunnelgateShims_ifnamsiz(void);

/// Linux netlink/fib constants that are enums or macros with casts.
uint32_t CTunnelgateShims_rt_table_main(void);

/// flock(2); Swift sees `flock` as the struct of the same name.
int CTunnelgateShims_flock(int fd, int operation);

/// Blocks SIGINT, SIGTERM and SIGHUP for the calling thread (and threads it
/// creates later) and returns a non-blocking signalfd that reports them.
int CTunnelgateShims_termination_signalfd(void);

/// Reads one pending signal from a signalfd: the signal number, 0 when none.
int CTunnelgateShims_signalfd_read(int fd);

/// unshare(CLONE_NEWNET): moves the calling thread into a new, empty
/// network namespace. 0, or -1 with errno set.
int CTunnelgateShims_unshare_network(void);

/// setns(fd, CLONE_NEWNET): moves the calling thread into the network
/// namespace `fd` refers to. 0, or -1 with errno set.
int CTunnelgateShims_setns_network(int fd);

/// SO_PEERCRED of a connected Unix socket (struct ucred needs _GNU_SOURCE).
int CTunnelgateShims_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/// How many CPUs the calling thread may run on (sched_getaffinity, CPU_COUNT); at least 1.
int CTunnelgateShims_usable_processors(void);

/// accept4(fd, NULL, NULL, SOCK_CLOEXEC).
int CTunnelgateShims_accept_cloexec(int fd);

/// execveat(fd, "", argv, environ, AT_EMPTY_PATH): this process becomes the program the descriptor
/// holds (opened and checked by the caller). Returns only on failure: -1 with errno.
int CTunnelgateShims_execute_descriptor(int fd, char *const argv[]);

struct pollfd;
/// ppoll(2) with a timeout in nanoseconds (negative: none): poll(2) only
/// knows milliseconds, too coarse for backpressure retries.
int CTunnelgateShims_poll_nanoseconds(struct pollfd *fds, unsigned long count, long long timeout_ns);

/// Receives up to `count` datagrams with one recvmmsg(MSG_DONTWAIT): datagram i lands at
/// buffers + i * slot_size (at most slot_size bytes), its length in lengths[i] and its source in
/// addresses + i * address_size (a struct sockaddr_storage each). With `segment_sizes` (not NULL),
/// segment_sizes[i] is the UDP_GRO segment size of datagram i (a run of datagrams the kernel merged,
/// on a socket with UDP_GRO set), 0 when it is one datagram. Returns how many arrived, 0 when none
/// was waiting, or -1 with errno.
int CTunnelgateShims_receive_batch(int fd, void *buffers, size_t slot_size, unsigned count, size_t *lengths,
                                   void *addresses, size_t address_size, uint16_t *segment_sizes);

/// Sends `count` datagrams with sendmmsg: datagram i is lengths[i] bytes at buffers + i * slot_size,
/// to the sockaddr at addresses + i * address_size of addresslengths[i] bytes. With *segmentation,
/// each run of datagrams to one address, of one length but the last (up to 64, 65,000 bytes), goes
/// as one message with UDP_SEGMENT (UDP GSO), counted in *segmented_sends; if the kernel refuses it,
/// that run is sent a datagram at a time and *segmentation cleared. Retries the rest after a partial
/// send and EINTR; returns how many datagrams were sent, or -1 with errno when none was.
int CTunnelgateShims_send_batch(int fd, const void *buffers, size_t slot_size, const size_t *lengths, unsigned count,
                                const void *addresses, size_t address_size, const unsigned *addresslengths,
                                int *segmentation, unsigned *segmented_sends);

// --- Secrets: memory that holds keys, and the process that holds them ---------------------------------

/// explicit_bzero(3): overwrites `length` bytes with zeros in a way the compiler may not drop as a
/// dead store (the memory is about to be unmapped or freed).
void CTunnelgateShims_wipe(void *pointer, size_t length);

/// prctl(PR_SET_DUMPABLE, 0): no core dump, and only a tracer with CAP_SYS_PTRACE may attach to or read
/// the process (/proc/PID/mem). 0, or -1 with errno set. Reset by execve: every process sets it itself.
int CTunnelgateShims_set_not_dumpable(void);

/// prctl(PR_GET_DUMPABLE): 0, 1 or 2, or -1 with errno set.
int CTunnelgateShims_dumpable(void);

/// setrlimit(RLIMIT_CORE, {0, 0}): no core file, and the process cannot raise the limit again.
/// 0, or -1 with errno set.
int CTunnelgateShims_disable_core_dumps(void);

/// getrlimit(RLIMIT_MEMLOCK)'s soft limit in bytes (RLIM_INFINITY as UINT64_MAX), or -1 with errno set
/// (then *bytes is untouched).
int CTunnelgateShims_memlock_limit(uint64_t *bytes);

/// MADV_DONTDUMP and MADV_WIPEONFORK (not in every libc's headers Swift sees).
int CTunnelgateShims_madv_dontdump(void);
int CTunnelgateShims_madv_wipeonfork(void);

/// memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING): an anonymous file only descriptors name.
/// The fd, or -1 with errno set.
int CTunnelgateShims_memfd_create(const char *name);

/// fcntl(F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL): the memfd's content
/// can no longer change. 0, or -1 with errno set.
int CTunnelgateShims_seal_memfd(int fd);

/// fcntl(F_GET_SEALS): the seals of a memfd (F_SEAL_* bits), or -1 with errno set.
int CTunnelgateShims_memfd_seals(int fd);

/// The F_SEAL_* bits of a fully sealed memfd (what CTunnelgateShims_seal_memfd adds).
int CTunnelgateShims_all_seals(void);

// --- Files opened one component at a time (TrustedFile) --------------------------------------------------

/// O_PATH: a descriptor that names a file without opening it for I/O (also a symbolic link, with
/// O_NOFOLLOW).
int CTunnelgateShims_o_path(void);

/// openat(2) (variadic in C): `mode` is used only with O_CREAT.
int CTunnelgateShims_openat(int dirfd, const char *name, int flags, mode_t mode);

/// readlinkat(fd, "", buffer, size) of an O_PATH | O_NOFOLLOW descriptor of a symbolic link: its
/// target as stored. The length, or -1 with errno set.
long CTunnelgateShims_readlink_fd(int fd, char *buffer, size_t size);

#endif
