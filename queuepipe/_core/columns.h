/* The sparse columns' arenas (queuepipe/_columns.py): moves of segments, checked. No Python,
 * no allocation.
 *
 * An arena is a flat array of items (a value, or a row of indices) in which each element a
 * queue holds has a segment: `length` items from `start`. Elements leave in any order and
 * leave holes; a compaction moves the live segments to the arena's front.
 */
#ifndef QP_COLUMNS_H
#define QP_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

/* Why a compaction refused its segments (nothing was moved then). */
typedef enum {
    QP_COLUMNS_OK = 0,
    QP_COLUMNS_NEGATIVE = 1, /* a start or a length below 0 */
    QP_COLUMNS_ORDER = 2,    /* a segment begins before the end of the one before it */
    QP_COLUMNS_PAST_END = 3, /* a segment ends past the arena's end */
    QP_COLUMNS_OUT_SIZE = 4, /* the segments hold more or fewer items than the output */
    QP_COLUMNS_REPEATED = 5  /* a place given twice (qp_columns_shuffle_in) */
} qp_columns_status;

/* Moves the n_segments segments of arena (n_items items of item_bytes bytes each), segment
 * i being lengths[i] items from starts[i], to the arena's front one after the other, in
 * place. The segments must lie in the arena in increasing order without overlapping: each
 * then moves down (or stays), and the items in front of it have been read already. On
 * QP_COLUMNS_OK, *n_live is the number of items now at the front; otherwise nothing moved
 * and *bad is the first segment refused. */
qp_columns_status qp_columns_compact(uint8_t *arena, size_t n_items, size_t item_bytes,
                                     const int64_t *starts, const int64_t *lengths,
                                     size_t n_segments, size_t *n_live, size_t *bad);

/* Copies the n_segments segments of arena (as above; in any order, overlapping or not) one
 * after the other into out, which holds n_out items of item_bytes bytes: exactly as many as
 * the segments. On an error nothing is copied and *bad is the segment refused (n_segments
 * for QP_COLUMNS_OUT_SIZE). */
qp_columns_status qp_columns_gather(const uint8_t *arena, size_t n_items, size_t item_bytes,
                                    const int64_t *starts, const int64_t *lengths,
                                    size_t n_segments, uint8_t *out, size_t n_out,
                                    size_t *bad);

/* Writes the indices [list, place] of the values of n_lists plain lists of lengths[j] values
 * each, one after the other, to out (n_out rows of two int64, exactly as many as the values):
 * list j numbered j % per_batch (several batches of per_batch lists, each counted from 0),
 * place 0, 1, ... in it. On an error nothing is written and *bad is the list refused
 * (n_lists for QP_COLUMNS_OUT_SIZE). per_batch >= 1. */
qp_columns_status qp_columns_list_indices(const int64_t *lengths, size_t n_lists,
                                          size_t per_batch, int64_t *out, size_t n_out,
                                          size_t *bad);

/* A shuffle queue's shuffle-in (queuepipe/queues.py, RandomShuffleQueue._shuffle_in, whose
 * pure twin this is): the k entries slots[start .. start + k) go to places[0 .. k), k
 * distinct places below start + k, in that order; the entries at the places below start that
 * they take first move, in the order of places, to the places from start up that none of
 * them takes, lowest first. taken (start + k bytes) and rows (k items) are scratch. On an
 * error nothing is written to slots and *bad is the place refused: negative, past start + k
 * (QP_COLUMNS_PAST_END), or given twice. start + k <= n_slots. */
qp_columns_status qp_columns_shuffle_in(int64_t *slots, size_t n_slots, size_t start,
                                        const int64_t *places, size_t k, uint8_t *taken,
                                        int64_t *rows, size_t *bad);

/* A read plan's marks of the records delivered (queuepipe/plan.py, _pure_mark_delivered, whose
 * pure twin this is): each ordinal's place is ordinal - low (as int64s wrap); places below 0
 * are passed over (forgotten). First *due becomes 1 when the least place is below limit (a
 * record of the oldest ticket open); then, unless a place of 0 or more is at or past n_left
 * (QP_COLUMNS_PAST_END, *bad its index in ordinals, nothing marked), left[place] = 0 for
 * every one. */
qp_columns_status qp_columns_mark(uint8_t *left, size_t n_left, const int64_t *ordinals,
                                  size_t k, int64_t low, int64_t limit, uint8_t *due,
                                  size_t *bad);

/* A NumPy bit generator as its C interface hands it over (numpy/random/bitgen.h's bitgen_t,
 * the pointer in `Generator.bit_generator.capsule`): these fields, in this order. */
typedef struct {
    void *state;
    uint64_t (*next_uint64)(void *state);
    uint32_t (*next_uint32)(void *state);
    double (*next_double)(void *state);
    uint64_t (*next_raw)(void *state);
} qp_bitgen;

/* The places of a shuffle queue's shuffle-in (queuepipe/queues.py, _places), drawn as
 * NumPy's Generator.choice(n, size=k, replace=False) draws them when it shuffles the tail
 * of 0 .. n - 1 (n above 10,000 and k above n // 50): order[i] = i, then for i from n - 1
 * down to max(n - k, 1), order[i] swaps with order[j], j drawn in 0 .. i by Lemire's method
 * on 32-bit draws (NumPy's random_bounded_uint64 for such a range); the places are the last
 * k. The same draws of the same generator: the same places, and the generator left as
 * choice leaves it. 0 < k <= n < 2**32; order holds n items. The caller holds the bit
 * generator's lock. */
void qp_columns_tail_shuffle(int64_t *order, size_t n, size_t k, const qp_bitgen *gen);

#endif
