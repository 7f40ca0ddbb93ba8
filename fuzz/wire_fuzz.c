/* libFuzzer target for the Example wire walk (queuepipe/_core/wire.c), no interpreter:
 *
 *     clang -g -O1 -fsanitize=fuzzer,address,undefined -Iqueuepipe/_core \
 *         fuzz/wire_fuzz.c queuepipe/_core/wire.c -o /tmp/wire_fuzz
 *     /tmp/wire_fuzz -max_total_time=60 -max_len=4096
 *
 * An input that starts with 's' is walked as one SequenceExample (the rest of it). Any other
 * is cut into records at each "\xff\xfe\xfd" (so one input is a batch of up to 8),
 * walked with six features of every kind, and what the walk returns is checked against its
 * promises (wire.h): every string span lies inside its own record, ragged scratch holds
 * exactly the values the counts say, counts fit the feature's shape, and a handed-back record
 * left nothing. ASan and UBSan catch any read or write out of bounds on the way. Values are
 * checked against the pure path by fuzz/fuzz_example.py; this target looks for crashes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define MAX_RECORDS 8
#define N_FEATURES 6

static void
check(int ok)
{
    if (!ok)
        abort();
}

/* Whether the span lies inside one of the records. */
static int
inside(qp_span span, const qp_span *records, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (span.data >= records[i].data && span.len <= records[i].len
            && (size_t)(span.data - records[i].data) <= records[i].len - span.len)
            return 1;
    }
    return 0;
}

/* The input as one SequenceExample: context "i" (dense int64 [2]) and "s" (ragged bytes),
 * lists "v" (VarLen int64) and "q" (fixed steps of 2 floats, required). */
static void
walk_sequence(const uint8_t *data, size_t size)
{
    qp_span record = {data, size};
    qp_feature context[2], lists[2];
    int64_t dense_i[2], counts[4] = {0, 0, 0, 0};
    uint8_t present[4] = {0, 0, 0, 0}, handed_back = 2;
    memset(context, 0, sizeof context);
    memset(lists, 0, sizeof lists);
    context[0] = (qp_feature){.key = (const uint8_t *)"i", .key_len = 1, .dtype = QP_INT64,
                              .kind = QP_DENSE, .size = 2, .dense = (uint8_t *)dense_i,
                              .dense_len_bytes = sizeof dense_i};
    context[1] = (qp_feature){.key = (const uint8_t *)"s", .key_len = 1, .dtype = QP_BYTES,
                              .kind = QP_RAGGED, .size = 1};
    lists[0] = (qp_feature){.key = (const uint8_t *)"v", .key_len = 1, .dtype = QP_INT64,
                            .kind = QP_RAGGED, .size = 1};
    lists[1] = (qp_feature){.key = (const uint8_t *)"q", .key_len = 1, .dtype = QP_FLOAT,
                            .kind = QP_RAGGED, .size = 2, .fixed_steps = 1, .required = 1};
    for (int f = 0; f < 4; f++) {
        qp_feature *feature = f < 2 ? &context[f] : &lists[f - 2];
        feature->present = &present[f];
        feature->counts = &counts[f];
    }
    check(qp_walk_sequence_example(record, context, 2, lists, 2, &handed_back) == QP_WALK_OK);
    check(handed_back <= 1);
    if (!handed_back) {
        check(context[1].values.len == (uint64_t)counts[1] * sizeof(qp_span));
        for (size_t i = 0; i < context[1].values.len / sizeof(qp_span); i++) {
            qp_span span;
            memcpy(&span, context[1].values.data + i * sizeof span, sizeof span);
            check(inside(span, &record, 1));
        }
        for (int l = 0; l < 2; l++) {
            uint64_t total = 0;
            check(lists[l].steps.len % sizeof(int64_t) == 0);
            for (size_t step = 0; step < lists[l].steps.len / sizeof(int64_t); step++) {
                int64_t count;
                memcpy(&count, lists[l].steps.data + step * sizeof count, sizeof count);
                check(count >= 0 && (!lists[l].fixed_steps || (uint64_t)count == lists[l].size));
                total += (uint64_t)count;
            }
            check(lists[l].values.len == total * (l == 0 ? sizeof(int64_t) : sizeof(float)));
        }
    }
    for (int f = 0; f < 2; f++) {
        qp_feature_release(&context[f]);
        qp_feature_release(&lists[f]);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size && data[0] == 's') {  /* a SequenceExample after the mode byte */
        walk_sequence(data + 1, size - 1);
        return 0;
    }
    qp_span records[MAX_RECORDS];
    size_t n = 0;
    const uint8_t *start = data, *end = data + size;
    for (const uint8_t *p = data; n < MAX_RECORDS - 1 && p + 3 <= end; p++) {
        if (p[0] == 0xff && p[1] == 0xfe && p[2] == 0xfd) {
            records[n].data = start;
            records[n++].len = (size_t)(p - start);
            start = p + 3;
            p += 2;
        }
    }
    records[n].data = start;
    records[n++].len = (size_t)(end - start);

    static const struct {
        const char *key;
        qp_dtype dtype;
        qp_kind kind;
        uint64_t size;
        int required;
    } spec[N_FEATURES] = {
        {"i", QP_INT64, QP_DENSE, 2, 0}, {"f", QP_FLOAT, QP_DENSE, 1, 1},
        {"s", QP_BYTES, QP_RAGGED, 1, 0}, {"v", QP_INT64, QP_RAGGED, 1, 0},
        {"q", QP_FLOAT, QP_RAGGED, 2, 0}, {"x", QP_BYTES, QP_DENSE, 1, 0},
    };
    qp_feature features[N_FEATURES];
    int64_t dense_i[MAX_RECORDS * 2];
    float dense_f[MAX_RECORDS];
    uint8_t present[N_FEATURES][MAX_RECORDS];
    int64_t counts[N_FEATURES][MAX_RECORDS];
    uint8_t handed_back[MAX_RECORDS];
    memset(features, 0, sizeof features);
    memset(present, 0, sizeof present);
    memset(counts, 0, sizeof counts);
    for (int f = 0; f < N_FEATURES; f++) {
        features[f].key = (const uint8_t *)spec[f].key;
        features[f].key_len = strlen(spec[f].key);
        features[f].dtype = spec[f].dtype;
        features[f].kind = spec[f].kind;
        features[f].size = spec[f].size;
        features[f].required = spec[f].required;
        features[f].present = present[f];
        features[f].counts = counts[f];
    }
    features[0].dense = (uint8_t *)dense_i;
    features[0].dense_len_bytes = n * 2 * sizeof(int64_t);
    features[1].dense = (uint8_t *)dense_f;
    features[1].dense_len_bytes = n * sizeof(float);

    qp_walk_status status = qp_walk_examples(records, n, features, N_FEATURES, handed_back);
    check(status == QP_WALK_OK);
    for (int f = 0; f < N_FEATURES; f++) {
        qp_feature *feature = &features[f];
        uint64_t values = 0;
        for (size_t r = 0; r < n; r++) {
            check(handed_back[r] <= 1);
            if (handed_back[r]) {
                check(!present[f][r] && counts[f][r] == 0);
                continue;
            }
            if (feature->kind == QP_RAGGED) {
                check(counts[f][r] >= 0 && (feature->size == 0
                                            ? counts[f][r] == 0
                                            : (uint64_t)counts[f][r] % feature->size == 0));
                values += (uint64_t)counts[f][r];
            } else if (feature->dtype == QP_BYTES && present[f][r]) {
                values += feature->size;
            }
        }
        size_t width = feature->dtype == QP_BYTES ? sizeof(qp_span)
                       : feature->dtype == QP_INT64 ? sizeof(int64_t) : sizeof(float);
        if (feature->kind == QP_RAGGED || feature->dtype == QP_BYTES)
            check(feature->values.len == values * width);
        if (feature->dtype == QP_BYTES) {
            for (uint64_t i = 0; i < values; i++) {
                qp_span span;
                memcpy(&span, feature->values.data + i * sizeof span, sizeof span);
                check(inside(span, records, n));
            }
        }
        qp_feature_release(feature);
    }
    return 0;
}
