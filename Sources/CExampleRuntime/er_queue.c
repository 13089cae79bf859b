#define _GNU_SOURCE
#include "er_queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int er_queue_init(er_queue *q, uint32_t capacity, size_t slot_size, int wake_fd) {
    memset(q, 0, sizeof(*q));
    q->slots = malloc((size_t)capacity * slot_size);
    q->lengths = calloc(capacity, sizeof(uint32_t));
    if (q->slots == NULL || q->lengths == NULL || pthread_mutex_init(&q->lock, NULL) != 0) {
        free(q->slots);
        free(q->lengths);
        q->slots = NULL;
        q->lengths = NULL;
        return -1;
    }
    q->slot_size = slot_size;
    q->capacity = capacity;
    q->wake_fd = wake_fd;
    return 0;
}

void er_queue_destroy(er_queue *q) {
    if (q->slots == NULL) return;
    pthread_mutex_destroy(&q->lock);
    free(q->slots);
    free(q->lengths);
    memset(q, 0, sizeof(*q));
}

int er_queue_push(er_queue *q, const uint8_t *packet, size_t len) {
    return er_queue_push_batch(q, &packet, &len, 1) == 1 ? 0 : 1;
}

size_t er_queue_push_batch(er_queue *q, const uint8_t *const *packets, const size_t *lengths, size_t count) {
    pthread_mutex_lock(&q->lock);
    size_t room = q->capacity - q->count;
    size_t n = count < room ? count : room;
    uint32_t tail = (q->head + q->count) % q->capacity;
    for (size_t i = 0; i < n; i++) {
        memcpy(q->slots + (size_t)tail * q->slot_size, packets[i], lengths[i]);
        q->lengths[tail] = (uint32_t)lengths[i];
        if (++tail == q->capacity) tail = 0;
    }
    int was_empty = q->count == 0 && n > 0;
    q->count += (uint32_t)n;
    pthread_mutex_unlock(&q->lock);
    if (was_empty) {
        /* The sender may be asleep in poll. EAGAIN (the counter is saturated) means it is awake anyway. */
        uint64_t one = 1;
        while (write(q->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
        }
    }
    return n;
}

uint32_t er_queue_peek(er_queue *q, uint32_t max, uint32_t *first) {
    pthread_mutex_lock(&q->lock);
    uint32_t n = q->count < max ? q->count : max;
    *first = q->head;
    pthread_mutex_unlock(&q->lock);
    return n;
}

const uint8_t *er_queue_slot(const er_queue *q, uint32_t index, size_t *len) {
    index %= q->capacity;
    *len = q->lengths[index];
    return q->slots + (size_t)index * q->slot_size;
}

void er_queue_release(er_queue *q, uint32_t n) {
    pthread_mutex_lock(&q->lock);
    q->head = (q->head + n) % q->capacity;
    q->count -= n;
    pthread_mutex_unlock(&q->lock);
}
