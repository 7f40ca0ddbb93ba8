/* The sparse columns' arenas: see columns.h. */
#include "columns.h"

#include <string.h>

/* Checks segment i against the end of the one before it and the arena's end. */
static qp_columns_status
check_segment(int64_t start, int64_t length, size_t previous_end, size_t n_items)
{
    if (start < 0 || length < 0)
        return QP_COLUMNS_NEGATIVE;
    if ((uint64_t)start < previous_end)
        return QP_COLUMNS_ORDER;
    if ((uint64_t)start > n_items || (uint64_t)length > n_items - (uint64_t)start)
        return QP_COLUMNS_PAST_END;
    return QP_COLUMNS_OK;
}

qp_columns_status
qp_columns_compact(uint8_t *arena, size_t n_items, size_t item_bytes, const int64_t *starts,
                   const int64_t *lengths, size_t n_segments, size_t *n_live, size_t *bad)
{
    size_t previous_end = 0;
    for (size_t i = 0; i < n_segments; i++) {
        qp_columns_status status = check_segment(starts[i], lengths[i], previous_end, n_items);
        if (status != QP_COLUMNS_OK) {
            *bad = i;
            return status;
        }
        previous_end = (size_t)starts[i] + (size_t)lengths[i];
    }
    /* Every segment lies in [cursor, n_items): each check above holds, and the cursor
     * stays at or below the start of the segment it moves. The bounds are checked again
     * here, so that this pass trusts nothing the first one found. */
    size_t cursor = 0;
    for (size_t i = 0; i < n_segments; i++) {
        size_t start = (size_t)starts[i], length = (size_t)lengths[i];
        if (start < cursor || start > n_items || length > n_items - start) {
            *bad = i;
            return QP_COLUMNS_ORDER;
        }
        if (start != cursor && length)
            memmove(arena + cursor * item_bytes, arena + start * item_bytes,
                    length * item_bytes);
        cursor += length;
    }
    *n_live = cursor;
    return QP_COLUMNS_OK;
}

qp_columns_status
qp_columns_gather(const uint8_t *arena, size_t n_items, size_t item_bytes,
                  const int64_t *starts, const int64_t *lengths, size_t n_segments,
                  uint8_t *out, size_t n_out, size_t *bad)
{
    size_t total = 0;
    for (size_t i = 0; i < n_segments; i++) {
        qp_columns_status status = check_segment(starts[i], lengths[i], 0, n_items);
        if (status != QP_COLUMNS_OK) {
            *bad = i;
            return status;
        }
        total += (size_t)lengths[i]; /* (each at most n_items: no overflow before n_out) */
        if (total > n_out) {
            *bad = n_segments;
            return QP_COLUMNS_OUT_SIZE;
        }
    }
    if (total != n_out) {
        *bad = n_segments;
        return QP_COLUMNS_OUT_SIZE;
    }
    /* As in qp_columns_compact, this pass checks its own bounds. */
    size_t cursor = 0;
    for (size_t i = 0; i < n_segments; i++) {
        size_t start = (size_t)starts[i], length = (size_t)lengths[i];
        if (start > n_items || length > n_items - start || length > n_out - cursor) {
            *bad = i;
            return QP_COLUMNS_PAST_END;
        }
        memcpy(out + cursor * item_bytes, arena + start * item_bytes, length * item_bytes);
        cursor += length;
    }
    return QP_COLUMNS_OK;
}

qp_columns_status
qp_columns_list_indices(const int64_t *lengths, size_t n_lists, size_t per_batch,
                        int64_t *out, size_t n_out, size_t *bad)
{
    size_t total = 0;
    for (size_t j = 0; j < n_lists; j++) {
        if (lengths[j] < 0) {
            *bad = j;
            return QP_COLUMNS_NEGATIVE;
        }
        if ((uint64_t)lengths[j] > n_out - total) {
            *bad = n_lists;
            return QP_COLUMNS_OUT_SIZE;
        }
        total += (size_t)lengths[j];
    }
    if (total != n_out) {
        *bad = n_lists;
        return QP_COLUMNS_OUT_SIZE;
    }
    /* This pass bounds its own writes by n_out. */
    size_t row = 0;
    for (size_t j = 0; j < n_lists; j++) {
        int64_t list = (int64_t)(j % per_batch);
        for (int64_t place = 0; place < lengths[j] && row < n_out; place++, row++) {
            out[2 * row] = list;
            out[2 * row + 1] = place;
        }
    }
    return QP_COLUMNS_OK;
}

qp_columns_status
qp_columns_shuffle_in(int64_t *slots, size_t n_slots, size_t start, const int64_t *places,
                      size_t k, uint8_t *taken, int64_t *rows, size_t *bad)
{
    if (start > n_slots || k > n_slots - start) {
        *bad = 0;
        return QP_COLUMNS_PAST_END;
    }
    size_t end = start + k;
    memset(taken, 0, end);
    for (size_t i = 0; i < k; i++) {
        if (places[i] < 0) {
            *bad = i;
            return QP_COLUMNS_NEGATIVE;
        }
        if ((uint64_t)places[i] >= end) {
            *bad = i;
            return QP_COLUMNS_PAST_END;
        }
        if (taken[places[i]]) {
            *bad = i;
            return QP_COLUMNS_REPEATED;
        }
        taken[places[i]] = 1;
    }
    memcpy(rows, slots + start, k * sizeof *rows);
    /* The places below start that k distinct places take are as many as the places from
     * start up that none takes; the cursor is bounded by k all the same. */
    size_t open = 0;
    for (size_t i = 0; i < k; i++) {
        size_t place = (size_t)places[i];
        if (place >= start)
            continue;
        while (open < k && taken[start + open])
            open++;
        if (open == k)
            break;
        slots[start + open] = slots[place];
        open++;
    }
    for (size_t i = 0; i < k; i++)
        slots[places[i]] = rows[i];
    return QP_COLUMNS_OK;
}

/* ordinal - low as NumPy's int64 subtraction gives it: wrapped, never undefined. */
static inline int64_t
place_of(int64_t ordinal, int64_t low)
{
    return (int64_t)((uint64_t)ordinal - (uint64_t)low);
}

qp_columns_status
qp_columns_mark(uint8_t *left, size_t n_left, const int64_t *ordinals, size_t k, int64_t low,
                int64_t limit, uint8_t *due, size_t *bad)
{
    if (k == 0)
        return QP_COLUMNS_OK;
    int64_t least = place_of(ordinals[0], low);
    for (size_t i = 1; i < k; i++) {
        int64_t place = place_of(ordinals[i], low);
        if (place < least)
            least = place;
    }
    if (least < limit)
        *due = 1;
    for (size_t i = 0; i < k; i++) {
        int64_t place = place_of(ordinals[i], low);
        if (place >= 0 && (uint64_t)place >= n_left) {
            *bad = i;
            return QP_COLUMNS_PAST_END;
        }
    }
    for (size_t i = 0; i < k; i++) {
        int64_t place = place_of(ordinals[i], low);
        if (place >= 0)
            left[place] = 0;
    }
    return QP_COLUMNS_OK;
}

/* NumPy's bounded draw of 0 .. range (below 2**32 - 1): Lemire's multiply, with a redraw of
 * the few draws that would bias it. */
static uint32_t
bounded(const qp_bitgen *gen, uint32_t range)
{
    const uint32_t excl = range + 1;
    uint64_t m = (uint64_t)gen->next_uint32(gen->state) * excl;
    uint32_t leftover = (uint32_t)m;
    if (leftover < excl) {
        const uint32_t threshold = (UINT32_MAX - range) % excl;
        while (leftover < threshold) {
            m = (uint64_t)gen->next_uint32(gen->state) * excl;
            leftover = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

void
qp_columns_tail_shuffle(int64_t *order, size_t n, size_t k, const qp_bitgen *gen)
{
    for (size_t i = 0; i < n; i++)
        order[i] = (int64_t)i;
    size_t first = n - k > 1 ? n - k : 1;
    for (size_t i = n; i-- > first;) {
        size_t j = bounded(gen, (uint32_t)i); /* (i < n < 2**32; j <= i) */
        int64_t swapped = order[j];
        order[j] = order[i];
        order[i] = swapped;
    }
}
