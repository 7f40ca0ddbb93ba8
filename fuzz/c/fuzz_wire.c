/* libFuzzer target for the wire walk (wire.c): Examples and SequenceExamples.
 *
 * The input holds a spec and the records to walk:
 *
 *     byte 0          the number of features, 1 + (byte 0 & 3); bit 7 picks the mode: clear,
 *                     a batch of Examples (qp_walk_examples); set, one SequenceExample
 *                     (qp_walk_sequence_example)
 *     2 bytes each    a feature: byte a picks the key (a & 7, from KEYS), the dtype
 *                     ((a >> 3 & 3) % 3: int64, float, bytes), ragged (a >> 5 & 1) and required
 *                     (a >> 6 & 1); byte b the size (b & 3). In a SequenceExample, a >> 7 makes
 *                     it a feature list, ragged then meaning a VarLenFeature (else a
 *                     FixedLenSequenceFeature: fixed_steps). A key already taken in its group
 *                     (the Example's features, the context, the feature lists) drops it.
 *     then records    Examples: each a length byte L and L bytes (cut by the end), or, for
 *                     L = 255, the rest of the input. A SequenceExample: the rest of the input.
 *
 * FUZZ_WIRE_MODE=examples or =sequence in the environment keeps a run to one mode (inputs of
 * the other are rejected, kept out of the corpus); a saved input replays without it.
 *
 * Each record and every output lives in an allocation of exactly its size, so that
 * AddressSanitizer sees a read or write past any of them. After the walk, which must return
 * QP_WALK_OK, the outputs are checked against what wire.h promises: a handed-back Example
 * leaves no values and no "present"; the values of the records taken add up to their counts;
 * every string span lies inside the record it came from; a dense feature present has its
 * count, a required one is present; a feature list's steps add up to its values, each a
 * multiple of its stride (exactly the stride with fixed_steps).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define MAX_FEATURES 4
#define MAX_RECORDS 64
#define SEQUENCE_MODE 0x80

static const char *const KEYS[8] = {"i", "f", "s", "v", "q", "x", "\xc3\xa9", ""};

/* The mode FUZZ_WIRE_MODE keeps a run to: -1 for both, else 0 (Examples) or SEQUENCE_MODE. */
static int pinned_mode = -1;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *mode = getenv("FUZZ_WIRE_MODE");
    if (mode == NULL || *mode == '\0')
        return 0;
    if (strcmp(mode, "examples") == 0)
        pinned_mode = 0;
    else if (strcmp(mode, "sequence") == 0)
        pinned_mode = SEQUENCE_MODE;
    else {
        fprintf(stderr, "fuzz_wire: FUZZ_WIRE_MODE must be examples or sequence\n");
        exit(2);
    }
    return 0;
}

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

/* Checks that the string spans first .. first + n of `values` lie inside `record`. */
static void
check_spans(const qp_scratch *values, size_t first, uint64_t n, qp_span record, size_t index,
            size_t row)
{
    for (uint64_t k = first; k < first + n; k++) {
        qp_span span;
        memcpy(&span, values->data + k * sizeof span, sizeof span);
        if (span.data < record.data || span.len > record.len
            || (size_t)(span.data - record.data) > record.len - span.len)
            fail("a string span lies outside its record", index, row);
    }
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
            if (f->dtype == QP_BYTES)
                check_spans(&f->values, value, count, records[row], index, row);
            value += (size_t)count;
        }
    }
    if (value != n_values)
        fail("the scratch holds values no count accounts for", index, 0);
}

/* Checks feature list f of a SequenceExample taken from `record`. */
static void
check_list(const qp_feature *f, size_t index, qp_span record)
{
    if (f->present[0] > 1)
        fail("a list's present is not 0/1", index, 0);
    if (f->steps.len % sizeof(int64_t) != 0 || f->values.len % item_bytes(f) != 0)
        fail("a list's steps or values hold a partial item", index, 0);
    if (!f->present[0] && (f->steps.len || f->values.len))
        fail("a list absent has steps or values", index, 0);
    if (f->required && !f->present[0])
        fail("a required list is absent from a record taken", index, 0);
    uint64_t total = 0;
    for (size_t step = 0; step < f->steps.len / sizeof(int64_t); step++) {
        int64_t count;
        memcpy(&count, f->steps.data + step * sizeof count, sizeof count);
        if (count < 0 || (f->fixed_steps ? (uint64_t)count != f->size
                          : f->size ? (uint64_t)count % f->size != 0 : count != 0))
            fail("a step's count is negative or does not fit the stride", index, step);
        total += (uint64_t)count;
    }
    if (total != f->values.len / item_bytes(f))
        fail("the steps do not add up to the list's values", index, 0);
    if (f->dtype == QP_BYTES)
        check_spans(&f->values, 0, total, record, index, 0);
}

/* Reads the spec from [*p, end) into features (group 0) and, in a SequenceExample, lists
 * (group 1); returns the number of each through n. */
static void
read_spec(const uint8_t **p, const uint8_t *end, int sequence, qp_feature *groups[2],
          size_t n[2])
{
    size_t n_wanted = 1 + (**p & 3);
    int key_taken[2][8] = {{0}};
    (*p)++;
    for (size_t i = 0; i < n_wanted && end - *p >= 2; i++, *p += 2) {
        uint8_t a = (*p)[0], b = (*p)[1];
        int group = sequence && (a >> 7);
        if (key_taken[group][a & 7])
            continue;
        key_taken[group][a & 7] = 1;
        qp_feature *f = &groups[group][n[group]++];
        f->key = (const uint8_t *)KEYS[a & 7];
        f->key_len = strlen(KEYS[a & 7]);
        f->dtype = (qp_dtype)(((a >> 3) & 3) % 3);
        f->kind = group == 1 || (a >> 5) & 1 ? QP_RAGGED : QP_DENSE;
        f->fixed_steps = group == 1 && !((a >> 5) & 1);
        f->required = (a >> 6) & 1;
        f->size = b & 3;
    }
}

/* Allocates f's outputs for n_rows, of exactly the size the module gives them (a dense array
 * of rows x size, present and counts); present holds junk, which the walk must overwrite,
 * counts zeros, as the Python layer gives them. Returns 0 when an allocation fails. */
static int
allocate_outputs(qp_feature *f, size_t n_rows)
{
    size_t rows = n_rows ? n_rows : 1;
    f->present = malloc(rows);
    if (f->present != NULL)
        memset(f->present, 0xAA, rows);
    f->counts = calloc(rows, sizeof(int64_t));
    f->dense = NULL;
    if (f->kind == QP_DENSE && f->dtype != QP_BYTES) {
        f->dense_len_bytes = n_rows * (size_t)f->size * item_bytes(f);
        f->dense = malloc(f->dense_len_bytes ? f->dense_len_bytes : 1);
    }
    return f->present && f->counts && (f->dense || f->kind == QP_RAGGED
                                       || f->dtype == QP_BYTES);
}

static void
release_outputs(qp_feature *f)
{
    qp_feature_release(f);
    qp_feature_release(f);  /* safe twice, as wire.h says */
    free(f->present);
    free(f->counts);
    free(f->dense);
}

static void
require_ok(qp_walk_status status)
{
    if (status == QP_WALK_BAD_ARGUMENT)
        fail("outputs of the right size were refused", 0, 0);
    if (status != QP_WALK_OK)
        fail("the walk did not return QP_WALK_OK", 0, 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const int sequence = data[0] & SEQUENCE_MODE;
    if (pinned_mode >= 0 && sequence != pinned_mode)
        return -1;
    const uint8_t *p = data, *end = data + size;
    qp_feature features[MAX_FEATURES], lists[MAX_FEATURES];
    memset(features, 0, sizeof features);
    memset(lists, 0, sizeof lists);
    qp_feature *groups[2] = {features, lists};
    size_t n[2] = {0, 0};
    read_spec(&p, end, sequence, groups, n);

    qp_span records[MAX_RECORDS];
    size_t n_records = 0;
    while (p < end && n_records < MAX_RECORDS && !(sequence && n_records == 1)) {
        size_t len = sequence ? (size_t)(end - p) : *p++;
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
    if (sequence && n_records == 0) {  /* the empty SequenceExample */
        records[0].data = malloc(1);
        records[0].len = 0;
        n_records = records[0].data != NULL;
    }
    int ok = !sequence || n_records == 1;
    for (int group = 0; group < 2; group++) {
        for (size_t i = 0; i < n[group]; i++)
            ok = allocate_outputs(&groups[group][i], sequence ? 1 : n_records) && ok;
    }
    uint8_t *handed_back = malloc(n_records ? n_records : 1);
    if (ok && handed_back != NULL) {
        if (sequence) {
            handed_back[0] = 2;
            require_ok(qp_walk_sequence_example(records[0], features, n[0], lists, n[1],
                                                handed_back));
            if (handed_back[0] > 1)
                fail("handed_back is neither 0 nor 1", 0, 0);
            if (!handed_back[0]) {
                for (size_t i = 0; i < n[0]; i++)
                    check_feature(&features[i], i, records, 1, handed_back);
                for (size_t i = 0; i < n[1]; i++)
                    check_list(&lists[i], i, records[0]);
            }
        }
        else {
            require_ok(qp_walk_examples(records, n_records, features, n[0], handed_back));
            for (size_t i = 0; i < n[0]; i++)
                check_feature(&features[i], i, records, n_records, handed_back);
        }
    }
    free(handed_back);
    for (int group = 0; group < 2; group++) {
        for (size_t i = 0; i < n[group]; i++)
            release_outputs(&groups[group][i]);
    }
    for (size_t i = 0; i < n_records; i++)
        free((void *)records[i].data);
    return 0;
}
