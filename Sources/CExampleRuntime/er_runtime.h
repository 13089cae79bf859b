/*
 * er_runtime.h — one running example runtime: what start builds, the threads share, and stop frees.
 *
 * Threads: the caller's (packet_in, status, app_message, stop), the sender (queue or TUN fd → UDP) and
 * the receiver (UDP → writer or TUN fd). What they share is either immutable after start, atomic
 * (state, counters, timestamps), or behind a named mutex (the queue, the peer, the failure message).
 */
#ifndef ER_RUNTIME_H
#define ER_RUNTIME_H

#include "er_args.h"
#include "er_queue.h"
#include "er_text.h"
#include "er_wire.h"
#include "tunnelgate_runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>

#define ER_INTERFACE_NAME "example-udp"
/* Datagrams per sendmmsg/recvmmsg, and packets per TUN read burst. */
#define ER_BATCH 32
/* SO_RCVBUF/SO_SNDBUF asked for (forced when the process may; else capped by net.core.[rw]mem_max). */
#define ER_SOCKET_BUFFER (4 << 20)

typedef enum {
    ER_STARTING, /* start returned; the threads are not both running yet */
    ER_RUNNING,  /* "ready", or "reconnecting" when the peer has been silent for silence_ms */
    ER_FAILED,   /* a thread hit an error it cannot continue from; error[] says which */
    ER_STOPPED,
} er_state;

/* The counters of the status JSON, in its order; er_counter_names holds their JSON names. */
typedef enum {
    ER_C_PACKETS_IN,        /* host → tunnel packets accepted (packet_in OK, or read from the TUN fd) */
    ER_C_PACKETS_OUT,       /* tunnel → host packets delivered (writer returned non-zero, or written) */
    ER_C_BYTES_IN,
    ER_C_BYTES_OUT,
    ER_C_QUEUE_FULL,        /* packet_in and packet_in_batch calls answered QUEUE_FULL */
    ER_C_BATCH_CALLS,       /* packet_in_batch calls (on a live handle) */
    ER_C_BATCH_PACKETS,     /* packets packet_in_batch took (also in packetsIn) */
    ER_C_BATCH_DIRECT,      /* of those, packets sealed and sent on the caller's thread (not queued) */
    ER_C_DROPS_AUTH,        /* datagrams whose tag did not verify */
    ER_C_DROPS_MALFORMED,   /* datagrams too short or with a bad header; authenticated non-IP payloads */
    ER_C_DROPS_WRITER,      /* packets the writer refused (returned 0), or the TUN fd write failed */
    ER_C_DROPS_OVERSIZE,    /* packets over the MTU, from either side */
    ER_C_DROPS_NO_PEER,     /* packets sent in while no peer address is known */
    ER_C_DROPS_SEND,        /* datagrams sendmmsg refused (EPERM, ENETUNREACH, ...) */
    ER_C_DATAGRAMS_SENT,
    ER_C_DATAGRAMS_RECEIVED,
    ER_C_KEEPALIVES_SENT,
    ER_C_KEEPALIVES_RECEIVED,
    ER_C_COUNT
} er_counter;

ER_HIDDEN extern const char *const er_counter_names[ER_C_COUNT];

/* The sender's preallocated batch: sealed datagrams and the packets they carry. */
typedef struct {
    uint8_t *out;                   /* ER_BATCH x (mtu + ER_WIRE_OVERHEAD) */
    uint8_t *tun_in;                /* fd path: ER_BATCH x (mtu + 1), the + 1 detects oversize reads */
    const uint8_t *packet[ER_BATCH];
    size_t length[ER_BATCH];
    uint8_t nonces[ER_BATCH][ER_WIRE_NONCE_BYTES];
    struct mmsghdr msgs[ER_BATCH];
    struct iovec iov[ER_BATCH];
} er_tx;

/* Room for the SO_RXQ_OVFL control message (the socket's drop count), aligned for cmsghdr. */
typedef struct {
    _Alignas(struct cmsghdr) uint8_t bytes[CMSG_SPACE(sizeof(uint32_t))];
} er_rx_control;

/* The receiver's preallocated batch. */
typedef struct {
    uint8_t *in;                    /* ER_BATCH x (mtu + ER_WIRE_OVERHEAD) */
    uint8_t *plain;                 /* mtu */
    struct mmsghdr msgs[ER_BATCH];
    struct iovec iov[ER_BATCH];
    struct sockaddr_storage sources[ER_BATCH];
    er_rx_control control[ER_BATCH];
} er_rx;

typedef struct er_runtime {
    struct er_runtime *next; /* the registry of live handles (example_runtime.c), under its lock */

    _Atomic int state;       /* er_state */
    _Atomic int threads_up;
    pthread_mutex_t fail_lock;
    char error[256];         /* written once, before state becomes ER_FAILED */
    char note[256];          /* test hook (--note): shown in status as "note" when not empty */

    /* Immutable after start. */
    uint32_t mtu, silence_ms, keepalive_ms;
    int udp_fd;
    int stop_fd;             /* eventfd: written by stop and by a failing thread, never read: stays readable */
    int wake_fd;             /* eventfd: wakes the sender (queue not empty; a peer was learned) */
    int tun_fd;              /* -1: callback packet path; not owned (the host closes it) */
    uint32_t direct_send;    /* --direct-send N: packet_in_batch calls of at most N packets may be sealed and
                                sent on the caller's thread */
    uint32_t start_delay_ms; /* test hook (--start-delay-ms): the sender comes up this much later */
    bool start_silent;       /* test hook (--start-silent 1): reconnecting until the peer is first heard */
    tunnelgate_runtime_writer writer;
    void *context;
    uint8_t *key;            /* sodium_malloc'd: locked, guarded, zeroed and freed by stop */
    struct sockaddr_storage local;

    er_queue queue;          /* callback path only */

    pthread_mutex_t peer_lock;
    bool has_peer;
    struct sockaddr_storage peer;
    socklen_t peer_len;

    _Atomic int64_t last_rx_ms; /* the last authenticated datagram (start time until one arrives) */
    _Atomic int64_t last_tx_ms; /* the last datagram sent or attempted */
    _Atomic uint64_t counters[ER_C_COUNT];
    _Atomic uint64_t socket_drops;  /* the kernel's count of datagrams its full receive queue dropped */

    pthread_mutex_t tx_lock; /* tx: held by whoever seals and sends (the sender thread, or packet_in_batch's
                                caller, which only ever try-locks it) */
    er_tx tx;
    er_rx rx;                /* the receiver's only */
    pthread_t sender, receiver;
    bool sender_started, receiver_started;
} er_runtime;

ER_HIDDEN int er_io_allocate(er_runtime *rt);
ER_HIDDEN void er_io_free(er_runtime *rt);
ER_HIDDEN void *er_sender_main(void *rt);

/* packet_in_batch's work (callback path; packets already checked): when the sender is idle and nothing is
 * queued, seals and sends the packets on the calling thread (one sendmmsg per ER_BATCH, never waiting for
 * the socket); what that does not send goes into the queue. Returns how many packets were taken (a
 * prefix); *sent_here says how many of them were sent (or dropped for want of a peer) on this thread. */
ER_HIDDEN size_t er_take_batch(er_runtime *rt, const uint8_t *const *packets, const size_t *lengths, size_t count,
                               size_t *sent_here);
ER_HIDDEN void *er_receiver_main(void *rt);

/* Records the first failure (state → ER_FAILED) and makes both threads leave their loops. */
ER_HIDDEN void er_runtime_fail(er_runtime *rt, const char *message);

/* True once stop or a failure began: threads finish up, the writer is not called any more. */
/* Where silence counts from when the runtime comes up: now, or (--start-silent 1) a moment already past the
   silence, so that no status poll, however soon, sees "ready" before the peer has been heard. */
static inline int64_t er_silence_origin(const er_runtime *rt, int64_t now) {
    return rt->start_silent ? now - (int64_t)rt->silence_ms - 1 : now;
}

static inline bool er_halting(er_runtime *rt) {
    return atomic_load_explicit(&rt->state, memory_order_acquire) >= ER_FAILED;
}

static inline void er_count(er_runtime *rt, er_counter c, uint64_t n) {
    if (n != 0) atomic_fetch_add_explicit(&rt->counters[c], n, memory_order_relaxed);
}

#endif /* ER_RUNTIME_H */
