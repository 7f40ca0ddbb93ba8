/* libFuzzer target for the Example wire walk (wire.c).
 *
 * The input holds a spec and a batch of records:
 *
 *     byte 0          the number of features, 1 + (byte 0 & 3)
 *     2 bytes each    a feature: byte a picks the key (a & 7, from KEYS), the dtype
 *                     ((a >> 3 & 3) % 3: int64, float, bytes), ragged (a >> 5 & 1) and required
 *                     (a >> 6 & 1); byte b the size (b & 3). A key already taken drops it.
 *     then records    each a length byte L and L bytes (cut by the end), or, for L = 255,
 *                     the rest of the input
 *
 * Each record and every output lives in an allocation of exactly its size, so that
 * AddressSanitizer sees a read or write past any of them. After the walk the outputs are
 * checked against what wire.h promises: a handed-back record leaves no values and no
 * "present"; the values of the records taken add up to their counts; every string span lies
 * inside the record it came from; a dense feature present has its count.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define MAX_FEATURES 4
#define MAX_RECORDS 64

static const char *const KEYS[8] = {"i", "f", "s", "v", "q", "x", "\xc3\xa9", ""};

static void
fail(const char *what, size_t feature, size_t row)
{
    fprintf(stderr, "fuzz_wire: %s (feature %zu, record %zu)\n", what, feature, row);
    abort();
}

static size_t
item_bytes(const qp_feature *f)
{
    return f->dtype == QP_INT64 ? 8 : f->dtype == QP_FLOAT ? 4 : sizeof(qp_span);
}

/* Checks feature f's outputs over the records, given which were handed back. */
static void
check_feature(const qp_feature *f, size_t index, const qp_span *records, size_t n_records,
              const uint8_t *handed_back)
{
    size_t value = 0, n_values = f->values.len / item_bytes(f);
    if (f->values.len % item_bytes(f) != 0)
        fail("the scratch holds a partial value", index, 0);
    for (size_t row = 0; row < n_records; row++) {
        if (handed_back[row] > 1)
            fail("handed_back is neither 0 nor 1", index, row);
        if (f->present[row] > 1 || (handed_back[row] && f->present[row]))
            fail("present is set for a record handed back, or not 0/1", index, row);
        uint64_t count;
        if (f->kind == QP_RAGGED) {
            if (f->counts[row] < 0 || (handed_back[row] && f->counts[row] != 0)
                || (!f->present[row] && f->counts[row] != 0))
                fail("a count is negative, or set where nothing was taken", index, row);
            count = (uint64_t)f->counts[row];
            if (f->size ? count % f->size != 0 : count != 0)
                fail("a ragged count is not a multiple of the stride", index, row);
        }
        else {
            if (!handed_back[row] && f->required && !f->present[row])
                fail("a required feature is absent from a record taken", index, row);
            count = f->present[row] ? f->size : 0;
        }
        if (f->dtype == QP_BYTES || f->kind == QP_RAGGED) {
            if (count > n_values - value)
                fail("the counts add up to more values than the scratch holds", index, row);
            for (uint64_t k = 0; f->dtype == QP_BYTES && k < count; k++) {
                qp_span span;
                memcpy(&span, f->values.data + (value + k) * sizeof span, sizeof span);
                const qp_span record = records[row];
                if (span.data < record.data || span.len > record.len
                    || (size_t)(span.data - record.data) > record.len - span.len)
                    fail("a string span lies outside its record", index, row);
            }
            value += (size_t)count;
        }
    }
    if (value != n_values)
        fail("the scratch holds values no count accounts for", index, 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const uint8_t *p = data, *end = data + size;
    size_t n_wanted = 1 + (*p++ & 3);
    qp_feature features[MAX_FEATURES];
    memset(features, 0, sizeof features);
    size_t n_features = 0;
    int key_taken[8] = {0};
    for (size_t i = 0; i < n_wanted && end - p >= 2; i++, p += 2) {
        uint8_t a = p[0], b = p[1];
        if (key_taken[a & 7])
            continue;
        key_taken[a & 7] = 1;
        qp_feature *f = &features[n_features++];
        f->key = (const uint8_t *)KEYS[a & 7];
        f->key_len = strlen(KEYS[a & 7]);
        f->dtype = (qp_dtype)(((a >> 3) & 3) % 3);
        f->kind = (a >> 5) & 1 ? QP_RAGGED : QP_DENSE;
        f->required = (a >> 6) & 1;
        f->size = b & 3;
    }
    qp_span records[MAX_RECORDS];
    size_t n_records = 0;
    while (p < end && n_records < MAX_RECORDS) {
        size_t len = *p++;
        if (len == 255 || len > (size_t)(end - p))
            len = (size_t)(end - p);
        uint8_t *copy = malloc(len ? len : 1);
        if (copy == NULL)
            break;
        memcpy(copy, p, len);
        records[n_records].data = copy;
        records[n_records].len = len;
        n_records++;
        p += len;
    }
    /* Outputs of exactly the size the module gives them (a dense array of records x size,
     * present and counts per feature); present holds junk, which the walk must overwrite,
     * counts zeros, as the Python layer gives them. */
    int ok = 1;
    for (size_t i = 0; i < n_features; i++) {
        qp_feature *f = &features[i];
        f->present = malloc(n_records ? n_records : 1);
        if (f->present != NULL)
            memset(f->present, 0xAA, n_records ? n_records : 1);
        f->counts = calloc(n_records ? n_records : 1, sizeof(int64_t));
        if (f->kind == QP_DENSE && f->dtype != QP_BYTES) {
            f->dense_len_bytes = n_records * (size_t)f->size * (f->dtype == QP_INT64 ? 8 : 4);
            f->dense = malloc(f->dense_len_bytes ? f->dense_len_bytes : 1);
        }
        else {
            f->dense = NULL;
        }
        ok = ok && f->present && f->counts && (f->dense || f->kind == QP_RAGGED
                                               || f->dtype == QP_BYTES);
    }
    uint8_t *handed_back = malloc(n_records ? n_records : 1);
    if (ok && handed_back != NULL) {
        qp_walk_status status = qp_walk_examples(records, n_records, features, n_features,
                                                 handed_back);
        if (status == QP_WALK_BAD_ARGUMENT)
            fail("outputs of the right size were refused", 0, 0);
        if (status == QP_WALK_OK) {
            for (size_t i = 0; i < n_features; i++)
                check_feature(&features[i], i, records, n_records, handed_back);
        }
    }
    free(handed_back);
    for (size_t i = 0; i < n_features; i++) {
        qp_feature_release(&features[i]);
        qp_feature_release(&features[i]);  /* safe twice, as wire.h says */
        free(features[i].present);
        free(features[i].counts);
        free(features[i].dense);
    }
    for (size_t i = 0; i < n_records; i++)
        free((void *)records[i].data);
    return 0;
}
