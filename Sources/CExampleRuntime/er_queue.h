/*
 * er_queue.h — the bounded input queue between packet_in (any thread) and the sender thread (one).
 *
 * A ring of `capacity` fixed slots of `slot_size` bytes, allocated once at start: packet_in copies into
 * a free slot under the lock (no allocation, no syscall unless it wakes the sender), packet_in_batch
 * copies as many packets as fit under one lock and with at most one wake-up; the sender peeks a
 * run of occupied slots, reads them without the lock (producers never write occupied slots), and then
 * releases them. The wake eventfd is written only when the queue goes from empty to non-empty, so a busy
 * queue costs no syscalls per packet.
 */
#ifndef ER_QUEUE_H
#define ER_QUEUE_H

#include "er_text.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    pthread_mutex_t lock;
    uint8_t *slots;
    uint32_t *lengths;
    size_t slot_size;
    uint32_t capacity;
    uint32_t head;  /* the oldest occupied slot */
    uint32_t count; /* occupied slots, including those the sender peeked and has not released */
    int wake_fd;    /* eventfd the sender polls */
} er_queue;

ER_HIDDEN int er_queue_init(er_queue *q, uint32_t capacity, size_t slot_size, int wake_fd);
ER_HIDDEN void er_queue_destroy(er_queue *q);

/* Copies a packet in (len <= slot_size). Returns 0, or 1 when the queue is full. */
ER_HIDDEN int er_queue_push(er_queue *q, const uint8_t *packet, size_t len);

/* Copies packets[0 .. count) in, in order, as many as fit (each lengths[i] <= slot_size), under one lock
 * and with at most one wake-up. Returns how many were copied: a prefix. */
ER_HIDDEN size_t er_queue_push_batch(er_queue *q, const uint8_t *const *packets, const size_t *lengths, size_t count);

/* Sender only: up to `max` occupied slots, the oldest first; their indices are first .. first + n - 1
 * (mod capacity). They stay valid until er_queue_release. */
ER_HIDDEN uint32_t er_queue_peek(er_queue *q, uint32_t max, uint32_t *first);
ER_HIDDEN const uint8_t *er_queue_slot(const er_queue *q, uint32_t index, size_t *len);
ER_HIDDEN void er_queue_release(er_queue *q, uint32_t n);

#endif /* ER_QUEUE_H */
