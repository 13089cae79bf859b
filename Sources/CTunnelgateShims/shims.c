#define _GNU_SOURCE
#include "CTunnelgateShims.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <netinet/udp.h>
#include <sys/ioctl.h>
#include <net/if.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <linux/rtnetlink.h>

_Static_assert(IFNAMSIZ == 16, "IFNAMSIZ is 16 on Linux");

// The netlink socket options LinuxSystem's NetlinkOption names by number.
_Static_assert(NETLINK_CAP_ACK == 10 && NETLINK_EXT_ACK == 11 && NETLINK_GET_STRICT_CHK == 12, "NetlinkOption");

// The layout and constants the WireGuard device's Swift (VirtioNetHeader) assumes.
_Static_assert(sizeof(struct virtio_net_hdr) == 10, "struct virtio_net_hdr is 10 bytes");
_Static_assert(offsetof(struct virtio_net_hdr, gso_type) == 1, "gso_type at 1");
_Static_assert(offsetof(struct virtio_net_hdr, hdr_len) == 2, "hdr_len at 2");
_Static_assert(offsetof(struct virtio_net_hdr, gso_size) == 4, "gso_size at 4");
_Static_assert(offsetof(struct virtio_net_hdr, csum_start) == 6, "csum_start at 6");
_Static_assert(offsetof(struct virtio_net_hdr, csum_offset) == 8, "csum_offset at 8");
_Static_assert(VIRTIO_NET_HDR_F_NEEDS_CSUM == 1 && VIRTIO_NET_HDR_F_DATA_VALID == 2, "virtio_net_hdr flags");
_Static_assert(VIRTIO_NET_HDR_GSO_NONE == 0 && VIRTIO_NET_HDR_GSO_TCPV4 == 1 && VIRTIO_NET_HDR_GSO_UDP == 3
               && VIRTIO_NET_HDR_GSO_TCPV6 == 4 && VIRTIO_NET_HDR_GSO_ECN == 0x80,
               "virtio_net_hdr GSO types");
#ifdef VIRTIO_NET_HDR_GSO_UDP_L4 // linux/virtio_net.h of Linux 6.2 and later
_Static_assert(VIRTIO_NET_HDR_GSO_UDP_L4 == 5, "virtio_net_hdr GSO type UDP_L4");
#endif

static int tun_attach(const char *name, char *actual_name, int nonblocking, short flags, unsigned offloads) {
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0));
    if (fd < 0) return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    ifr.ifr_flags = flags;
    if (name != NULL) strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
    int header_size = (int)sizeof(struct virtio_net_hdr);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0
        || ((flags & IFF_VNET_HDR) && (ioctl(fd, TUNSETVNETHDRSZ, &header_size) < 0
                                       || ioctl(fd, TUNSETOFFLOAD, offloads) < 0))) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    if (actual_name != NULL) {
        memcpy(actual_name, ifr.ifr_name, IFNAMSIZ);
        actual_name[IFNAMSIZ - 1] = '\0';
    }
    return fd;
}

int CTunnelgateShims_tun_open(const char *name, char *actual_name, int nonblocking, int offloads) {
    if (offloads) {
        int fd = tun_attach(name, actual_name, nonblocking, IFF_TUN | IFF_NO_PI | IFF_VNET_HDR,
                            TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6);
        if (fd >= 0) return fd;
        // Refused (an old or emulated kernel): the interface, not persistent, went with the descriptor.
    }
    return tun_attach(name, actual_name, nonblocking, IFF_TUN | IFF_NO_PI, 0);
}

int CTunnelgateShims_tun_flags(int fd) {
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    if (ioctl(fd, TUNGETIFF, &ifr) < 0) return -1;
    return (unsigned short)ifr.ifr_flags;
}

int CTunnelgateShims_iff_vnet_hdr(void) { return IFF_VNET_HDR; }

int CTunnelgateShims_ifnamsiz(void) { return IFNAMSIZ; }

uint32_t CTunnelgateShims_rt_table_main(void) { return RT_TABLE_MAIN; }

int CTunnelgateShims_flock(int fd, int operation) { return flock(fd, operation); }

int CTunnelgateShims_termination_signalfd(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int CTunnelgateShims_signalfd_read(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof(info));
    if (n != (ssize_t)sizeof(info)) return 0;
    return (int)info.ssi_signo;
}

int CTunnelgateShims_unshare_network(void) { return unshare(CLONE_NEWNET); }

int CTunnelgateShims_setns_network(int fd) { return setns(fd, CLONE_NEWNET); }

int CTunnelgateShims_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred cred;
    socklen_t length = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

int CTunnelgateShims_usable_processors(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int count = CPU_COUNT(&set);
    return count > 0 ? count : 1;
}

int CTunnelgateShims_accept_cloexec(int fd) { return accept4(fd, NULL, NULL, SOCK_CLOEXEC); }

int CTunnelgateShims_poll_nanoseconds(struct pollfd *fds, unsigned long count, long long timeout_ns) {
    if (timeout_ns < 0) return ppoll(fds, count, NULL, NULL);
    struct timespec ts = { .tv_sec = timeout_ns / 1000000000LL, .tv_nsec = timeout_ns % 1000000000LL };
    return ppoll(fds, count, &ts, NULL);
}

enum { batch_limit = 128 };

int CTunnelgateShims_receive_batch(int fd, void *buffers, size_t slot_size, unsigned count, size_t *lengths,
                                   void *addresses, size_t address_size, uint16_t *segment_sizes) {
    struct mmsghdr messages[batch_limit];
    struct iovec vectors[batch_limit];
    union { char bytes[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } controls[batch_limit];
    if (count > batch_limit) count = batch_limit;
    for (unsigned i = 0; i < count; i++) {
        vectors[i].iov_base = (char *)buffers + (size_t)i * slot_size;
        vectors[i].iov_len = slot_size;
        memset(&messages[i], 0, sizeof messages[i]);
        messages[i].msg_hdr.msg_iov = &vectors[i];
        messages[i].msg_hdr.msg_iovlen = 1;
        messages[i].msg_hdr.msg_name = (char *)addresses + (size_t)i * address_size;
        messages[i].msg_hdr.msg_namelen = (socklen_t)address_size;
        if (segment_sizes != NULL) {
            messages[i].msg_hdr.msg_control = controls[i].bytes;
            messages[i].msg_hdr.msg_controllen = sizeof controls[i].bytes;
        }
    }
    int n;
    do {
        n = recvmmsg(fd, messages, count, MSG_DONTWAIT, NULL);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
    for (int i = 0; i < n; i++) {
        lengths[i] = messages[i].msg_len;
        if (segment_sizes == NULL) continue;
        // With UDP_GRO, a run of one sender's datagrams arrives as one, cut every gso_size bytes.
        segment_sizes[i] = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&messages[i].msg_hdr); c != NULL; c = CMSG_NXTHDR(&messages[i].msg_hdr, c)) {
            if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
                int size;
                memcpy(&size, CMSG_DATA(c), sizeof size);
                if (size > 0 && size <= 0xFFFF) segment_sizes[i] = (uint16_t)size;
            }
        }
    }
    return n;
}

// UDP_MAX_SEGMENTS of the kernels that allow the fewest, and a total under the 65,507-byte UDP payload of IPv4.
enum { segment_limit = 64, segmented_length_limit = 65000 };

static int segmentation_refused(int error) {
    return error == EIO || error == EINVAL || error == ENOPROTOOPT || error == EOPNOTSUPP;
}

int CTunnelgateShims_send_batch(int fd, const void *buffers, size_t slot_size, const size_t *lengths, unsigned count,
                                const void *addresses, size_t address_size, const unsigned *addresslengths,
                                int *segmentation, unsigned *segmented_sends) {
    struct mmsghdr messages[batch_limit];
    struct iovec vectors[batch_limit];
    unsigned first[batch_limit], runs[batch_limit];
    union { char bytes[CMSG_SPACE(sizeof(uint16_t))]; struct cmsghdr align; } controls[batch_limit];
    if (count > batch_limit) count = batch_limit;
    for (unsigned i = 0; i < count; i++) {
        vectors[i].iov_base = (char *)buffers + (size_t)i * slot_size;
        vectors[i].iov_len = lengths[i];
    }
    // A run of datagrams to one address, all of one length but the last (which may be shorter),
    // becomes one message: its slots as the iovecs, and UDP_SEGMENT to cut them apart again.
    unsigned m = 0;
    for (unsigned i = 0; i < count; m++) {
        const char *address = (const char *)addresses + (size_t)i * address_size;
        unsigned j = i + 1;
        size_t total = lengths[i];
        while (*segmentation && j < count && j - i < segment_limit && lengths[j - 1] == lengths[i]
               && lengths[j] <= lengths[i] && total + lengths[j] <= segmented_length_limit
               && addresslengths[j] == addresslengths[i]
               && memcmp((const char *)addresses + (size_t)j * address_size, address, addresslengths[i]) == 0) {
            total += lengths[j];
            j++;
        }
        memset(&messages[m], 0, sizeof messages[m]);
        messages[m].msg_hdr.msg_iov = &vectors[i];
        messages[m].msg_hdr.msg_iovlen = j - i;
        messages[m].msg_hdr.msg_name = (void *)address;
        messages[m].msg_hdr.msg_namelen = addresslengths[i];
        if (j - i > 1) {
            memset(&controls[m], 0, sizeof controls[m]);
            messages[m].msg_hdr.msg_control = controls[m].bytes;
            messages[m].msg_hdr.msg_controllen = sizeof controls[m].bytes;
            struct cmsghdr *header = CMSG_FIRSTHDR(&messages[m].msg_hdr);
            header->cmsg_level = SOL_UDP;
            header->cmsg_type = UDP_SEGMENT;
            header->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t size = (uint16_t)lengths[i];
            memcpy(CMSG_DATA(header), &size, sizeof size);
        }
        first[m] = i;
        runs[m] = j - i;
        i = j;
    }
    // A message that fails (one unreachable destination) is skipped; the rest still go. A run the
    // kernel cannot segment (an old kernel, a path MTU below the datagrams) goes one datagram at a
    // time, and *segmentation is cleared so that later batches do not try again.
    unsigned next = 0, sent = 0;
    int last_error = 0;
    while (next < m) {
        int n = sendmmsg(fd, messages + next, m - next, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            last_error = errno;
            if (runs[next] > 1 && segmentation_refused(errno)) {
                *segmentation = 0;
                for (unsigned k = first[next]; k < first[next] + runs[next]; k++) {
                    ssize_t one;
                    do {
                        one = sendto(fd, vectors[k].iov_base, vectors[k].iov_len, 0,
                                     (const struct sockaddr *)messages[next].msg_hdr.msg_name, messages[next].msg_hdr.msg_namelen);
                    } while (one < 0 && errno == EINTR);
                    if (one >= 0) sent++;
                }
            }
            next += 1;
            continue;
        }
        if (n == 0) break;
        for (unsigned k = next; k < next + (unsigned)n; k++) {
            sent += runs[k];
            if (runs[k] > 1) *segmented_sends += 1;
        }
        next += (unsigned)n;
    }
    if (sent == 0 && last_error != 0) {
        errno = last_error;
        return -1;
    }
    return (int)sent;
}


// --- Secrets -------------------------------------------------------------------------------------------

void CTunnelgateShims_wipe(void *pointer, size_t length) {
    if (pointer != NULL && length > 0) explicit_bzero(pointer, length);
}

int CTunnelgateShims_set_not_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int CTunnelgateShims_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

int CTunnelgateShims_disable_core_dumps(void) {
    struct rlimit none = {0, 0};
    return setrlimit(RLIMIT_CORE, &none);
}

int CTunnelgateShims_memlock_limit(uint64_t *bytes) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return -1;
    *bytes = limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)limit.rlim_cur;
    return 0;
}

int CTunnelgateShims_madv_dontdump(void) { return MADV_DONTDUMP; }

int CTunnelgateShims_madv_wipeonfork(void) {
#ifdef MADV_WIPEONFORK
    return MADV_WIPEONFORK;
#else
    return 18;  // Linux 4.14's value, for older headers
#endif
}

int CTunnelgateShims_memfd_create(const char *name) { return memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING); }

int CTunnelgateShims_all_seals(void) { return F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL; }

int CTunnelgateShims_seal_memfd(int fd) { return fcntl(fd, F_ADD_SEALS, CTunnelgateShims_all_seals()); }

int CTunnelgateShims_memfd_seals(int fd) { return fcntl(fd, F_GET_SEALS); }

// --- TrustedFile --------------------------------------------------------------------------------------

int CTunnelgateShims_o_path(void) { return O_PATH; }

int CTunnelgateShims_openat(int dirfd, const char *name, int flags, mode_t mode) { return openat(dirfd, name, flags, mode); }

long CTunnelgateShims_readlink_fd(int fd, char *buffer, size_t size) { return (long)readlinkat(fd, "", buffer, size); }

extern char **environ;

int CTunnelgateShims_execute_descriptor(int fd, char *const argv[]) {
    return (int)syscall(SYS_execveat, fd, "", argv, environ, AT_EMPTY_PATH);
}
