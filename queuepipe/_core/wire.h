/* The wire walk of serialized Examples: pure C, no Python.h, so that it can be tested and
 * fuzzed without an interpreter.
 *
 * qp_walk_examples() walks a chunk of records, Example -> Features -> map entries, keeping
 * views into the input (no copies) and decoding only the requested keys (a hash table of the
 * spec's keys, built once per call). Dense int64/float values go straight into the caller's
 * [n_records * size] arrays; ragged values and every string (as a span into its record) go
 * to per-feature scratch, record after record.
 *
 * It takes only the plain encoding of a record that parses cleanly with the spec. Anything
 * else -- an unknown field, a list in several chunks or unpacked, a requested key twice,
 * another list type than the spec's, a wrong count, a required feature absent, malformed
 * bytes -- marks the record "handed back": none of its values are kept, and the caller's pure
 * path decides that record's values or its error. So the walk never has to reproduce an
 * error message, and both paths agree on every input. A Feature with no list set counts as
 * absent, as TF skips it.
 */
#ifndef QUEUEPIPE_WIRE_H
#define QUEUEPIPE_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* protobuf's limit: a varint is at most 10 bytes. (The walk takes every tag in one byte.) */
#define QP_MAX_VARINT_BYTES 10

typedef enum { QP_INT64 = 0, QP_FLOAT = 1, QP_BYTES = 2 } qp_dtype;

/* DENSE: a FixedLenFeature, exactly `size` values per record. RAGGED: a VarLenFeature
 * (stride 1) or a FixedLenSequenceFeature (a multiple of its stride `size`). */
typedef enum { QP_DENSE = 0, QP_RAGGED = 1 } qp_kind;

typedef enum {
    QP_WALK_OK = 0,        /* every record walked: accepted or handed back */
    QP_WALK_NO_MEMORY,     /* scratch could not grow: nothing is usable */
    QP_WALK_BAD_ARGUMENT,  /* a dense output too small for n_records * size values */
} qp_walk_status;

/* A view into a record: a record itself, or one string value. */
typedef struct {
    const uint8_t *data;
    size_t len;
} qp_span;

/* A growable byte buffer owned by the walk; free with qp_feature_release(). */
typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
} qp_scratch;

typedef struct {
    /* The spec, set by the caller. */
    const uint8_t *key;
    size_t key_len;
    qp_dtype dtype;
    qp_kind kind;
    uint64_t size;     /* DENSE: values per record; RAGGED: the stride (0 allowed) */
    int required;      /* DENSE: a record without the feature is handed back */
    /* Outputs, allocated by the caller (n_records entries each unless said). */
    uint8_t *dense;    /* DENSE int64/float: n_records * size values, row i at i * size */
    size_t dense_len_bytes;
    uint8_t *present;  /* 1 where an accepted record held the feature, else 0 (all written) */
    int64_t *counts;   /* RAGGED: the number of values of each accepted record, else 0 */
    /* Outputs owned by the walk: RAGGED int64/float values of the accepted records, in record
     * order; for QP_BYTES, a qp_span per value (DENSE or RAGGED) of the accepted records. */
    qp_scratch values;
    /* Feature lists (qp_walk_sequence_example) only: fixed_steps, set by the caller, makes
     * every step hold exactly `size` values (a FixedLenSequenceFeature; else a VarLenFeature),
     * and `steps` gets each step's count, an int64 per step. */
    int fixed_steps;
    qp_scratch steps;
    /* Walk state. */
    size_t seen_in;       /* 1 + the index of the record that last held the key */
    size_t record_start;  /* values.len when that record first touched the feature */
} qp_feature;

/* Walks records[0 .. n_records) with the n_features features: for each record, either its
 * values are written to the features' outputs and handed_back[i] = 0, or handed_back[i] = 1
 * and it left nothing in `values` or `present` (dense rows it began may hold partial values:
 * the caller rewrites them). The features' keys must be distinct. Returns QP_WALK_OK, or an
 * error after which the outputs are meaningless (the scratch must still be released). */
qp_walk_status qp_walk_examples(const qp_span *records, size_t n_records,
                                qp_feature *features, size_t n_features,
                                uint8_t *handed_back);

/* Walks one serialized SequenceExample: its context features as qp_walk_examples walks one
 * record (row 0 of their outputs; a Feature with no list is handed back, since the context
 * reads it as present and empty), and its feature lists, each step taken as a row of a
 * RAGGED feature into `values` and `steps` (present[0] = 1 where the list is there). The
 * plain encoding only, as for Examples: context and feature_lists at most once each, map
 * entries of a key and a value, a FeatureList of Features, each with exactly one list; a
 * list `required` and absent hands the record back too. *handed_back is 1 when the caller's
 * pure path must parse the record (the outputs are then meaningless), else 0. */
qp_walk_status qp_walk_sequence_example(qp_span record, qp_feature *context, size_t n_context,
                                        qp_feature *lists, size_t n_lists,
                                        uint8_t *handed_back);

/* Where each batch's SparseValues lie, from the counts the walk gave: counts holds n_records
 * counts per feature (feature after feature), the records making batches of per_batch;
 * table gets, for each batch p and feature k (n_table = batches * n_features * 5 int64s,
 * batch after batch), QP_SPARSE_TABLE_COLUMNS numbers: per_batch and the longest count (the
 * dense shape), where the feature's indices begin and end among the batch's (the features'
 * one after the other), and where its values begin among the feature's (the batches' one
 * after the other). Returns QP_WALK_OK, or QP_WALK_BAD_ARGUMENT when a count is negative, a
 * sum passes INT64_MAX, the records are not whole batches, or n_table is not the table's
 * size (table is then partly written). */
#define QP_SPARSE_TABLE_COLUMNS 5
qp_walk_status qp_sparse_table(const int64_t *counts, size_t n_features, size_t n_records,
                               size_t per_batch, int64_t *table, size_t n_table);

/* Frees a feature's scratch (safe to call twice, and on a zeroed feature). */
void qp_feature_release(qp_feature *feature);

#endif /* QUEUEPIPE_WIRE_H */
