/* The CPython layer of the sparse columns' arena moves (columns.c): converts arguments and
 * raises what the pure twin in queuepipe/_columns.py raises. */
#include "module_columns.h"

#include <string.h>

#include "columns.h"
#include "gil.h"

/* One row of row_bytes from `from` to `to`: a copy of constant size (a load and a store) for
 * the widths of scalars and of pairs of them, where a call of memcpy a row cost twice as many
 * instructions (a batch's labels and the ordinals read_batch_features tags them with). */
static inline void
copy_row(uint8_t *to, const uint8_t *from, size_t row_bytes)
{
    switch (row_bytes) {
    case 4:
        memcpy(to, from, 4);
        return;
    case 8:
        memcpy(to, from, 8);
        return;
    case 16:
        memcpy(to, from, 16);
        return;
    default:
        memcpy(to, from, row_bytes);
    }
}

/* numpy.ndarray, taken at import: the functions take NumPy arrays and nothing else, as their
 * pure twins do (an object is checked by its type, not through NumPy's C API). */
static PyTypeObject *ndarray_type;

/* Whether a buffer's format is one number type (a byte order, then one type code; complex
 * as Z and a float code), what NumPy exports for the dtype kinds b, i, u, f and c. */
static int
numeric_format(const char *format)
{
    if (format == NULL)
        return 0;
    if (*format != '\0' && strchr("@=<>!", *format) != NULL)
        format++;
    if (*format == 'Z')
        return format[1] != '\0' && strchr("efdg", format[1]) != NULL && format[2] == '\0';
    return *format != '\0' && strchr("?bBhHiIlLqQnNefdg", *format) != NULL
           && format[1] == '\0';
}

/* Takes a C-contiguous NumPy array of int64 from obj into view (fn and what name it in
 * errors). */
static int
int64_buffer(PyObject *obj, Py_buffer *view, const char *fn, const char *what)
{
    view->obj = NULL;
    if (Py_TYPE(obj) == ndarray_type
        && PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
        if (view->itemsize == 8 && view->format != NULL && view->format[0] != '\0'
            && strchr("lq", view->format[0]) != NULL && view->format[1] == '\0')
            return 0;
        PyBuffer_Release(view);
        view->obj = NULL;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s: %s must be a C-contiguous array of int64", fn, what);
    return -1;
}

/* A copy of an int64 view's items (PyMem, freed by the caller): the passes read it, not
 * the view, whose memory an output may share or another thread may change while the GIL
 * is let go. NULL with MemoryError. */
static int64_t *
int64_copy(const Py_buffer *view)
{
    int64_t *copy = PyMem_Malloc(view->len ? (size_t)view->len : 1);
    if (copy == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(copy, view->buf, (size_t)view->len);
    return copy;
}

/* Takes an arena (or an output), a C-contiguous array of numbers (not of Python objects,
 * whose references a raw copy would duplicate), writable if asked, into view; its items are
 * its rows. fn and what name it in errors. */
static int
arena_buffer(PyObject *obj, Py_buffer *view, int writable, const char *fn, const char *what,
             size_t *n_items, size_t *item_bytes)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    view->obj = NULL;
    if (Py_TYPE(obj) == ndarray_type && PyObject_GetBuffer(obj, view, flags) == 0) {
        if (view->ndim >= 1 && numeric_format(view->format)) {
            *n_items = (size_t)view->shape[0];
            *item_bytes = *n_items ? (size_t)view->len / *n_items : 0;
            return 0;
        }
        PyBuffer_Release(view);
        view->obj = NULL;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s: %s must be a %sC-contiguous array of numbers", fn,
                 what, writable ? "writable " : "");
    return -1;
}

/* obj as a writable C-contiguous array of native int64 of rank ndim (of width columns when
 * ndim is 2) into view, its rows in n_rows; otherwise a ValueError naming fn and what, which
 * must be such an array of shape (its words), with no view left taken. */
static int
int64_out_buffer(PyObject *obj, Py_buffer *view, int ndim, Py_ssize_t width, const char *fn,
                 const char *what, const char *shape, size_t *n_rows)
{
    size_t row_bytes;
    if (arena_buffer(obj, view, 1, fn, what, n_rows, &row_bytes) == 0) {
        if (view->ndim == ndim && (ndim == 1 || view->shape[1] == width)
            && view->itemsize == 8 && strchr("lq", view->format[0]) != NULL
            && view->format[1] == '\0')
            return 0;
        PyBuffer_Release(view);
        view->obj = NULL;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s: %s must be a writable C-contiguous %s", fn, what,
                 shape);
    return -1;
}

/* Whether two views' bytes overlap. */
static int
overlap(const Py_buffer *a, const Py_buffer *b)
{
    const char *a0 = a->buf, *b0 = b->buf;
    return a->len > 0 && b->len > 0 && a0 < b0 + b->len && b0 < a0 + a->len;
}

static const char *const refusals[] = {
    [QP_COLUMNS_NEGATIVE] = "has a negative start or length",
    [QP_COLUMNS_ORDER] = "begins before the end of the segment before it",
    [QP_COLUMNS_PAST_END] = "ends past the arena's end",
    [QP_COLUMNS_OUT_SIZE] = "",
    [QP_COLUMNS_REPEATED] = "is given twice",
};

/* Raises the ValueError of a segment fn refused. */
static void
refuse_segment(const char *fn, size_t bad, const int64_t *starts, const int64_t *lengths,
               qp_columns_status status)
{
    PyErr_Format(PyExc_ValueError, "%s: segment %zu (start %lld, length %lld) %s", fn, bad,
                 (long long)starts[bad], (long long)lengths[bad], refusals[status]);
}

/* Checks that starts and lengths (int64 views) hold as many items, and copies them for the
 * passes to read (see int64_copy) into *at and *sizes, freed by the caller: n_segments of
 * each. -1 with ValueError or MemoryError. */
static int
segment_copies(const Py_buffer *starts, const Py_buffer *lengths, const char *fn,
               int64_t **at, int64_t **sizes, size_t *n_segments)
{
    if (starts->len != lengths->len) {
        PyErr_Format(PyExc_ValueError, "%s: %zd starts but %zd lengths", fn,
                     starts->len / 8, lengths->len / 8);
        return -1;
    }
    *n_segments = (size_t)starts->len / 8;
    if ((*at = int64_copy(starts)) == NULL || (*sizes = int64_copy(lengths)) == NULL)
        return -1;
    return 0;
}

/* Releases the views taken (those with an object). */
static void
release_views(Py_buffer *views, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (views[i].obj)
            PyBuffer_Release(&views[i]);
    }
}

PyDoc_STRVAR(compact_segments_doc,
"compact_segments(arena, starts, lengths) -> int\n\n"
"Moves the segments of arena (along its first axis) that start at starts and hold lengths\n"
"rows (int64 arrays, in increasing order of start, not overlapping) to its front, one after\n"
"the other, in place; returns the rows they fill. ValueError, with nothing moved, for a\n"
"segment that is not so.");

static PyObject *
py_compact_segments(PyObject *self, PyObject *args)
{
    PyObject *arena_arg, *starts_arg, *lengths_arg, *result = NULL;
    Py_buffer views[3] = {{0}}, *arena = &views[0], *starts = &views[1], *lengths = &views[2];
    size_t n_items, item_bytes, n_segments = 0, n_live = 0, bad = 0;
    int64_t *at = NULL, *sizes = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO:compact_segments", &arena_arg, &starts_arg, &lengths_arg))
        return NULL;
    if (arena_buffer(arena_arg, arena, 1, "compact_segments", "the arena", &n_items,
                     &item_bytes) < 0
        || int64_buffer(starts_arg, starts, "compact_segments", "starts") < 0
        || int64_buffer(lengths_arg, lengths, "compact_segments", "lengths") < 0
        || segment_copies(starts, lengths, "compact_segments", &at, &sizes, &n_segments) < 0)
        goto done;
    PyThreadState *saved = qp_gil_let_go((size_t)arena->len, QP_GIL_FREE_COLUMN_BYTES);
    qp_columns_status status = qp_columns_compact(arena->buf, n_items, item_bytes, at, sizes,
                                                  n_segments, &n_live, &bad);
    qp_gil_take(saved);
    if (status != QP_COLUMNS_OK) {
        refuse_segment("compact_segments", bad, at, sizes, status);
        goto done;
    }
    result = PyLong_FromSize_t(n_live);
done:
    PyMem_Free(at);
    PyMem_Free(sizes);
    release_views(views, 3);
    return result;
}

/* Whether two arrays have rows of one dtype and shape (their first axes aside). */
static int
same_rows(const Py_buffer *a, const Py_buffer *b)
{
    if (a->ndim != b->ndim || a->itemsize != b->itemsize || strcmp(a->format, b->format) != 0)
        return 0;
    for (int d = 1; d < a->ndim; d++) {
        if (a->shape[d] != b->shape[d])
            return 0;
    }
    return 1;
}

PyDoc_STRVAR(gather_segments_doc,
"gather_segments(arena, starts, lengths, out) -> None\n\n"
"Copies the segments of arena (along its first axis) that start at starts and hold lengths\n"
"rows (int64 arrays) one after the other into out, an array of rows like arena's that the\n"
"segments fill exactly. ValueError, with nothing copied, for a segment outside the arena or\n"
"an out of another size.");

static PyObject *
py_gather_segments(PyObject *self, PyObject *args)
{
    PyObject *arena_arg, *starts_arg, *lengths_arg, *out_arg, *result = NULL;
    Py_buffer views[4] = {{0}}, *arena = &views[0], *starts = &views[1], *lengths = &views[2],
              *out = &views[3];
    size_t n_items, item_bytes, n_out, out_item_bytes, n_segments = 0, bad = 0;
    int64_t *at = NULL, *sizes = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO:gather_segments", &arena_arg, &starts_arg, &lengths_arg,
                          &out_arg))
        return NULL;
    if (arena_buffer(arena_arg, arena, 0, "gather_segments", "the arena", &n_items,
                     &item_bytes) < 0
        || int64_buffer(starts_arg, starts, "gather_segments", "starts") < 0
        || int64_buffer(lengths_arg, lengths, "gather_segments", "lengths") < 0
        || arena_buffer(out_arg, out, 1, "gather_segments", "out", &n_out,
                        &out_item_bytes) < 0
        || segment_copies(starts, lengths, "gather_segments", &at, &sizes, &n_segments) < 0)
        goto done;
    if (!same_rows(arena, out)) {
        PyErr_SetString(PyExc_ValueError, "gather_segments: out's rows differ from the "
                        "arena's");
        goto done;
    }
    if (overlap(arena, out)) {
        PyErr_SetString(PyExc_ValueError, "gather_segments: out overlaps the arena");
        goto done;
    }
    PyThreadState *saved = qp_gil_let_go((size_t)out->len, QP_GIL_FREE_COLUMN_BYTES);
    qp_columns_status status = qp_columns_gather(arena->buf, n_items, item_bytes, at, sizes,
                                                 n_segments, out->buf, n_out, &bad);
    qp_gil_take(saved);
    if (status == QP_COLUMNS_OUT_SIZE) {
        PyErr_Format(PyExc_ValueError, "gather_segments: the segments do not hold the %zu "
                     "rows of out", n_out);
        goto done;
    }
    if (status != QP_COLUMNS_OK) {
        refuse_segment("gather_segments", bad, at, sizes, status);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(at);
    PyMem_Free(sizes);
    release_views(views, 4);
    return result;
}

/* A copy of an int64 index view's rows (see int64_copy), each checked to lie in a table of
 * n_rows rows; NULL with ValueError (naming fn, the place and the row) or MemoryError. */
static int64_t *
checked_rows(const Py_buffer *index, size_t n_rows, const char *fn)
{
    int64_t *at = int64_copy(index);
    if (at == NULL)
        return NULL;
    for (size_t i = 0; i < (size_t)index->len / 8; i++) {
        if (at[i] < 0 || (uint64_t)at[i] >= n_rows) {
            PyErr_Format(PyExc_ValueError, "%s: index %zu names row %lld, outside the table's "
                         "%zu rows", fn, i, (long long)at[i], n_rows);
            PyMem_Free(at);
            return NULL;
        }
    }
    return at;
}

/* A list argument of arrays (what names it in errors) as a tuple of the call's own, which
 * keeps its arrays alive, into *listed, and zeroed views for them into *views (PyMem), their
 * number in *n; -1 with ValueError or MemoryError. The caller releases both (release_rows),
 * on error too. */
static int
listed_arrays(PyObject *arg, const char *fn, const char *what, PyObject **listed,
              Py_buffer **views, size_t *n)
{
    if (!PyList_CheckExact(arg)) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be a list of arrays", fn, what);
        return -1;
    }
    if ((*listed = PyList_AsTuple(arg)) == NULL)
        return -1;
    *n = (size_t)PyTuple_GET_SIZE(*listed);
    if ((*views = PyMem_Calloc(*n ? *n : 1, sizeof(Py_buffer))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Releases what take_rows and put_rows hold: the checked rows, the table's and the index's
 * views, the listed arrays' views and their tuple (each where taken). */
static void
release_rows(int64_t *at, Py_buffer *table, Py_buffer *index, Py_buffer *views, size_t n_views,
             PyObject *listed)
{
    PyMem_Free(at);
    if (table->obj)
        PyBuffer_Release(table);
    if (index->obj)
        PyBuffer_Release(index);
    if (views != NULL)
        release_views(views, n_views);
    PyMem_Free(views);
    Py_XDECREF(listed);
}

PyDoc_STRVAR(take_rows_doc,
"take_rows(table, index, outs) -> None\n\n"
"Copies the rows of table (along its first axis) that index (an int64 array) names, in its\n"
"order, into outs: a list of arrays of rows like the table's, filled one after the other,\n"
"each with as many as it has rows, all of them with exactly the index's. One call for\n"
"several batches lets go of the GIL once for them all (128 KiB or more in all).\n"
"ValueError, with nothing copied, for a row outside the table, outs of another size, or an\n"
"out that overlaps the table.");

static PyObject *
py_take_rows(PyObject *self, PyObject *args)
{
    PyObject *table_arg, *index_arg, *outs_arg, *listed = NULL, *result = NULL;
    Py_buffer table = {0}, index = {0}, *outs = NULL;
    size_t n_rows, row_bytes, n_outs = 0, held = 0, out_bytes = 0;
    int64_t *at = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO:take_rows", &table_arg, &index_arg, &outs_arg))
        return NULL;
    if (arena_buffer(table_arg, &table, 0, "take_rows", "the table", &n_rows, &row_bytes) < 0
        || int64_buffer(index_arg, &index, "take_rows", "index") < 0)
        goto done;
    if (listed_arrays(outs_arg, "take_rows", "outs", &listed, &outs, &n_outs) < 0)
        goto done;
    for (size_t i = 0; i < n_outs; i++) {
        size_t rows, bytes;
        if (arena_buffer(PyTuple_GET_ITEM(listed, i), &outs[i], 1, "take_rows", "an out",
                         &rows, &bytes) < 0)
            goto done;
        if (!same_rows(&table, &outs[i])) {
            PyErr_SetString(PyExc_ValueError, "take_rows: an out's rows differ from the "
                            "table's");
            goto done;
        }
        if (overlap(&table, &outs[i])) {
            PyErr_SetString(PyExc_ValueError, "take_rows: an out overlaps the table");
            goto done;
        }
        held += rows; /* (each out's rows lie in memory of its own: no overflow) */
        out_bytes += (size_t)outs[i].len;
    }
    size_t n_index = (size_t)index.len / 8;
    if (held != n_index) {
        PyErr_Format(PyExc_ValueError, "take_rows: the outs hold %zu rows, the index names "
                     "%zu", held, n_index);
        goto done;
    }
    if ((at = checked_rows(&index, n_rows, "take_rows")) == NULL)
        goto done;
    /* Each out takes its own rows (row_bytes each: the same rows as the table's), the
     * index's places one after the other, each checked above against the table. */
    const uint8_t *from = table.buf;
    PyThreadState *saved = qp_gil_let_go(out_bytes, QP_GIL_FREE_COLUMN_BYTES);
    size_t next = 0;
    for (size_t i = 0; i < n_outs; i++) {
        uint8_t *to = outs[i].buf;
        for (size_t r = 0; r < (size_t)outs[i].shape[0] && next < n_index; r++, next++)
            copy_row(to + r * row_bytes, from + (size_t)at[next] * row_bytes, row_bytes);
    }
    qp_gil_take(saved);
    result = Py_NewRef(Py_None);
done:
    release_rows(at, &table, &index, outs, n_outs, listed);
    return result;
}

PyDoc_STRVAR(put_rows_doc,
"put_rows(table, index, sources) -> None\n\n"
"The mirror of take_rows for a table of members side by side, (rows, K, ...): copies row i\n"
"of sources[k] (a list of K arrays of rows like the table's members, each with exactly the\n"
"index's rows) to member k of the table's row index[i] (an int64 array), for every i in\n"
"order: a row named twice keeps the last. It lets go of the GIL for 128 KiB or more in all.\n"
"ValueError, with nothing copied, for a row outside the table, sources of another number or\n"
"size, or a source that overlaps the table.");

static PyObject *
py_put_rows(PyObject *self, PyObject *args)
{
    PyObject *table_arg, *index_arg, *sources_arg, *listed = NULL, *result = NULL;
    Py_buffer table = {0}, index = {0}, *sources = NULL;
    size_t n_rows, row_bytes, n_sources = 0, member_bytes = 0;
    int64_t *at = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO:put_rows", &table_arg, &index_arg, &sources_arg))
        return NULL;
    if (arena_buffer(table_arg, &table, 1, "put_rows", "the table", &n_rows, &row_bytes) < 0
        || int64_buffer(index_arg, &index, "put_rows", "index") < 0)
        goto done;
    if (table.ndim < 2) {
        PyErr_SetString(PyExc_ValueError, "put_rows: the table must have an axis of members");
        goto done;
    }
    if (listed_arrays(sources_arg, "put_rows", "sources", &listed, &sources, &n_sources) < 0)
        goto done;
    if (n_sources != (size_t)table.shape[1]) {
        PyErr_Format(PyExc_ValueError, "put_rows: the table's rows hold %zd members, the "
                     "sources are %zu", table.shape[1], n_sources);
        goto done;
    }
    /* (a table of rows holds shape[1] members of equal bytes: row_bytes divides evenly) */
    member_bytes = n_sources ? row_bytes / n_sources : 0;
    size_t n_index = (size_t)index.len / 8;
    for (size_t k = 0; k < n_sources; k++) {
        size_t rows, bytes;
        Py_buffer *source = &sources[k];
        if (arena_buffer(PyTuple_GET_ITEM(listed, k), source, 0, "put_rows", "a source",
                         &rows, &bytes) < 0)
            goto done;
        int same = source->ndim == table.ndim - 1 && source->itemsize == table.itemsize
                   && strcmp(source->format, table.format) == 0;
        for (int d = 1; same && d < source->ndim; d++)
            same = source->shape[d] == table.shape[d + 1];
        if (!same) {
            PyErr_SetString(PyExc_ValueError, "put_rows: a source's rows differ from the "
                            "table's members");
            goto done;
        }
        if (rows != n_index) {
            PyErr_Format(PyExc_ValueError, "put_rows: a source holds %zu rows, the index "
                         "names %zu", rows, n_index);
            goto done;
        }
        if (overlap(&table, source)) {
            PyErr_SetString(PyExc_ValueError, "put_rows: a source overlaps the table");
            goto done;
        }
    }
    if ((at = checked_rows(&index, n_rows, "put_rows")) == NULL)
        goto done;
    /* Each source holds n_index rows of member_bytes (its rows are the table's members',
     * checked above), each index place checked against the table. */
    uint8_t *to = table.buf;
    PyThreadState *saved = qp_gil_let_go(n_index * row_bytes, QP_GIL_FREE_COLUMN_BYTES);
    for (size_t i = 0; i < n_index; i++) {
        uint8_t *row = to + (size_t)at[i] * row_bytes;
        for (size_t k = 0; k < n_sources; k++)
            copy_row(row + k * member_bytes,
                     (const uint8_t *)sources[k].buf + i * member_bytes, member_bytes);
    }
    qp_gil_take(saved);
    result = Py_NewRef(Py_None);
done:
    release_rows(at, &table, &index, sources, n_sources, listed);
    return result;
}

/* Takes a C-contiguous 1-D NumPy array of Python objects (buffer format "O"), writable if
 * asked, from obj into view; its items in *n. what names it in errors. */
static int
objects_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what, size_t *n)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    view->obj = NULL;
    if (Py_TYPE(obj) == ndarray_type && PyObject_GetBuffer(obj, view, flags) == 0) {
        if (view->ndim == 1 && view->format != NULL && strcmp(view->format, "O") == 0
            && view->itemsize == (Py_ssize_t)sizeof(PyObject *)) {
            *n = (size_t)view->shape[0];
            return 0;
        }
        PyBuffer_Release(view);
        view->obj = NULL;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "set_objects: %s must be a %sC-contiguous 1-D array of "
                 "objects%s", what, writable ? "writable " : "",
                 writable ? "" : ", a list or a tuple");
    return -1;
}

/* The checked rows of a rows argument (None: NULL, with *n the array's own n_items) into
 * *at; -1 with ValueError. */
static int
objects_rows(PyObject *arg, Py_buffer *view, size_t n_items, const char *what, int64_t **at,
             size_t *n)
{
    *at = NULL;
    *n = n_items;
    if (arg == Py_None)
        return 0;
    if (int64_buffer(arg, view, "set_objects", what) < 0)
        return -1;
    *n = (size_t)view->len / 8;
    return (*at = checked_rows(view, n_items, "set_objects")) == NULL ? -1 : 0;
}

PyDoc_STRVAR(set_objects_doc,
"set_objects(dest, dest_rows, src, src_rows) -> None\n\n"
"dest[dest_rows[i]] = src[src_rows[i]] for every i, in order (a row named twice in dest\n"
"keeps the last): a queue's column of objects put, read or cleared, or a chunk's records\n"
"put in an object array. dest is a C-contiguous 1-D object array; src one too, or a list\n"
"or a tuple, each item as it is (out[:] = items looks into each one for a sequence), or\n"
"None, which sets None; the rows are C-contiguous int64 arrays, or None for every item of\n"
"their side in order; both sides name as many items. What NumPy's fancy indexing does, by\n"
"a loop of references: a chunk of records put, read and cleared that way was a sixth of\n"
"what held the GIL on tokens. It keeps the GIL.\n"
"ValueError, with nothing set, for a row outside its array, sides of other lengths, src\n"
"sharing dest's memory or arguments not of these kinds.");

static PyObject *
py_set_objects(PyObject *self, PyObject *args)
{
    PyObject *dest_arg, *dest_rows_arg, *src_arg, *src_rows_arg, *result = NULL;
    Py_buffer dest = {0}, dest_index = {0}, src = {0}, src_index = {0};
    int64_t *to = NULL, *from = NULL;
    PyObject **replaced = NULL;
    size_t n_dest, n_src = 0, n, n_from;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO:set_objects", &dest_arg, &dest_rows_arg, &src_arg,
                          &src_rows_arg))
        return NULL;
    /* (a list or a tuple given runs no code while its items are set: it cannot change) */
    int listed = PyList_CheckExact(src_arg) || PyTuple_CheckExact(src_arg);
    if (objects_buffer(dest_arg, &dest, 1, "dest", &n_dest) < 0
        || (src_arg != Py_None && !listed
            && objects_buffer(src_arg, &src, 0, "src", &n_src) < 0))
        goto done;
    if (listed)
        n_src = (size_t)PySequence_Fast_GET_SIZE(src_arg);
    if (src_arg == Py_None && src_rows_arg != Py_None) {
        PyErr_SetString(PyExc_ValueError, "set_objects: src_rows without src");
        goto done;
    }
    if (objects_rows(dest_rows_arg, &dest_index, n_dest, "dest_rows", &to, &n) < 0
        || objects_rows(src_rows_arg, &src_index, n_src, "src_rows", &from, &n_from) < 0)
        goto done;
    if (src_arg != Py_None && n_from != n) {
        PyErr_Format(PyExc_ValueError, "set_objects: src names %zu items, dest %zu", n_from, n);
        goto done;
    }
    if (src.obj != NULL && overlap(&dest, &src)) {
        PyErr_SetString(PyExc_ValueError, "set_objects: src shares dest's memory");
        goto done;
    }
    if ((replaced = PyMem_Malloc((n ? n : 1) * sizeof(PyObject *))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* Every item set before any replaced one goes: dropping one may run a finalizer, which
     * could change the arrays under the loop. (NumPy takes a NULL item for None.) */
    PyObject **slots = dest.buf;
    PyObject *const *values = listed ? PySequence_Fast_ITEMS(src_arg) : src.buf;
    for (size_t i = 0; i < n; i++) {
        PyObject *value = src_arg == Py_None ? NULL : values[from ? (size_t)from[i] : i];
        size_t t = to ? (size_t)to[i] : i;
        replaced[i] = slots[t];
        slots[t] = Py_NewRef(value ? value : Py_None);
    }
    release_views(&dest, 1);
    release_views(&src, 1);
    for (size_t i = 0; i < n; i++)
        Py_XDECREF(replaced[i]);
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(replaced);
    PyMem_Free(to);
    PyMem_Free(from);
    release_views(&dest, 1);
    release_views(&src, 1);
    release_views(&dest_index, 1);
    release_views(&src_index, 1);
    return result;
}

PyDoc_STRVAR(draw_places_doc,
"draw_places(capsule, n, k, out) -> None\n\n"
"Writes to out (a writable C-contiguous int64 array of k items) what\n"
"Generator.choice(n, size=k, replace=False) gives where it shuffles the tail of 0 .. n - 1\n"
"(n above 10,000 and k above n // 50), drawn from the bit generator of capsule (its\n"
"bit_generator.capsule) in the same way: the same places, the generator left in the same\n"
"state, and the GIL kept (choice lets go of it twice, and allocates and copies n items).\n"
"The caller holds the bit generator's lock. ValueError, with nothing drawn, unless\n"
"0 < k <= n < 2**32 and out holds k items.");

static PyObject *
py_draw_places(PyObject *self, PyObject *args)
{
    PyObject *capsule, *out_arg, *result = NULL;
    Py_ssize_t n, k;
    Py_buffer out = {0};
    size_t n_out;
    int64_t *order = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnnO:draw_places", &capsule, &n, &k, &out_arg))
        return NULL;
    const qp_bitgen *gen = PyCapsule_IsValid(capsule, "BitGenerator")
                           ? PyCapsule_GetPointer(capsule, "BitGenerator") : NULL;
    if (gen == NULL) {
        PyErr_SetString(PyExc_ValueError, "draw_places: capsule must be a bit generator's "
                        "capsule");
        return NULL;
    }
    if (k < 1 || k > n || (uint64_t)n > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "draw_places: k (%zd) and n (%zd) must satisfy 0 < k "
                     "<= n < 2**32", k, n);
        return NULL;
    }
    if (int64_out_buffer(out_arg, &out, 1, 0, "draw_places", "out", "int64 array",
                         &n_out) < 0)
        return NULL;
    if (n_out != (size_t)k) {
        PyErr_Format(PyExc_ValueError, "draw_places: out holds %zu items, not k (%zd)", n_out,
                     k);
        goto done;
    }
    if ((order = PyMem_Malloc((size_t)n * sizeof(int64_t))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    qp_columns_tail_shuffle(order, (size_t)n, (size_t)k, gen);
    memcpy(out.buf, order + (n - k), (size_t)k * sizeof(int64_t));
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(order);
    PyBuffer_Release(&out);
    return result;
}

PyDoc_STRVAR(list_indices_doc,
"list_indices(lengths, n, out) -> None\n\n"
"Writes to out (a writable C-contiguous int64 array of [total, 2]) the indices [list, place]\n"
"of the values of plain lists of lengths values each (int64), one after the other: list j\n"
"numbered j % n (n >= 1: batches of n lists, each counted from 0). ValueError, with nothing\n"
"written, for a negative length or lengths that do not add up to out's rows.\n\n"
"out may be a list of such arrays instead, which take the lists in equal shares of whole\n"
"batches of n, one after the other: all in one call, which lets go of the GIL once for them\n"
"all. A share refused raises the ValueError above (its list counted among all the lengths,\n"
"the share named by its place in out), the shares before it written.");

static PyObject *
py_list_indices(PyObject *self, PyObject *args)
{
    PyObject *lengths_arg, *out_arg, *listed = NULL, *result = NULL;
    Py_ssize_t per_batch;
    Py_buffer lengths = {0}, *outs = NULL;
    size_t n_outs = 1, *n_rows = NULL, out_bytes = 0, bad = 0, b = 0;
    int64_t *sizes = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnO:list_indices", &lengths_arg, &per_batch, &out_arg))
        return NULL;
    if (int64_buffer(lengths_arg, &lengths, "list_indices", "lengths") < 0)
        goto done;
    /* A list of outs is taken as a tuple of this call's own: its arrays stay alive. */
    if (PyList_CheckExact(out_arg)) {
        if ((listed = PyList_AsTuple(out_arg)) == NULL)
            goto done;
        n_outs = (size_t)PyTuple_GET_SIZE(listed);
    }
    outs = PyMem_Calloc(n_outs ? n_outs : 1, sizeof(Py_buffer));
    n_rows = PyMem_Calloc(n_outs ? n_outs : 1, sizeof(size_t));
    if (outs == NULL || n_rows == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < n_outs; i++) {
        if (int64_out_buffer(listed ? PyTuple_GET_ITEM(listed, i) : out_arg, &outs[i], 2, 2,
                             "list_indices", "out", "int64 array of [total, 2]",
                             &n_rows[i]) < 0)
            goto done;
        out_bytes += (size_t)outs[i].len;
    }
    if (per_batch < 1) {
        PyErr_Format(PyExc_ValueError, "list_indices: n must be at least 1, got %zd",
                     per_batch);
        goto done;
    }
    size_t n_lists = (size_t)lengths.len / 8;
    /* the lists of each out: an equal share, of whole batches */
    size_t per_out = !listed ? n_lists : n_outs ? n_lists / n_outs : 0;
    if (listed && (per_out * n_outs != n_lists || per_out % (size_t)per_batch)) {
        PyErr_Format(PyExc_ValueError, "list_indices: %zu lists are not %zu equal shares of "
                     "whole batches of %zd", n_lists, n_outs, per_batch);
        goto done;
    }
    if ((sizes = int64_copy(&lengths)) == NULL)
        goto done;
    qp_columns_status status = QP_COLUMNS_OK;
    PyThreadState *saved = qp_gil_let_go(out_bytes, QP_GIL_FREE_INDEX_BYTES);
    for (b = 0; b < n_outs; b++) {
        status = qp_columns_list_indices(sizes + b * per_out, per_out, (size_t)per_batch,
                                         outs[b].buf, n_rows[b], &bad);
        if (status != QP_COLUMNS_OK)
            break;
    }
    qp_gil_take(saved);
    if (status == QP_COLUMNS_NEGATIVE) {
        size_t list = b * per_out + bad;
        PyErr_Format(PyExc_ValueError, "list_indices: list %zu has a negative length (%lld)",
                     list, (long long)sizes[list]);
        goto done;
    }
    if (status != QP_COLUMNS_OK) {
        if (listed)
            PyErr_Format(PyExc_ValueError, "list_indices: the lengths of share %zu do not add "
                         "up to the %zu rows of its out", b, n_rows[b]);
        else
            PyErr_Format(PyExc_ValueError, "list_indices: the lengths do not add up to the "
                         "%zu rows of out", n_rows[0]);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(sizes);
    if (lengths.obj)
        PyBuffer_Release(&lengths);
    if (outs != NULL)
        release_views(outs, n_outs);
    PyMem_Free(outs);
    PyMem_Free(n_rows);
    Py_XDECREF(listed);
    return result;
}

PyDoc_STRVAR(shuffle_in_doc,
"shuffle_in(slots, start, places) -> None\n\n"
"A shuffle queue's shuffle-in, in place (the pure twin: queuepipe.queues._shuffle_in): the\n"
"len(places) entries of slots (a writable C-contiguous int64 array) from start go to places\n"
"(int64, distinct, each below start + len(places)), in that order; the entries at the places\n"
"below start that they take move, in the order of places, to the places from start up that\n"
"none of them takes, lowest first. Keeps the GIL (a few microseconds). ValueError, with\n"
"nothing moved, for a place out of range or given twice.");

static PyObject *
py_shuffle_in(PyObject *self, PyObject *args)
{
    PyObject *slots_arg, *places_arg, *result = NULL;
    Py_ssize_t start;
    Py_buffer views[2] = {{0}}, *slots = &views[0], *places = &views[1];
    uint8_t *taken = NULL;
    int64_t *rows = NULL;
    size_t n_slots, bad = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnO:shuffle_in", &slots_arg, &start, &places_arg))
        return NULL;
    if (int64_out_buffer(slots_arg, slots, 1, 0, "shuffle_in", "slots", "1-D array of int64",
                         &n_slots) < 0)
        goto done;
    if (int64_buffer(places_arg, places, "shuffle_in", "places") < 0)
        goto done;
    if (overlap(slots, places)) {
        PyErr_SetString(PyExc_ValueError, "shuffle_in: places overlaps slots");
        goto done;
    }
    size_t k = (size_t)places->len / 8;
    if (start < 0 || (size_t)start > n_slots || k > n_slots - (size_t)start) {
        PyErr_Format(PyExc_ValueError, "shuffle_in: start %zd and %zu places pass the %zu "
                     "slots", start, k, n_slots);
        goto done;
    }
    taken = PyMem_Malloc((size_t)start + k + 1);
    rows = PyMem_Malloc(k * sizeof *rows + 1);
    if (taken == NULL || rows == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *place = places->buf;
    qp_columns_status status = qp_columns_shuffle_in(slots->buf, n_slots, (size_t)start,
                                                     place, k, taken, rows, &bad);
    if (status != QP_COLUMNS_OK) {
        PyErr_Format(PyExc_ValueError, "shuffle_in: place %zu (%lld) %s", bad,
                     (long long)(bad < k ? place[bad] : 0),
                     status == QP_COLUMNS_REPEATED ? "is given twice"
                     : status == QP_COLUMNS_NEGATIVE ? "is negative"
                     : "is past start + the number of places");
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(taken);
    PyMem_Free(rows);
    release_views(views, 2);
    return result;
}

PyDoc_STRVAR(mark_delivered_doc,
"mark_delivered(left, ordinals, low, limit, due, /)\n--\n\n"
"A read plan's marks of delivery: for each ordinal (a C-contiguous int64 array) whose place,\n"
"ordinal - low (as int64s wrap), is 0 or more, left[place] (a writable C-contiguous array of\n"
"bools) becomes False; places below 0 are passed over. First due[0] (a writable buffer of a\n"
"byte at least) becomes 1 when the least place is below limit. An IndexError as NumPy's, with\n"
"nothing marked (due set all the same), for a place past left's end. Keeps the GIL.");

static PyObject *
py_mark_delivered(PyObject *self, PyObject *args)
{
    PyObject *left_arg, *ordinals_arg, *result = NULL;
    long long low, limit;
    Py_buffer views[3] = {{0}}, *left = &views[0], *ordinals = &views[1], *due = &views[2];
    size_t n_left, item_bytes, bad = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOLLw*:mark_delivered", &left_arg, &ordinals_arg, &low,
                          &limit, due))
        return NULL;
    if (due->len < 1) {
        PyErr_SetString(PyExc_ValueError, "mark_delivered: due must hold a byte at least");
        goto done;
    }
    if (arena_buffer(left_arg, left, 1, "mark_delivered", "left", &n_left, &item_bytes) < 0)
        goto done;
    if (left->ndim != 1 || left->itemsize != 1 || strcmp(left->format, "?") != 0) {
        PyErr_SetString(PyExc_ValueError, "mark_delivered: left must be a writable "
                        "C-contiguous 1-D array of bools");
        goto done;
    }
    if (int64_buffer(ordinals_arg, ordinals, "mark_delivered", "ordinals") < 0)
        goto done;
    const int64_t *ordinal = ordinals->buf;
    if (qp_columns_mark(left->buf, n_left, ordinal, (size_t)ordinals->len / 8, (int64_t)low,
                        (int64_t)limit, due->buf, &bad) != QP_COLUMNS_OK) {
        /* (NumPy's words for left[places] = False) */
        PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for axis 0 with size %zu",
                     (long long)((uint64_t)ordinal[bad] - (uint64_t)low), n_left);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    release_views(views, 3);
    return result;
}

static PyMethodDef columns_methods[] = {
    {"compact_segments", py_compact_segments, METH_VARARGS, compact_segments_doc},
    {"gather_segments", py_gather_segments, METH_VARARGS, gather_segments_doc},
    {"list_indices", py_list_indices, METH_VARARGS, list_indices_doc},
    {"take_rows", py_take_rows, METH_VARARGS, take_rows_doc},
    {"put_rows", py_put_rows, METH_VARARGS, put_rows_doc},
    {"set_objects", py_set_objects, METH_VARARGS, set_objects_doc},
    {"draw_places", py_draw_places, METH_VARARGS, draw_places_doc},
    {"shuffle_in", py_shuffle_in, METH_VARARGS, shuffle_in_doc},
    {"mark_delivered", py_mark_delivered, METH_VARARGS, mark_delivered_doc},
    {NULL, NULL, 0, NULL}};

int
qp_columns_add_functions(PyObject *module)
{
    PyObject *numpy = PyImport_ImportModule("numpy");
    if (numpy == NULL)
        return -1;
    PyObject *ndarray = PyObject_GetAttrString(numpy, "ndarray");
    Py_DECREF(numpy);
    if (ndarray == NULL)
        return -1;
    if (!PyType_Check(ndarray)) {
        Py_DECREF(ndarray);
        PyErr_SetString(PyExc_ImportError, "numpy.ndarray is not a type");
        return -1;
    }
    ndarray_type = (PyTypeObject *)ndarray; /* (kept for the module's life) */
    return PyModule_AddFunctions(module, columns_methods);
}
