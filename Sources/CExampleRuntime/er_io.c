/*
 * er_io.c — the example runtime's two threads.
 *
 *   sender:   input queue (callback path) or TUN fd (fd path) → seal → sendmmsg to the peer;
 *             a keepalive when nothing was sent for keepalive_ms.
 *   receiver: recvmmsg → open → writer(context, packet) (callback path) or write(TUN fd) (fd path);
 *             learns the peer from the last authenticated datagram.
 *
 * Each waits in poll on its descriptors plus stop_fd, so stop wakes it at once. Work happens in
 * batches of up to ER_BATCH datagrams per syscall; the only per-packet syscalls are the TUN fd's
 * read and write (a TUN descriptor has no batch interface) and the writer callback (the ABI's unit).
 */
#define _GNU_SOURCE
#include "er_runtime.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const er_counter_names[ER_C_COUNT] = {
    [ER_C_PACKETS_IN] = "packetsIn",
    [ER_C_PACKETS_OUT] = "packetsOut",
    [ER_C_BYTES_IN] = "bytesIn",
    [ER_C_BYTES_OUT] = "bytesOut",
    [ER_C_QUEUE_FULL] = "queueFull",
    [ER_C_BATCH_CALLS] = "batchCalls",
    [ER_C_BATCH_PACKETS] = "batchPackets",
    [ER_C_BATCH_DIRECT] = "batchDirect",
    [ER_C_DROPS_AUTH] = "dropsAuth",
    [ER_C_DROPS_MALFORMED] = "dropsMalformed",
    [ER_C_DROPS_WRITER] = "dropsWriter",
    [ER_C_DROPS_OVERSIZE] = "dropsOversize",
    [ER_C_DROPS_NO_PEER] = "dropsNoPeer",
    [ER_C_DROPS_SEND] = "dropsSend",
    [ER_C_DATAGRAMS_SENT] = "datagramsSent",
    [ER_C_DATAGRAMS_RECEIVED] = "datagramsReceived",
    [ER_C_KEEPALIVES_SENT] = "keepalivesSent",
    [ER_C_KEEPALIVES_RECEIVED] = "keepalivesReceived",
};

static size_t datagram_size(const er_runtime *rt) { return (size_t)rt->mtu + ER_WIRE_OVERHEAD; }

int er_io_allocate(er_runtime *rt) {
    rt->tx.out = malloc(ER_BATCH * datagram_size(rt));
    rt->rx.in = malloc(ER_BATCH * datagram_size(rt));
    rt->rx.plain = malloc(rt->mtu);
    if (rt->tun_fd >= 0) rt->tx.tun_in = malloc(ER_BATCH * ((size_t)rt->mtu + 1));
    if (rt->tx.out == NULL || rt->rx.in == NULL || rt->rx.plain == NULL || (rt->tun_fd >= 0 && rt->tx.tun_in == NULL))
        return -1;
    /* The receiver's message headers point at fixed buffers; only lengths and flags change per call. */
    for (size_t i = 0; i < ER_BATCH; i++) {
        rt->rx.iov[i].iov_base = rt->rx.in + i * datagram_size(rt);
        rt->rx.iov[i].iov_len = datagram_size(rt);
        rt->rx.msgs[i].msg_hdr.msg_iov = &rt->rx.iov[i];
        rt->rx.msgs[i].msg_hdr.msg_iovlen = 1;
        rt->rx.msgs[i].msg_hdr.msg_name = &rt->rx.sources[i];
        rt->rx.msgs[i].msg_hdr.msg_control = rt->rx.control[i].bytes;
        rt->tx.msgs[i].msg_hdr.msg_iov = &rt->tx.iov[i];
        rt->tx.msgs[i].msg_hdr.msg_iovlen = 1;
    }
    return 0;
}

void er_io_free(er_runtime *rt) {
    free(rt->tx.out);
    free(rt->tx.tun_in);
    free(rt->rx.in);
    free(rt->rx.plain);
    rt->tx.out = rt->tx.tun_in = rt->rx.in = rt->rx.plain = NULL;
}

static void signal_eventfd(int fd) {
    uint64_t one = 1;
    while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
}

void er_runtime_fail(er_runtime *rt, const char *message) {
    pthread_mutex_lock(&rt->fail_lock);
    int s = atomic_load(&rt->state);
    if (s == ER_STARTING || s == ER_RUNNING) {
        er_copy_message(rt->error, sizeof(rt->error), NULL, message);
        atomic_compare_exchange_strong(&rt->state, &s, ER_FAILED);
    }
    pthread_mutex_unlock(&rt->fail_lock);
    signal_eventfd(rt->stop_fd);
}

/* Fails the runtime with "what failed: strerror (errno)". */
static void fail_errno(er_runtime *rt, const char *what, int err) {
    char buf[200];
    er_text t;
    er_text_init(&t, buf, sizeof(buf));
    er_text_puts(&t, what);
    er_text_puts(&t, " failed: ");
    er_text_errno(&t, err);
    er_runtime_fail(rt, buf);
}

/* The second thread to come up makes the runtime ready (unless stop or a failure came first). */
static void thread_up(er_runtime *rt) {
    if (atomic_fetch_add(&rt->threads_up, 1) + 1 == 2) {
        int expected = ER_STARTING;
        atomic_compare_exchange_strong(&rt->state, &expected, ER_RUNNING);
    }
}

static bool peer_snapshot(er_runtime *rt, struct sockaddr_storage *peer, socklen_t *len) {
    pthread_mutex_lock(&rt->peer_lock);
    bool has = rt->has_peer;
    if (has) {
        *peer = rt->peer;
        *len = rt->peer_len;
    }
    pthread_mutex_unlock(&rt->peer_lock);
    return has;
}

static bool same_endpoint(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family) return false;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const struct sockaddr_in *)a, *y = (const struct sockaddr_in *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)a, *y = (const struct sockaddr_in6 *)b;
    return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
           memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
}

/* ---- sender ------------------------------------------------------------------------------------- */

/* Waits until the socket takes datagrams again; false when the runtime is halting instead. */
static bool wait_writable(er_runtime *rt) {
    struct pollfd fds[2] = {{.fd = rt->stop_fd, .events = POLLIN}, {.fd = rt->udp_fd, .events = POLLOUT}};
    for (;;) {
        int r = poll(fds, 2, -1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 || fds[0].revents != 0) return false;
        return true;
    }
}

/* Sends tx.msgs[0 .. n) to `peer`. A datagram the kernel refuses is counted and skipped. When the socket
 * is full the sender thread waits for room (wait); a caller's thread (!wait) never waits: it stops there.
 * Returns how many datagrams were dealt with (sent, or refused and counted): n unless it stopped. */
static uint32_t send_datagrams(er_runtime *rt, uint32_t n, struct sockaddr_storage *peer, socklen_t peer_len,
                               bool wait) {
    for (uint32_t i = 0; i < n; i++) {
        rt->tx.msgs[i].msg_hdr.msg_name = peer;
        rt->tx.msgs[i].msg_hdr.msg_namelen = peer_len;
    }
    atomic_store_explicit(&rt->last_tx_ms, er_now_ms(), memory_order_relaxed);
    uint32_t done = 0, sent = 0;
    while (done < n) {
        int r = sendmmsg(rt->udp_fd, &rt->tx.msgs[done], n - done, 0);
        if (r > 0) {
            done += (uint32_t)r;
            sent += (uint32_t)r;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else if (r < 0 && errno == EAGAIN) {
            if (!wait || !wait_writable(rt)) break;
        } else {
            /* The first datagram failed (EPERM from a firewall, ENETUNREACH, ...): drop it, go on. */
            er_count(rt, ER_C_DROPS_SEND, 1);
            done++;
        }
    }
    if (wait) er_count(rt, ER_C_DROPS_SEND, n - done); /* left unsent because the runtime is halting */
    er_count(rt, ER_C_DATAGRAMS_SENT, sent);
    return done;
}

/* Seals tx.packet/length[0 .. n) into data datagrams in tx.out, one getrandom for all their nonces. */
static void seal_batch(er_runtime *rt, uint32_t n) {
    randombytes_buf(rt->tx.nonces, (size_t)n * ER_WIRE_NONCE_BYTES);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *out = rt->tx.out + i * datagram_size(rt);
        rt->tx.iov[i].iov_base = out;
        rt->tx.iov[i].iov_len = er_wire_seal(out, ER_WIRE_DATA, rt->tx.nonces[i], rt->tx.packet[i],
                                             rt->tx.length[i], rt->key);
    }
}

static void send_keepalive_if_due(er_runtime *rt) {
    if (rt->keepalive_ms == 0) return;
    int64_t now = er_now_ms();
    if (now - atomic_load_explicit(&rt->last_tx_ms, memory_order_relaxed) < rt->keepalive_ms) return;
    struct sockaddr_storage peer;
    socklen_t peer_len = 0;
    if (!peer_snapshot(rt, &peer, &peer_len)) return;
    pthread_mutex_lock(&rt->tx_lock);
    randombytes_buf(rt->tx.nonces[0], ER_WIRE_NONCE_BYTES);
    rt->tx.iov[0].iov_base = rt->tx.out;
    rt->tx.iov[0].iov_len = er_wire_seal(rt->tx.out, ER_WIRE_KEEPALIVE, rt->tx.nonces[0], NULL, 0, rt->key);
    send_datagrams(rt, 1, &peer, peer_len, true);
    pthread_mutex_unlock(&rt->tx_lock);
    er_count(rt, ER_C_KEEPALIVES_SENT, 1);
}

/* Milliseconds until the next keepalive is due, or -1 (none: keepalives off, or no peer yet). */
static int keepalive_timeout(er_runtime *rt) {
    if (rt->keepalive_ms == 0) return -1;
    pthread_mutex_lock(&rt->peer_lock);
    bool has_peer = rt->has_peer;
    pthread_mutex_unlock(&rt->peer_lock);
    if (!has_peer) return -1; /* the receiver wakes the sender when it learns one */
    int64_t due = atomic_load_explicit(&rt->last_tx_ms, memory_order_relaxed) + rt->keepalive_ms - er_now_ms();
    return due <= 0 ? 0 : due > INT_MAX ? INT_MAX : (int)due;
}

/* Callback path: everything queued, a batch at a time. */
static void forward_queue(er_runtime *rt) {
    while (!er_halting(rt)) {
        pthread_mutex_lock(&rt->tx_lock);
        uint32_t first;
        uint32_t n = er_queue_peek(&rt->queue, ER_BATCH, &first);
        if (n == 0) {
            pthread_mutex_unlock(&rt->tx_lock);
            return;
        }
        for (uint32_t i = 0; i < n; i++)
            rt->tx.packet[i] = er_queue_slot(&rt->queue, first + i, &rt->tx.length[i]);
        struct sockaddr_storage peer;
        socklen_t peer_len = 0;
        if (!peer_snapshot(rt, &peer, &peer_len)) {
            er_queue_release(&rt->queue, n);
            pthread_mutex_unlock(&rt->tx_lock);
            er_count(rt, ER_C_DROPS_NO_PEER, n);
            continue;
        }
        seal_batch(rt, n);
        er_queue_release(&rt->queue, n); /* sealed copies are in tx.out: free the slots before sending */
        send_datagrams(rt, n, &peer, peer_len, true);
        pthread_mutex_unlock(&rt->tx_lock);
    }
}

size_t er_take_batch(er_runtime *rt, const uint8_t *const *packets, const size_t *lengths, size_t count,
                     size_t *sent_here) {
    *sent_here = 0;
    /* The sender is sealing or sending: queue behind it (never wait for it). */
    if (count == 0 || count > rt->direct_send || pthread_mutex_trylock(&rt->tx_lock) != 0)
        return er_queue_push_batch(&rt->queue, packets, lengths, count);
    size_t done = 0;
    uint32_t first;
    if (er_queue_peek(&rt->queue, 1, &first) == 0) { /* what is queued goes first */
        struct sockaddr_storage peer;
        socklen_t peer_len = 0;
        if (!peer_snapshot(rt, &peer, &peer_len)) {
            er_count(rt, ER_C_DROPS_NO_PEER, count);
            done = count;
        }
        while (done < count) {
            uint32_t n = count - done < ER_BATCH ? (uint32_t)(count - done) : ER_BATCH;
            for (uint32_t i = 0; i < n; i++) {
                rt->tx.packet[i] = packets[done + i];
                rt->tx.length[i] = lengths[done + i];
            }
            seal_batch(rt, n);
            uint32_t sent = send_datagrams(rt, n, &peer, peer_len, false);
            done += sent;
            *sent_here += sent;
            if (sent < n) break; /* the socket is full: the rest waits in the queue for the sender */
        }
    }
    /* Still under tx_lock, so nothing another caller sends directly can come between these and ours. */
    size_t queued = er_queue_push_batch(&rt->queue, packets + done, lengths + done, count - done);
    pthread_mutex_unlock(&rt->tx_lock);
    return done + queued;
}

/* fd path: up to ER_BATCH packets from the TUN descriptor. Returns -1 when the runtime failed. */
static int forward_tun(er_runtime *rt, short revents) {
    size_t slot = (size_t)rt->mtu + 1;
    uint32_t n = 0;
    uint64_t bytes = 0, oversize = 0, empty = 0;
    int rc = 0;
    for (uint32_t reads = 0; reads < ER_BATCH; reads++) { /* bounded per wake, dropped reads included */
        uint8_t *buf = rt->tx.tun_in + n * slot;
        ssize_t r = read(rt->tun_fd, buf, slot);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) break;
        if (r < 0) {
            char what[64];
            snprintf(what, sizeof(what), "read(tun fd %d)", rt->tun_fd);
            fail_errno(rt, what, errno);
            rc = -1;
            break;
        }
        if (r == 0) {
            if (revents & (POLLHUP | POLLRDHUP)) {
                char msg[80];
                snprintf(msg, sizeof(msg), "tun fd %d: closed by its other end", rt->tun_fd);
                er_runtime_fail(rt, msg);
                rc = -1;
                break;
            }
            empty++; /* a zero-length message (possible on a socketpair standing in for a TUN) */
            continue;
        }
        if ((size_t)r > rt->mtu) {
            oversize++;
            continue;
        }
        rt->tx.packet[n] = buf;
        rt->tx.length[n] = (size_t)r;
        bytes += (uint64_t)r;
        n++;
    }
    er_count(rt, ER_C_DROPS_OVERSIZE, oversize);
    er_count(rt, ER_C_DROPS_MALFORMED, empty);
    er_count(rt, ER_C_PACKETS_IN, n);
    er_count(rt, ER_C_BYTES_IN, bytes);
    if (n == 0) return rc;
    struct sockaddr_storage peer;
    socklen_t peer_len = 0;
    if (!peer_snapshot(rt, &peer, &peer_len)) {
        er_count(rt, ER_C_DROPS_NO_PEER, n);
        return rc;
    }
    seal_batch(rt, n);
    send_datagrams(rt, n, &peer, peer_len, true);
    return rc;
}

static void drain_eventfd(int fd) {
    uint64_t value;
    while (read(fd, &value, sizeof(value)) < 0 && errno == EINTR) {
    }
}

void *er_sender_main(void *arg) {
    er_runtime *rt = arg;
    pthread_setname_np(pthread_self(), "tg-example-tx");
    bool fd_path = rt->tun_fd >= 0;
    struct pollfd fds[3] = {
        {.fd = rt->stop_fd, .events = POLLIN},
        {.fd = rt->wake_fd, .events = POLLIN},
        {.fd = rt->tun_fd, .events = POLLIN | POLLRDHUP},
    };
    nfds_t nfds = fd_path ? 3 : 2;
    if (rt->start_delay_ms > 0) {
        /* Test hook (--start-delay-ms): a slow start, cut short by stop; silence counts from its end. */
        int64_t until = er_now_ms() + rt->start_delay_ms;
        for (int64_t left; (left = until - er_now_ms()) > 0;)
            if (poll(fds, 1, (int)left) > 0) break;
        atomic_store_explicit(&rt->last_rx_ms, er_silence_origin(rt, er_now_ms()), memory_order_relaxed);
    }
    thread_up(rt);
    for (;;) {
        int r = poll(fds, nfds, keepalive_timeout(rt));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            fail_errno(rt, "poll (sender)", errno);
            break;
        }
        if (fds[0].revents != 0) break;
        if (fds[1].revents & POLLIN) drain_eventfd(rt->wake_fd);
        if (fd_path && fds[2].revents != 0) {
            if (fds[2].revents & POLLNVAL) {
                char msg[80];
                snprintf(msg, sizeof(msg), "tun fd %d: not an open descriptor (closed under the runtime?)",
                         rt->tun_fd);
                er_runtime_fail(rt, msg);
                break;
            }
            if (forward_tun(rt, fds[2].revents) != 0) break;
        } else if (!fd_path) {
            forward_queue(rt);
        }
        send_keepalive_if_due(rt);
    }
    return NULL;
}

/* ---- receiver ----------------------------------------------------------------------------------- */

/* Hands one authenticated IP packet to the host. */
static void deliver(er_runtime *rt, const uint8_t *packet, size_t len, uint64_t *local) {
    if (rt->tun_fd < 0) {
        if (rt->writer(rt->context, packet, len) != 0) {
            local[ER_C_PACKETS_OUT]++;
            local[ER_C_BYTES_OUT] += len;
        } else {
            local[ER_C_DROPS_WRITER]++;
        }
        return;
    }
    ssize_t w;
    do {
        w = write(rt->tun_fd, packet, len);
    } while (w < 0 && errno == EINTR);
    if (w == (ssize_t)len) {
        local[ER_C_PACKETS_OUT]++;
        local[ER_C_BYTES_OUT] += len;
    } else {
        local[ER_C_DROPS_WRITER]++; /* EAGAIN (full), EINVAL (refused), or a short write: drop, never wait */
        if (w < 0 && errno == EBADF) {
            char what[64];
            snprintf(what, sizeof(what), "write(tun fd %d)", rt->tun_fd);
            fail_errno(rt, what, EBADF);
        }
    }
}

static void learn_peer(er_runtime *rt, const struct sockaddr_storage *source, socklen_t len) {
    pthread_mutex_lock(&rt->peer_lock);
    bool changed = !rt->has_peer || !same_endpoint(&rt->peer, source);
    if (changed) {
        memset(&rt->peer, 0, sizeof(rt->peer));
        memcpy(&rt->peer, source, len);
        rt->peer_len = len;
        rt->has_peer = true;
    }
    pthread_mutex_unlock(&rt->peer_lock);
    if (changed) signal_eventfd(rt->wake_fd); /* the sender may be waiting for a peer to keep alive */
}

static void process_batch(er_runtime *rt, uint32_t n) {
    uint64_t local[ER_C_COUNT] = {0};
    int last_authentic = -1;
    for (uint32_t i = 0; i < n; i++) {
        const struct msghdr *h = &rt->rx.msgs[i].msg_hdr;
        local[ER_C_DATAGRAMS_RECEIVED]++;
        if (h->msg_flags & MSG_TRUNC) {
            local[ER_C_DROPS_OVERSIZE]++; /* carries more than an MTU-sized packet */
            continue;
        }
        size_t plain_len = 0;
        uint8_t type = 0;
        switch (er_wire_open(rt->rx.iov[i].iov_base, rt->rx.msgs[i].msg_len, rt->rx.plain, rt->mtu, &plain_len,
                             &type, rt->key)) {
        case ER_OPEN_MALFORMED: local[ER_C_DROPS_MALFORMED]++; continue;
        case ER_OPEN_OVERSIZE: local[ER_C_DROPS_OVERSIZE]++; continue;
        case ER_OPEN_UNAUTHENTIC: local[ER_C_DROPS_AUTH]++; continue;
        case ER_OPEN_OK: break;
        }
        last_authentic = (int)i;
        if (type == ER_WIRE_KEEPALIVE) {
            local[plain_len == 0 ? ER_C_KEEPALIVES_RECEIVED : ER_C_DROPS_MALFORMED]++;
            continue;
        }
        uint8_t version = plain_len > 0 ? rt->rx.plain[0] >> 4 : 0;
        if (version != 4 && version != 6) {
            local[ER_C_DROPS_MALFORMED]++; /* authentic, but not an IP packet */
            continue;
        }
        if (er_halting(rt)) continue; /* stop has begun: the writer is not called any more */
        deliver(rt, rt->rx.plain, plain_len, local);
    }
    /* SO_RXQ_OVFL: each datagram carries the socket's cumulative drop count (when it is not zero). */
    struct msghdr *last = &rt->rx.msgs[n - 1].msg_hdr;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(last); c != NULL; c = CMSG_NXTHDR(last, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
            uint32_t drops;
            memcpy(&drops, CMSG_DATA(c), sizeof(drops));
            atomic_store_explicit(&rt->socket_drops, drops, memory_order_relaxed);
        }
    }
    if (last_authentic >= 0) {
        atomic_store_explicit(&rt->last_rx_ms, er_now_ms(), memory_order_relaxed);
        learn_peer(rt, &rt->rx.sources[last_authentic], rt->rx.msgs[last_authentic].msg_hdr.msg_namelen);
    }
    for (int c = 0; c < ER_C_COUNT; c++) er_count(rt, (er_counter)c, local[c]);
}

/* Reads until the socket is empty. Returns -1 when the runtime failed. */
static int receive_all(er_runtime *rt) {
    while (!er_halting(rt)) {
        for (size_t i = 0; i < ER_BATCH; i++) {
            rt->rx.msgs[i].msg_hdr.msg_namelen = sizeof(rt->rx.sources[i]);
            rt->rx.msgs[i].msg_hdr.msg_controllen = sizeof(rt->rx.control[i].bytes);
            rt->rx.msgs[i].msg_hdr.msg_flags = 0;
        }
        int n = recvmmsg(rt->udp_fd, rt->rx.msgs, ER_BATCH, MSG_DONTWAIT, NULL);
        if (n < 0) {
            switch (errno) {
            case EINTR: continue;
            case EAGAIN: return 0;
            /* ICMP errors a previous send left on the socket: the peer is not there (yet). */
            case ECONNREFUSED: case EHOSTUNREACH: case ENETUNREACH: case EHOSTDOWN: case ENETDOWN: continue;
            default:
                fail_errno(rt, "recvmmsg", errno);
                return -1;
            }
        }
        if (n == 0) return 0;
        process_batch(rt, (uint32_t)n);
        if (n < ER_BATCH) return 0;
    }
    return 0;
}

void *er_receiver_main(void *arg) {
    er_runtime *rt = arg;
    pthread_setname_np(pthread_self(), "tg-example-rx");
    struct pollfd fds[2] = {{.fd = rt->stop_fd, .events = POLLIN}, {.fd = rt->udp_fd, .events = POLLIN}};
    thread_up(rt);
    for (;;) {
        int r = poll(fds, 2, -1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            fail_errno(rt, "poll (receiver)", errno);
            break;
        }
        if (fds[0].revents != 0) break;
        if (receive_all(rt) != 0) break;
    }
    return NULL;
}
