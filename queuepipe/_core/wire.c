/* The wire walk of serialized Examples (see wire.h for what it promises).
 *
 * The grammar it takes, every field length-delimited (wire type 2) and its tag one byte:
 *
 *     Example    (0x0A len Features)?        at most once: a second one would be merged
 *     Features   (0x0A len entry)*
 *     entry      0x0A len key  0x12 len Feature      exactly these two, in this order
 *     Feature    (0x0A | 0x12 | 0x1A) len list        bytes, float, int64: exactly one
 *     list       0x0A len payload                     floats and int64s packed, one chunk;
 *                (0x0A len bytes)*                    strings one field each
 *
 * The walk is a fixed four levels deep (no recursion). Every length is compared, as an
 * unsigned 64-bit number, with the bytes left before a pointer moves; every write goes
 * through a bound. A record that strays from the grammar is handed back (see wire.h).
 */
#include "wire.h"

#include "endian.h"

#include <stdlib.h>
#include <string.h>

/* The tags of the grammar: field number << 3 | wire type 2. */
#define TAG_FIELD1 0x0A  /* Example.features, Features.feature, entry key, list values */
#define TAG_FIELD2 0x12  /* entry value */
#define TAG_BYTES_LIST 0x0A
#define TAG_FLOAT_LIST 0x12
#define TAG_INT64_LIST 0x1A

/* What one step of the walk decided. */
typedef enum { STEP_TAKE = 0, STEP_HAND_BACK, STEP_NO_MEMORY } step;

/* --- Reading the wire format ------------------------------------------------------------ */

/* Reads a varint of at most max_bytes bytes at *p, never reading at or past end. A tenth
 * byte holding bits past the 64th is refused (protobuf would drop them: the pure path
 * decides such a record). Returns 1 and moves *p past it, or 0. */
static inline int
read_varint(const uint8_t **p, const uint8_t *end, int max_bytes, uint64_t *out)
{
    const uint8_t *q = *p;
    if (q < end && *q < 0x80) {  /* one byte, the common case */
        *out = *q;
        *p = q + 1;
        return 1;
    }
    if (max_bytes >= 2 && end - q >= 2 && q[1] < 0x80) {  /* two: ids up to 16383 */
        *out = (uint64_t)(q[0] & 0x7F) | (uint64_t)q[1] << 7;
        *p = q + 2;
        return 1;
    }
    uint64_t value = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (q == end)
            return 0;
        uint8_t byte = *q++;
        if (i == QP_MAX_VARINT_BYTES - 1 && byte > 1)
            return 0;
        value |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            *p = q;
            *out = value;
            return 1;
        }
    }
    return 0;
}

/* Reads the tag `tag` and a length at *p; on success the field's payload is
 * [*start, *stop) and *p is *stop. Returns 0 for another tag, a bad varint or a payload
 * that passes end. Every tag of the grammar is one byte: a tag written in more (an
 * overlong varint, which protobuf reads as the same field) is another tag here, and the
 * record goes to the pure path. A length of one byte, the common case, is read inline. */
static inline int
read_field(const uint8_t **p, const uint8_t *end, uint8_t tag,
           const uint8_t **start, const uint8_t **stop)
{
    const uint8_t *q = *p;
    uint64_t len_bytes;
    if (end - q < 2 || q[0] != tag)
        return 0;
    if (q[1] < 0x80) {
        len_bytes = q[1];
        q += 2;
    } else {
        q++;
        if (!read_varint(&q, end, QP_MAX_VARINT_BYTES, &len_bytes))
            return 0;
    }
    if (len_bytes > (uint64_t)(end - q))
        return 0;
    *start = q;
    *stop = q + len_bytes;
    *p = *stop;
    return 1;
}

/* --- Scratch ------------------------------------------------------------------------------ */

/* Grows s to hold need bytes (allocating it on first use, even for none: a NULL data
 * pointer is never offset or passed to memcpy). Returns 0 when it cannot. */
static int
scratch_grow(qp_scratch *s, size_t need)
{
    size_t cap = s->cap ? s->cap : 256;
    while (cap < need) {
        if (__builtin_mul_overflow(cap, (size_t)2, &cap))
            return 0;
    }
    uint8_t *grown = realloc(s->data, cap);
    if (grown == NULL)
        return 0;
    s->data = grown;
    s->cap = cap;
    return 1;
}

/* Makes room for more_bytes more bytes in s. Returns 0 when it cannot. */
static inline int
scratch_reserve(qp_scratch *s, size_t more_bytes)
{
    size_t need;
    if (__builtin_add_overflow(s->len, more_bytes, &need))
        return 0;
    if (need <= s->cap && s->data != NULL)
        return 1;
    return scratch_grow(s, need);
}

void
qp_feature_release(qp_feature *feature)
{
    free(feature->values.data);
    feature->values.data = NULL;
    feature->values.len = feature->values.cap = 0;
    free(feature->steps.data);
    feature->steps.data = NULL;
    feature->steps.len = feature->steps.cap = 0;
}

/* --- The table of requested keys ---------------------------------------------------------- */

/* A slot of the table: a requested key's first 8 bytes as a word (zero-filled past a
 * shorter key), its length, and its feature's index (-1: an empty slot). A key of at most 8
 * bytes is compared as one word; a longer one, past its first 8 bytes, byte by byte. */
typedef struct {
    uint64_t word;
    size_t len;
    int32_t index;
} key_slot;

typedef struct {
    key_slot *slots;  /* a power of two of them, at most half used: every probe ends */
    size_t mask;
    unsigned shift;   /* 64 - log2(number of slots): a hash's top bits pick the slot */
} key_table;

/* The first (up to) 8 bytes of a key, little-endian, zero-filled; readable_end bounds the
 * bytes that may be read (the key's own end, or past it within the same buffer): where 8
 * bytes are readable it is one load, the bytes past the key masked off. */
static inline uint64_t
key_word(const uint8_t *key, size_t len, const uint8_t *readable_end)
{
    if (readable_end - key >= 8) {
        uint64_t word = qp_load_le64(key);
        return len >= 8 ? word : word & ((UINT64_C(1) << (8 * len)) - 1);
    }
    uint64_t word = 0;
    size_t n = len < 8 ? len : 8;
    for (size_t i = 0; i < n; i++)
        word |= (uint64_t)key[i] << (8 * i);
    return word;
}

/* The slot where a key's probe starts: Fibonacci hashing of its word and length, with the
 * bytes past the first 8 mixed in (FNV-1a) first. */
static inline size_t
key_slot_of(const key_table *table, const uint8_t *key, size_t len, uint64_t word)
{
    uint64_t h = word ^ len;
    for (size_t i = 8; i < len; i++)
        h = (h ^ key[i]) * 1099511628211ull;
    return (size_t)((h * 0x9E3779B97F4A7C15ull) >> table->shift);
}

/* Whether a[0 .. len) equals b[0 .. len): a loop, cheaper than a call of memcmp for the
 * short keys of a spec. */
static inline int
same_bytes(const uint8_t *a, const uint8_t *b, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (a[i] != b[i])
            return 0;
    }
    return 1;
}

static int
table_build(key_table *table, const qp_feature *features, size_t n_features)
{
    size_t n_slots = 8;
    unsigned bits = 3;
    if (n_features > INT32_MAX)
        return 0;
    while (n_slots / 2 < n_features) {
        if (__builtin_mul_overflow(n_slots, (size_t)2, &n_slots) || bits == 63)
            return 0;
        bits++;
    }
    size_t n_bytes;
    if (__builtin_mul_overflow(n_slots, sizeof(key_slot), &n_bytes))
        return 0;
    table->slots = malloc(n_bytes);
    if (table->slots == NULL)
        return 0;
    table->mask = n_slots - 1;
    table->shift = 64 - bits;
    for (size_t i = 0; i < n_slots; i++)
        table->slots[i].index = -1;
    for (size_t f = 0; f < n_features; f++) {
        const qp_feature *feature = &features[f];
        uint64_t word = key_word(feature->key, feature->key_len,
                                 feature->key + feature->key_len);
        size_t slot = key_slot_of(table, feature->key, feature->key_len, word);
        while (table->slots[slot].index >= 0)
            slot = (slot + 1) & table->mask;
        table->slots[slot] = (key_slot){word, feature->key_len, (int32_t)f};
    }
    return 1;
}

/* The index of the feature whose key is [key, key + len), or -1; bytes up to readable_end
 * may be read (see key_word). */
static inline int32_t
table_find(const key_table *table, const qp_feature *features,
           const uint8_t *key, size_t len, const uint8_t *readable_end)
{
    uint64_t word = key_word(key, len, readable_end);
    size_t slot = key_slot_of(table, key, len, word);
    for (;;) {
        const key_slot *s = &table->slots[slot];
        if (s->index < 0)
            return -1;
        if (s->word == word && s->len == len
            && (len <= 8 || same_bytes(features[s->index].key + 8, key + 8, len - 8)))
            return s->index;
        slot = (slot + 1) & table->mask;
    }
}

/* --- Lists -------------------------------------------------------------------------------- */

/* Decodes the packed varints [p, end) into out[0 .. cap) (values past cap are counted, not
 * written); *count is how many there were. Returns 0 for a malformed varint. */
static inline int
decode_varints(const uint8_t *p, const uint8_t *end, uint8_t *out, uint64_t cap,
               uint64_t *count)
{
    uint64_t n = 0;
    while (p < end) {
        uint64_t value;
        if (!read_varint(&p, end, QP_MAX_VARINT_BYTES, &value))
            return 0;
        if (n < cap)
            memcpy(out + n * sizeof(int64_t), &value, sizeof(int64_t));
        n++;
    }
    *count = n;
    return 1;
}

/* Copies n little-endian float32 values from src to dst in the host's order. */
static void
copy_floats(uint8_t *dst, const uint8_t *src, uint64_t n)
{
    if (n == 0)
        return;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (uint64_t i = 0; i < n; i++) {
        dst[4 * i] = src[4 * i + 3];
        dst[4 * i + 1] = src[4 * i + 2];
        dst[4 * i + 2] = src[4 * i + 1];
        dst[4 * i + 3] = src[4 * i];
    }
#else
    if (n == 1)
        memcpy(dst, src, 4);  /* a copy the compiler inlines */
    else
        memcpy(dst, src, (size_t)(n * 4));
#endif
}

/* Whether count values fit the feature's shape; else the pure path reports the error. */
static int
count_fits(const qp_feature *f, uint64_t count)
{
    if (f->kind == QP_DENSE)
        return count == f->size;
    return f->size ? count % f->size == 0 : count == 0;
}

/* The payload [p, end) of a packed numeric list (the bytes after the list's own tag and
 * length); empty when the list holds no field. Returns 0 when the list is not one packed
 * chunk. */
static int
packed_payload(const uint8_t *p, const uint8_t *end, const uint8_t **start,
               const uint8_t **stop)
{
    if (p == end) {
        *start = *stop = p;
        return 1;
    }
    return read_field(&p, end, TAG_FIELD1, start, stop) && p == end;
}

/* Takes record `row`'s int64 list [p, end) for f. */
static step
take_int64(qp_feature *f, size_t row, const uint8_t *p, const uint8_t *end)
{
    const uint8_t *start, *stop;
    if (!packed_payload(p, end, &start, &stop))
        return STEP_HAND_BACK;
    if (f->kind == QP_DENSE) {
        uint64_t count;
        uint8_t *out = f->dense + row * f->size * sizeof(int64_t);
        if (!decode_varints(start, stop, out, f->size, &count) || count != f->size)
            return STEP_HAND_BACK;
        return STEP_TAKE;
    }
    /* A value takes a byte at least: room for as many values as the payload has bytes
     * bounds the decode, which writes no more. */
    size_t most = (size_t)(stop - start), room;
    if (__builtin_mul_overflow(most, sizeof(int64_t), &room))
        return STEP_HAND_BACK;
    if (!scratch_reserve(&f->values, room))
        return STEP_NO_MEMORY;
    uint64_t count;
    if (!decode_varints(start, stop, f->values.data + f->values.len, most, &count)
        || count > most || !count_fits(f, count))
        return STEP_HAND_BACK;
    f->values.len += (size_t)count * sizeof(int64_t);
    f->counts[row] = (int64_t)count;
    return STEP_TAKE;
}

/* Takes record `row`'s float list [p, end) for f. */
static step
take_float(qp_feature *f, size_t row, const uint8_t *p, const uint8_t *end)
{
    const uint8_t *start, *stop;
    if (!packed_payload(p, end, &start, &stop))
        return STEP_HAND_BACK;
    size_t len_bytes = (size_t)(stop - start);
    if (len_bytes % 4 != 0)
        return STEP_HAND_BACK;
    uint64_t count = len_bytes / 4;
    if (!count_fits(f, count))
        return STEP_HAND_BACK;
    if (f->kind == QP_DENSE) {
        copy_floats(f->dense + row * f->size * 4, start, count);
        return STEP_TAKE;
    }
    if (!scratch_reserve(&f->values, len_bytes))
        return STEP_NO_MEMORY;
    copy_floats(f->values.data + f->values.len, start, count);
    f->values.len += len_bytes;
    f->counts[row] = (int64_t)count;
    return STEP_TAKE;
}

/* Takes record `row`'s bytes list [p, end) for f: one span per value. */
static step
take_bytes(qp_feature *f, size_t row, const uint8_t *p, const uint8_t *end)
{
    uint64_t count = 0;
    while (p < end) {
        const uint8_t *start, *stop;
        if (!read_field(&p, end, TAG_FIELD1, &start, &stop))
            return STEP_HAND_BACK;
        if (f->kind == QP_DENSE && count >= f->size)
            return STEP_HAND_BACK;
        if (!scratch_reserve(&f->values, sizeof(qp_span)))
            return STEP_NO_MEMORY;
        qp_span span = {start, (size_t)(stop - start)};
        memcpy(f->values.data + f->values.len, &span, sizeof span);
        f->values.len += sizeof span;
        count++;
    }
    if (!count_fits(f, count))
        return STEP_HAND_BACK;
    if (f->kind == QP_RAGGED)
        f->counts[row] = (int64_t)count;
    return STEP_TAKE;
}

/* Takes the Feature [p, end) of record `row` for f: exactly one list, of f's type. A Feature
 * with no list set counts as absent, as TF skips it (present[row] stays 0). */
static step
take_feature(qp_feature *f, size_t row, const uint8_t *p, const uint8_t *end)
{
    static const uint8_t list_tag[] = {
        [QP_INT64] = TAG_INT64_LIST, [QP_FLOAT] = TAG_FLOAT_LIST, [QP_BYTES] = TAG_BYTES_LIST};
    const uint8_t *start, *stop;
    if (p == end)
        return STEP_TAKE;
    if (!read_field(&p, end, list_tag[f->dtype], &start, &stop) || p != end)
        return STEP_HAND_BACK;  /* another list type, or more than one list */
    step taken;
    switch (f->dtype) {
    case QP_INT64:
        taken = take_int64(f, row, start, stop);
        break;
    case QP_FLOAT:
        taken = take_float(f, row, start, stop);
        break;
    default:
        taken = take_bytes(f, row, start, stop);
        break;
    }
    if (taken == STEP_TAKE)
        f->present[row] = 1;
    return taken;
}

/* --- Records ------------------------------------------------------------------------------ */

/* How a map entry's value is taken for a requested key: take_feature, or for a
 * SequenceExample take_context or take_list. */
typedef step (*take_value)(qp_feature *f, size_t row, const uint8_t *p, const uint8_t *end);

/* Walks the map entries [p, end) of record `row`, each requested key's value taken by
 * `take`; touched[] collects the features it took (each once: a key twice hands the record
 * back), *n_touched their number. */
static step
walk_entries(const key_table *table, qp_feature *features, size_t row,
             const uint8_t *p, const uint8_t *end, int32_t *touched, size_t *n_touched,
             take_value take)
{
    while (p < end) {
        const uint8_t *entry, *entry_end, *key, *key_end, *value, *value_end;
        if (!read_field(&p, end, TAG_FIELD1, &entry, &entry_end))
            return STEP_HAND_BACK;
        if (!read_field(&entry, entry_end, TAG_FIELD1, &key, &key_end)
            || !read_field(&entry, entry_end, TAG_FIELD2, &value, &value_end)
            || entry != entry_end)
            return STEP_HAND_BACK;
        int32_t index = table_find(table, features, key, (size_t)(key_end - key), end);
        if (index < 0)
            continue;  /* not requested: never looked inside */
        qp_feature *f = &features[index];
        if (f->seen_in == row + 1)
            return STEP_HAND_BACK;
        f->seen_in = row + 1;
        f->record_start = f->values.len;
        touched[(*n_touched)++] = index;
        step taken = take(f, row, value, value_end);
        if (taken != STEP_TAKE)
            return taken;
    }
    return STEP_TAKE;
}

/* Walks record `row`; the features it does not hold (absent, or a Feature with no list) get
 * no values (RAGGED: their count stays 0) or are left to the caller's default (DENSE); a
 * required one (the features `required`) absent hands the record back. */
static step
walk_record(const key_table *table, qp_feature *features, const int32_t *required,
            size_t n_required, size_t row, qp_span record, int32_t *touched, size_t *n_touched)
{
    const uint8_t *p = record.data, *end = record.data + record.len;
    int seen_features = 0;
    while (p < end) {
        const uint8_t *start, *stop;
        if (seen_features || !read_field(&p, end, TAG_FIELD1, &start, &stop))
            return STEP_HAND_BACK;
        seen_features = 1;
        step taken = walk_entries(table, features, row, start, stop, touched, n_touched,
                                  take_feature);
        if (taken != STEP_TAKE)
            return taken;
    }
    for (size_t i = 0; i < n_required; i++) {
        if (!features[required[i]].present[row])
            return STEP_HAND_BACK;
    }
    return STEP_TAKE;
}

/* Takes back what a handed-back record left in the features it touched. */
static void
undo_record(qp_feature *features, size_t row, const int32_t *touched, size_t n_touched)
{
    for (size_t i = 0; i < n_touched; i++) {
        qp_feature *f = &features[touched[i]];
        f->values.len = f->record_start;
        f->present[row] = 0;
        if (f->kind == QP_RAGGED)
            f->counts[row] = 0;
    }
}

static int
outputs_fit(const qp_feature *f, size_t n_records)
{
    size_t n_values, n_bytes;
    if (f->kind != QP_DENSE || f->dtype == QP_BYTES)
        return 1;
    if (__builtin_mul_overflow(n_records, (size_t)f->size, &n_values)
        || __builtin_mul_overflow(n_values, (size_t)(f->dtype == QP_INT64 ? 8 : 4), &n_bytes))
        return 0;
    return f->size == (uint64_t)(size_t)f->size && n_bytes <= f->dense_len_bytes;
}

qp_walk_status
qp_walk_examples(const qp_span *records, size_t n_records, qp_feature *features,
                 size_t n_features, uint8_t *handed_back)
{
    size_t count_bytes;
    if (__builtin_mul_overflow(n_records, sizeof(int64_t), &count_bytes))
        return QP_WALK_BAD_ARGUMENT;
    for (size_t i = 0; i < n_features; i++) {
        if (!outputs_fit(&features[i], n_records))
            return QP_WALK_BAD_ARGUMENT;
        features[i].seen_in = 0;
        /* walk_record reads present[row] back: it holds only what this walk wrote; a count
         * stays 0 where no record sets it. */
        if (n_records > 0) {
            memset(features[i].present, 0, n_records);
            if (features[i].kind == QP_RAGGED)
                memset(features[i].counts, 0, count_bytes);
        }
    }
    key_table table;
    if (!table_build(&table, features, n_features))
        return QP_WALK_NO_MEMORY;
    /* touched: the features a record took (to undo); required: those it must hold. */
    size_t n_bytes;
    int32_t *touched = NULL;
    if (!__builtin_mul_overflow(n_features ? n_features : 1, 2 * sizeof(int32_t), &n_bytes))
        touched = malloc(n_bytes);
    if (touched == NULL) {
        free(table.slots);
        return QP_WALK_NO_MEMORY;
    }
    int32_t *required = touched + n_features;
    size_t n_required = 0;
    for (size_t i = 0; i < n_features; i++) {
        if (features[i].kind == QP_DENSE && features[i].required)
            required[n_required++] = (int32_t)i;
    }
    qp_walk_status status = QP_WALK_OK;
    for (size_t row = 0; row < n_records; row++) {
        size_t n_touched = 0;
        /* The records are separate buffers: the next one's start is fetched into the cache
         * while this one is walked (within a record the hardware fetches ahead itself). */
        if (row + 1 < n_records)
            __builtin_prefetch(records[row + 1].data);
        step taken = walk_record(&table, features, required, n_required, row, records[row],
                                 touched, &n_touched);
        if (taken == STEP_NO_MEMORY) {
            status = QP_WALK_NO_MEMORY;
            break;
        }
        handed_back[row] = taken == STEP_HAND_BACK;
        if (taken == STEP_HAND_BACK)
            undo_record(features, row, touched, n_touched);
    }
    free(touched);
    free(table.slots);
    return status;
}

qp_walk_status
qp_sparse_table(const int64_t *counts, size_t n_features, size_t n_records, size_t per_batch,
                int64_t *table, size_t n_table)
{
    if (per_batch == 0 ? n_records != 0 : n_records % per_batch != 0)
        return QP_WALK_BAD_ARGUMENT;
    size_t batches = per_batch ? n_records / per_batch : 0, cells;
    if (__builtin_mul_overflow(batches, n_features, &cells)
        || __builtin_mul_overflow(cells, (size_t)QP_SPARSE_TABLE_COLUMNS, &cells)
        || cells != n_table || per_batch > INT64_MAX)
        return QP_WALK_BAD_ARGUMENT;
    for (size_t p = 0; p < batches; p++) {
        int64_t begin = 0;
        for (size_t k = 0; k < n_features; k++) {
            const int64_t *count = counts + k * n_records + p * per_batch;
            int64_t total = 0, longest = 0, first = 0;
            for (size_t i = 0; i < per_batch; i++) {
                if (count[i] < 0 || count[i] > INT64_MAX - total)
                    return QP_WALK_BAD_ARGUMENT;
                total += count[i];
                if (count[i] > longest)
                    longest = count[i];
            }
            if (p > 0) {
                const int64_t *before =
                    table + ((p - 1) * n_features + k) * QP_SPARSE_TABLE_COLUMNS;
                if (before[4] > INT64_MAX - (before[3] - before[2]))
                    return QP_WALK_BAD_ARGUMENT;
                first = before[4] + (before[3] - before[2]);
            }
            if (begin > INT64_MAX - total)
                return QP_WALK_BAD_ARGUMENT;
            int64_t *row = table + (p * n_features + k) * QP_SPARSE_TABLE_COLUMNS;
            row[0] = (int64_t)per_batch;
            row[1] = longest;
            row[2] = begin;
            row[3] = begin + total;
            row[4] = first;
            begin += total;
        }
    }
    return QP_WALK_OK;
}

/* --- SequenceExamples ------------------------------------------------------------------- */

/* A context Feature: as take_feature, but one with no list is handed back (the context reads
 * it as present with no values, which the pure path decides). */
static step
take_context(qp_feature *f, size_t row, const uint8_t *p, const uint8_t *end)
{
    return p == end ? STEP_HAND_BACK : take_feature(f, row, p, end);
}

/* One step of a feature list: a Feature whose values go to f's scratch and whose count goes
 * to f->steps; a step with no list, or (fixed_steps) another count than f->size, is handed
 * back. */
static step
take_step(qp_feature *f, const uint8_t *p, const uint8_t *end)
{
    int64_t count = 0;
    uint8_t held = 0;
    int64_t *counts = f->counts;
    uint8_t *present = f->present;
    f->counts = &count;  /* take_feature writes row 0 of these */
    f->present = &held;
    step taken = p == end ? STEP_HAND_BACK : take_feature(f, 0, p, end);
    f->counts = counts;
    f->present = present;
    if (taken != STEP_TAKE)
        return taken;
    if (f->fixed_steps && (uint64_t)count != f->size)
        return STEP_HAND_BACK;
    if (!scratch_reserve(&f->steps, sizeof count))
        return STEP_NO_MEMORY;
    memcpy(f->steps.data + f->steps.len, &count, sizeof count);
    f->steps.len += sizeof count;
    return STEP_TAKE;
}

/* A FeatureList [p, end): its steps, one Feature each. */
static step
take_list(qp_feature *f, size_t row, const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        const uint8_t *start, *stop;
        if (!read_field(&p, end, TAG_FIELD1, &start, &stop))
            return STEP_HAND_BACK;
        step taken = take_step(f, start, stop);
        if (taken != STEP_TAKE)
            return taken;
    }
    f->present[row] = 1;
    return STEP_TAKE;
}

/* Walks the SequenceExample [p, end) with both key tables. */
static step
walk_sequence(const key_table *tables, qp_feature *context, size_t n_context,
              qp_feature *lists, size_t n_lists, const uint8_t *p, const uint8_t *end,
              int32_t *touched)
{
    int seen[2] = {0, 0};
    while (p < end) {
        const uint8_t *start, *stop;
        int which;
        if (read_field(&p, end, TAG_FIELD1, &start, &stop))
            which = 0;
        else if (read_field(&p, end, TAG_FIELD2, &start, &stop))
            which = 1;
        else
            return STEP_HAND_BACK;  /* another field, or malformed */
        if (seen[which])
            return STEP_HAND_BACK;  /* protobuf would merge the two */
        seen[which] = 1;
        size_t n_touched = 0;
        step taken = which == 0
            ? walk_entries(&tables[0], context, 0, start, stop, touched, &n_touched,
                           take_context)
            : walk_entries(&tables[1], lists, 0, start, stop, touched, &n_touched, take_list);
        if (taken != STEP_TAKE)
            return taken;
    }
    for (size_t i = 0; i < n_context; i++) {
        qp_feature *f = &context[i];
        if (f->present[0])
            continue;
        if (f->kind == QP_DENSE && f->required)
            return STEP_HAND_BACK;
        if (f->kind == QP_RAGGED)
            f->counts[0] = 0;
    }
    for (size_t i = 0; i < n_lists; i++) {
        if (!lists[i].present[0] && lists[i].required)
            return STEP_HAND_BACK;
    }
    return STEP_TAKE;
}

qp_walk_status
qp_walk_sequence_example(qp_span record, qp_feature *context, size_t n_context,
                         qp_feature *lists, size_t n_lists, uint8_t *handed_back)
{
    for (size_t i = 0; i < n_context; i++) {
        if (!outputs_fit(&context[i], 1))
            return QP_WALK_BAD_ARGUMENT;
        context[i].seen_in = 0;
        context[i].present[0] = 0;  /* read back below: it holds only what this walk wrote */
    }
    for (size_t i = 0; i < n_lists; i++) {
        if (lists[i].kind != QP_RAGGED)
            return QP_WALK_BAD_ARGUMENT;
        lists[i].seen_in = 0;
        lists[i].present[0] = 0;
    }
    key_table tables[2] = {{NULL, 0, 0}, {NULL, 0, 0}};
    size_t most = n_context > n_lists ? n_context : n_lists;
    int32_t *touched = malloc((most ? most : 1) * sizeof(int32_t));
    qp_walk_status status = QP_WALK_NO_MEMORY;
    if (touched != NULL && table_build(&tables[0], context, n_context)
        && table_build(&tables[1], lists, n_lists)) {
        step taken = walk_sequence(tables, context, n_context, lists, n_lists, record.data,
                                   record.data + record.len, touched);
        if (taken != STEP_NO_MEMORY) {
            *handed_back = taken == STEP_HAND_BACK;
            status = QP_WALK_OK;
        }
    }
    free(touched);
    free(tables[0].slots);
    free(tables[1].slots);
    return status;
}
