/* The CPython layer of the Example wire walk (wire.c): converts arguments, releases the GIL
 * for the walk of a whole chunk, and turns the walk's scratch into Python objects. */
#include "module_example.h"

#include <string.h>

#include "gil.h"
#include "module_bytes.h"
#include "module_blocks.h"
#include "wire.h"

/* Whether a spec item is a tuple (bytes, int, bool, int, bool) whose ints are small enough
 * to read as they are (dtype in [0, 2], size in [0, 2**62)): what queuepipe makes, read in a
 * few instructions; anything else goes through the argument parser, which says what is
 * wrong. (A call for one record reads its spec every time.) */
static int
plain_spec(PyObject *item)
{
    if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 5)
        return 0;
    PyObject *dtype = PyTuple_GET_ITEM(item, 1), *size = PyTuple_GET_ITEM(item, 3);
    if (!PyBytes_CheckExact(PyTuple_GET_ITEM(item, 0)) || !PyLong_CheckExact(dtype)
        || !PyLong_CheckExact(size) || !PyBool_Check(PyTuple_GET_ITEM(item, 2))
        || !PyBool_Check(PyTuple_GET_ITEM(item, 4)))
        return 0;
    int overflow = 0;
    long code = PyLong_AsLongAndOverflow(dtype, &overflow);
    if (overflow || code < QP_INT64 || code > QP_BYTES)
        return 0;
    long long count = PyLong_AsLongLongAndOverflow(size, &overflow);
    return !overflow && count >= 0 && count < ((long long)1 << 62);
}

/* The spec tuple of one feature: (key: bytes, dtype: 0 int64 / 1 float / 2 bytes,
 * ragged: bool, size: int, required: bool). */
static int
read_spec(PyObject *item, Py_ssize_t index, const char *function, qp_feature *f)
{
    PyObject *key;
    int dtype, ragged, required;
    Py_ssize_t size;
    if (plain_spec(item)) {  /* as queuepipe makes them: read without the argument parser */
        key = PyTuple_GET_ITEM(item, 0);
        dtype = (int)PyLong_AsLong(PyTuple_GET_ITEM(item, 1));
        ragged = PyTuple_GET_ITEM(item, 2) == Py_True;
        size = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 3));
        required = PyTuple_GET_ITEM(item, 4) == Py_True;
    }
    else if (!PyTuple_Check(item)
             || !PyArg_ParseTuple(item, "O!ipnp", &PyBytes_Type, &key, &dtype, &ragged, &size,
                                  &required)) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "%s: spec[%zd] must be (key bytes, dtype, ragged, size, "
                         "required)", function, index);
        }
        return -1;
    }
    if (dtype < QP_INT64 || dtype > QP_BYTES || size < 0) {
        PyErr_Format(PyExc_ValueError, "%s: spec[%zd] has dtype %d (not 0-2) or "
                     "size %zd (negative)", function, index, dtype, size);
        return -1;
    }
    f->key = (const uint8_t *)PyBytes_AS_STRING(key);
    f->key_len = (size_t)PyBytes_GET_SIZE(key);
    f->dtype = (qp_dtype)dtype;
    f->kind = ragged ? QP_RAGGED : QP_DENSE;
    f->size = (uint64_t)size;
    f->required = required;
    return 0;
}

/* Takes a writable C-contiguous buffer of at least min_bytes bytes from obj into view; never
 * one of Python objects (format "O"), whose references raw writes would overwrite. */
static int
writable(PyObject *obj, Py_buffer *view, size_t min_bytes, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (view->format != NULL && strchr(view->format, 'O') != NULL) {
        PyErr_Format(PyExc_ValueError, "walk_examples: %s is a buffer of Python objects, not "
                     "of numbers", what);
        PyBuffer_Release(view);
        view->obj = NULL;
        return -1;
    }
    if ((size_t)view->len < min_bytes) {
        PyErr_Format(PyExc_ValueError, "walk_examples: %s holds %zd bytes, needs %zu", what,
                     view->len, min_bytes);
        PyBuffer_Release(view);
        view->obj = NULL;
        return -1;
    }
    return 0;
}

/* Takes a writable C-contiguous array of at least n_items Python objects (a NumPy object
 * array: buffer format "O") from obj into view. */
static int
writable_objects(PyObject *obj, Py_buffer *view, size_t n_items, Py_ssize_t index)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    size_t n_bytes;
    if (view->format == NULL || strcmp(view->format, "O") != 0
        || view->itemsize != (Py_ssize_t)sizeof(PyObject *)
        || __builtin_mul_overflow(n_items, sizeof(PyObject *), &n_bytes)
        || (size_t)view->len < n_bytes) {
        PyErr_Format(PyExc_ValueError, "walk_examples: outs[%zd] must be or give a writable "
                     "object array of at least %zu items", index, n_items);
        PyBuffer_Release(view);
        view->obj = NULL;
        return -1;
    }
    return 0;
}

/* How many spans ahead of the one copied the next one's bytes are fetched into the cache: a
 * string's bytes lie in its record, which the walk of the whole chunk has long left (a cache
 * miss per string, most of the cost of its copy, when not fetched ahead). */
#define SPAN_PREFETCH 8

/* Sets made[0..n) to new bytes objects of spans first .. first + n - 1 of f's scratch. They
 * are made empty holding the GIL, then filled by one pass that lets go of it when the strings
 * come to QP_GIL_FREE_BYTES or more (a chunk of images: megabytes, copied while another
 * thread runs Python): until returned they are this call's alone, and the records the spans
 * lie in are held by the caller. 0, or -1 with an exception set and nothing made. */
static int
span_bytes(const qp_feature *f, size_t first, size_t n, PyObject **made)
{
    const uint8_t *spans = f->values.data + first * sizeof(qp_span);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        qp_span span;
        memcpy(&span, spans + i * sizeof span, sizeof span);
        made[i] = qp_bytes_new((Py_ssize_t)span.len);
        if (made[i] == NULL) {
            while (i > 0)
                Py_DECREF(made[--i]);
            return -1;
        }
        total += span.len;
    }
    PyThreadState *saved = qp_gil_let_go(total, QP_GIL_FREE_BYTES);
    for (size_t i = 0; i < n; i++) {
        qp_span span;
        if (i + SPAN_PREFETCH < n) {
            memcpy(&span, spans + (i + SPAN_PREFETCH) * sizeof span, sizeof span);
            __builtin_prefetch(span.data);
        }
        memcpy(&span, spans + i * sizeof span, sizeof span);
        memcpy(PyBytes_AS_STRING(made[i]), span.data, span.len);
    }
    qp_gil_take(saved);
    return 0;
}

/* span_bytes of spans 0 .. n - 1 into a PyMem array of their own (NULL with an exception
 * set), for the caller to move into place and PyMem_Free. */
static PyObject **
all_span_bytes(const qp_feature *f, size_t n)
{
    PyObject **made = PyMem_Malloc((n ? n : 1) * sizeof(PyObject *));
    if (made == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    if (span_bytes(f, 0, n, made) < 0) {
        PyMem_Free(made);
        return NULL;
    }
    return made;
}

/* Puts the string values of a dense bytes feature into its object array `slots` of
 * n_records rows of f->size items: a bytes object per value, row after row of the records
 * that hold the feature (the other rows keep what they held). The GIL is held. */
static int
fill_objects(const qp_feature *f, PyObject **slots, size_t n_records)
{
    size_t n_spans = f->values.len / sizeof(qp_span), needed = 0;
    for (size_t row = 0; row < n_records; row++)
        needed += f->present[row] ? (size_t)f->size : 0;
    if (needed > n_spans) {
        PyErr_SetString(PyExc_SystemError, "walk_examples: the walk gave fewer strings than "
                        "its records hold");
        return -1;
    }
    PyObject **made = all_span_bytes(f, needed);
    if (made == NULL)
        return -1;
    size_t next = 0;
    for (size_t row = 0; row < n_records; row++) {
        if (!f->present[row])
            continue;
        for (size_t k = 0; k < (size_t)f->size; k++) {
            PyObject **slot = &slots[row * (size_t)f->size + k];
            PyObject *old = *slot;
            *slot = made[next++];
            Py_XDECREF(old);
        }
    }
    PyMem_Free(made);
    return 0;
}

/* The string values of a ragged bytes feature in a new object array: make(number of
 * values) must return one of at least that many items, filled here in order. */
static PyObject *
span_array(const qp_feature *f, PyObject *make, Py_ssize_t index)
{
    size_t n = f->values.len / sizeof(qp_span);
    PyObject *array = PyObject_CallFunction(make, "n", (Py_ssize_t)n);
    if (array == NULL)
        return NULL;
    Py_buffer view;
    if (writable_objects(array, &view, n, index) < 0) {
        Py_DECREF(array);
        return NULL;
    }
    PyObject **made = all_span_bytes(f, n);
    if (made == NULL) {
        PyBuffer_Release(&view);
        Py_DECREF(array);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject **slot = &((PyObject **)view.buf)[i];
        PyObject *old = *slot;
        *slot = made[i];
        Py_XDECREF(old);
    }
    PyMem_Free(made);
    PyBuffer_Release(&view);
    return array;
}

/* A list of bytes, one per span in f's scratch. */
static PyObject *
span_list(const qp_feature *f)
{
    size_t n = f->values.len / sizeof(qp_span);
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (list == NULL)
        return NULL;
    PyObject **made = all_span_bytes(f, n);
    if (made == NULL) {
        Py_DECREF(list);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        PyList_SET_ITEM(list, (Py_ssize_t)i, made[i]);
    PyMem_Free(made);
    return list;
}

/* What the walk left for f: None (dense numbers, already in place), a bytearray of ragged
 * numbers, or a list of bytes. */
static PyObject *
feature_result(const qp_feature *f)
{
    if (f->dtype == QP_BYTES)
        return span_list(f);
    if (f->kind == QP_DENSE)
        Py_RETURN_NONE;
    return PyByteArray_FromStringAndSize((const char *)f->values.data,
                                         (Py_ssize_t)f->values.len);
}

/* f's ragged numbers as a Block (module_blocks.c) that takes over its scratch (left empty:
 * qp_feature_release then frees nothing of it); an empty bytearray when the walk gathered
 * none. A chunk's ragged numbers (megabytes for a few batches of token lists) become the
 * values' arrays without a copy made holding the GIL (np.frombuffer of a Block gives a
 * writable array, as a bytearray's).
 *
 * The scratch keeps its capacity (less than twice its length): cut to its length, a block of
 * megabytes was freed (by the consumer, as often as not) with a size below the next chunk's
 * scratch, so glibc's threshold for mapping an allocation on its own never rose past the
 * scratch, and every block was mapped and unmapped, the unmap (50-100 us, with the other
 * core's TLB to shoot down) holding the GIL in the consumer. Whole, its buffer is kept for
 * the next walk when the Block goes. */
static PyObject *
handed_numbers(qp_feature *f)
{
    if (f->values.data == NULL || f->values.len == 0)
        return PyByteArray_FromStringAndSize(NULL, 0);
    return qp_blocks_of_scratch(&f->values);
}

/* 0 for QP_WALK_OK, else -1 with the walk's error raised. */
static int
raise_for(qp_walk_status status, const char *function)
{
    if (status == QP_WALK_NO_MEMORY) {
        PyErr_NoMemory();
        return -1;
    }
    if (status == QP_WALK_BAD_ARGUMENT) {
        PyErr_Format(PyExc_ValueError, "%s: a dense output is smaller than records x size",
                     function);
        return -1;
    }
    return 0;
}

/* Reads a spec tuple of features into a calloc'ed array (*out, to PyMem_Free after
 * qp_feature_release of each); lists: the third item is fixed_steps, every list RAGGED. */
static int
read_specs(PyObject *spec, int lists, const char *function, qp_feature **out)
{
    Py_ssize_t n = PyTuple_GET_SIZE(spec);
    qp_feature *features = PyMem_Calloc((size_t)n + 1, sizeof(qp_feature));
    *out = features;
    if (features == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (read_spec(PyTuple_GET_ITEM(spec, i), i, function, &features[i]) < 0)
            return -1;
        if (lists) {
            features[i].fixed_steps = features[i].kind == QP_RAGGED;
            features[i].kind = QP_RAGGED;
        }
        for (Py_ssize_t j = 0; j < i; j++) {
            if (features[j].key_len == features[i].key_len
                && memcmp(features[j].key, features[i].key, features[i].key_len) == 0) {
                PyErr_Format(PyExc_ValueError, "%s: spec[%zd] repeats a key", function, i);
                return -1;
            }
        }
    }
    return 0;
}

/* The walk of the records at spans[0:n_records] (views into objects the caller holds),
 * with the other arguments of walk_examples. */
static PyObject *
walk_spans(const qp_span *spans, Py_ssize_t n_records, PyObject *spec, PyObject *outs,
           PyObject *present_arg, PyObject *counts_arg, PyObject *back_arg)
{
    Py_ssize_t n_features = PyTuple_GET_SIZE(spec);
    if (PyTuple_GET_SIZE(outs) != n_features) {
        PyErr_Format(PyExc_ValueError, "walk_examples: %zd outs for %zd features",
                     PyTuple_GET_SIZE(outs), n_features);
        return NULL;
    }
    PyObject *result = NULL;
    qp_feature *features = NULL;
    Py_buffer *views = PyMem_Calloc((size_t)n_features + 1, sizeof(Py_buffer));
    Py_buffer present = {0}, counts = {0}, back = {0};
    if (views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    size_t cells, count_bytes;
    if (__builtin_mul_overflow((size_t)n_features, (size_t)n_records, &cells)
        || __builtin_mul_overflow(cells, sizeof(int64_t), &count_bytes)) {
        PyErr_Format(PyExc_OverflowError, "walk_examples: %zd features x %zd records is too "
                     "many cells", n_features, n_records);
        goto done;
    }
    if (writable(present_arg, &present, cells, "present") < 0
        || writable(counts_arg, &counts, count_bytes, "counts") < 0
        || writable(back_arg, &back, (size_t)n_records, "handed_back") < 0)
        goto done;
    /* The walk stores counts as int64_t (every other output it writes byte by byte). */
    if ((uintptr_t)counts.buf % sizeof(int64_t) != 0) {
        PyErr_SetString(PyExc_ValueError, "walk_examples: counts starts at an address that is "
                        "not a multiple of 8 (int64)");
        goto done;
    }
    if (read_specs(spec, 0, "walk_examples", &features) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n_features; i++) {
        qp_feature *f = &features[i];
        f->present = (uint8_t *)present.buf + (size_t)i * (size_t)n_records;
        f->counts = (int64_t *)counts.buf + (size_t)i * (size_t)n_records;
        PyObject *out = PyTuple_GET_ITEM(outs, i);
        if (out == Py_None)
            continue;
        if (f->kind != QP_DENSE) {
            if (f->dtype != QP_BYTES || !PyCallable_Check(out)) {
                PyErr_Format(PyExc_ValueError, "walk_examples: outs[%zd] must be None%s", i,
                             f->dtype == QP_BYTES ? " or a callable" : "");
                goto done;
            }
            continue;  /* called after the walk, with the GIL */
        }
        if (f->dtype == QP_BYTES) {
            size_t n_items;
            if (__builtin_mul_overflow((size_t)n_records, (size_t)f->size, &n_items)) {
                PyErr_Format(PyExc_OverflowError, "walk_examples: outs[%zd] would need more "
                             "items than memory holds", i);
                goto done;
            }
            if (writable_objects(out, &views[i], n_items, i) < 0)
                goto done;
            continue;  /* filled after the walk, with the GIL */
        }
        if (writable(out, &views[i], 0, "an output") < 0)
            goto done;
        f->dense = views[i].buf;
        f->dense_len_bytes = (size_t)views[i].len;
    }
    for (Py_ssize_t i = 0; i < n_features; i++) {
        if (features[i].kind == QP_DENSE && features[i].dtype != QP_BYTES
            && features[i].dense == NULL) {
            PyErr_Format(PyExc_ValueError, "walk_examples: outs[%zd] is None for a dense "
                         "number feature", i);
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n_features; i++) {
        if (features[i].kind == QP_RAGGED && features[i].dtype != QP_BYTES)
            qp_blocks_seed(&features[i].values);  /* (a buffer kept from an earlier walk) */
    }
    size_t walked = 0;
    for (Py_ssize_t i = 0; i < n_records && walked < QP_GIL_FREE_WALK_BYTES; i++)
        walked += spans[i].len;
    PyThreadState *saved = qp_gil_let_go(walked, QP_GIL_FREE_WALK_BYTES);
    qp_walk_status status = qp_walk_examples(spans, (size_t)n_records, features,
                                             (size_t)n_features, back.buf);
    qp_gil_take(saved);
    if (raise_for(status, "walk_examples") < 0)
        goto done;
    result = PyTuple_New(n_features);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n_features; i++) {
        PyObject *item, *out = PyTuple_GET_ITEM(outs, i);
        if (features[i].dtype == QP_BYTES && views[i].obj != NULL)
            item = fill_objects(&features[i], views[i].buf, (size_t)n_records) < 0
                ? NULL : Py_NewRef(Py_None);
        else if (features[i].kind == QP_RAGGED && out != Py_None)
            item = span_array(&features[i], out, i);
        else if (features[i].kind == QP_RAGGED && features[i].dtype != QP_BYTES)
            item = handed_numbers(&features[i]);
        else
            item = feature_result(&features[i]);
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, i, item);
    }
done:
    if (features != NULL) {
        for (Py_ssize_t i = 0; i < n_features; i++) {
            qp_blocks_keep(&features[i].values);  /* (not handed over: kept or freed) */
            qp_feature_release(&features[i]);
        }
    }
    if (views != NULL) {
        for (Py_ssize_t i = 0; i < n_features; i++) {
            if (views[i].obj != NULL)
                PyBuffer_Release(&views[i]);
        }
    }
    if (present.obj != NULL)
        PyBuffer_Release(&present);
    if (counts.obj != NULL)
        PyBuffer_Release(&counts);
    if (back.obj != NULL)
        PyBuffer_Release(&back);
    PyMem_Free(views);
    PyMem_Free(features);
    return result;
}

PyDoc_STRVAR(walk_examples_doc,
"walk_examples(records, spec, outs, present, counts, handed_back) -> tuple\n\n"
"Walks serialized Examples (a list or tuple of bytes) with the GIL released. spec: per\n"
"feature (key bytes, dtype 0 int64 / 1 float / 2 bytes, ragged, size, required). outs: per\n"
"feature a writable [n, size] int64/float32 buffer for a dense number feature; for a dense\n"
"bytes feature None, or a writable [n, size] object array whose items of the records that\n"
"hold the feature become its values (the others keep theirs); for a ragged bytes feature\n"
"None, or a callable that takes the number of values and returns a writable object array\n"
"of at least that many items, which gets them; else None.\n"
"present: writable uint8 [features, n]; counts: writable int64 [features, n];\n"
"handed_back: writable uint8 [n], set to 1 for each record left to the pure path.\n"
"Returns per feature None (values in outs), its ragged numbers (a Block, or an empty\n"
"bytearray: a writable buffer either way), the object array of a callable in outs, or a\n"
"list of bytes values.");

static PyObject *
walk_examples(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *records_arg, *spec, *outs, *present, *counts, *back;
    if (!PyArg_ParseTuple(args, "OO!O!OOO:walk_examples", &records_arg, &PyTuple_Type, &spec,
                          &PyTuple_Type, &outs, &present, &counts, &back))
        return NULL;
    /* A tuple holds a reference to every record while the GIL is released: a list could be
     * changed by another thread meanwhile. */
    PyObject *records = PySequence_Tuple(records_arg);
    if (records == NULL)
        return NULL;
    Py_ssize_t n_records = PyTuple_GET_SIZE(records);
    PyObject *result = NULL;
    qp_span *spans = PyMem_Calloc((size_t)n_records + 1, sizeof(qp_span));
    if (spans == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_records; i++) {
        PyObject *record = PyTuple_GET_ITEM(records, i);
        if (!PyBytes_Check(record)) {
            PyErr_Format(PyExc_TypeError, "walk_examples: records[%zd] is %.80s, not bytes",
                         i, Py_TYPE(record)->tp_name);
            goto done;
        }
        spans[i].data = (const uint8_t *)PyBytes_AS_STRING(record);
        spans[i].len = (size_t)PyBytes_GET_SIZE(record);
    }
    result = walk_spans(spans, n_records, spec, outs, present, counts, back);
done:
    PyMem_Free(spans);
    Py_DECREF(records);
    return result;
}

PyDoc_STRVAR(walk_one_doc,
"walk_one(record, spec, forms=b'') -> tuple or None\n\n"
"walk_examples of one serialized Example (bytes), for parse_single_example: every output\n"
"made here. Returns None when the record is left to the pure path, else per feature of\n"
"spec (as walk_examples') a bytearray of its size values for a dense number feature the\n"
"record holds, a list of bytes for a dense string feature it holds, None for a dense\n"
"feature it lacks (its default applies), and for a ragged feature what walk_examples\n"
"gives (a bytearray of numbers, or a list of bytes). forms: bytes, one per feature\n"
"(missing ones 0); where it is nonzero, a dense int64 feature of one value that the record\n"
"holds comes as an int instead of a bytearray, and a ragged int64 feature's n values as a\n"
"bytearray of 2n + 1 int64: 0, 1, ..., n, then the values (a SparseValue's indices, dense\n"
"shape and values, without an arange).");

/* A ragged int64 feature's n values as walk_one gives them with its form flag: a bytearray
 * of the int64 0, 1, ..., n, then the n values. */
static PyObject *
counted_numbers(const qp_feature *f)
{
    size_t n = f->values.len / sizeof(int64_t);  /* whole values: the walk writes int64 */
    size_t values_bytes = n * sizeof(int64_t), counts_bytes;
    if (__builtin_mul_overflow(n + 1, sizeof(int64_t), &counts_bytes)
        || counts_bytes > (size_t)PY_SSIZE_T_MAX - values_bytes) {
        PyErr_NoMemory();
        return NULL;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL,
                                                  (Py_ssize_t)(counts_bytes + values_bytes));
    if (out == NULL)
        return NULL;
    char *dest = PyByteArray_AS_STRING(out);
    for (size_t i = 0; i <= n; i++) {
        int64_t count = (int64_t)i;
        memcpy(dest + i * sizeof count, &count, sizeof count);
    }
    if (values_bytes != 0)
        memcpy(dest + counts_bytes, f->values.data, values_bytes);
    return out;
}

/* The dense number outputs of walk_one: per feature a bytearray of size values (the walk
 * writes them) where features[i] is a dense number feature, else None. NULL with
 * OverflowError or MemoryError for a size memory cannot hold. */
static PyObject *
dense_outputs(qp_feature *features, Py_ssize_t n_features)
{
    PyObject *outs = PyTuple_New(n_features);
    if (outs == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n_features; i++) {
        qp_feature *f = &features[i];
        PyObject *out = Py_None;
        if (f->kind == QP_DENSE && f->dtype != QP_BYTES) {
            size_t n_bytes;
            size_t width = f->dtype == QP_INT64 ? sizeof(int64_t) : sizeof(float);
            if (f->size > (uint64_t)PY_SSIZE_T_MAX
                || __builtin_mul_overflow((size_t)f->size, width, &n_bytes)
                || n_bytes > (size_t)PY_SSIZE_T_MAX) {
                PyErr_Format(PyExc_OverflowError, "walk_one: spec[%zd]'s size is more values "
                             "than memory holds", i);
                Py_DECREF(outs);
                return NULL;
            }
            out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n_bytes);
            if (out == NULL) {
                Py_DECREF(outs);
                return NULL;
            }
            f->dense = (uint8_t *)PyByteArray_AS_STRING(out);
            f->dense_len_bytes = n_bytes;
        }
        else {
            Py_INCREF(out);
        }
        PyTuple_SET_ITEM(outs, i, out);
    }
    return outs;
}

static PyObject *
walk_one(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *record, *spec, *forms = NULL;
    if (!PyArg_ParseTuple(args, "O!O!|O!:walk_one", &PyBytes_Type, &record, &PyTuple_Type,
                          &spec, &PyBytes_Type, &forms))
        return NULL;
    Py_ssize_t n_features = PyTuple_GET_SIZE(spec);
    /* forms[i] for i below its length, else 0: read only within the bytes given */
    const char *form_flags = forms == NULL ? "" : PyBytes_AS_STRING(forms);
    Py_ssize_t n_flags = forms == NULL ? 0 : PyBytes_GET_SIZE(forms);
    PyObject *result = NULL, *outs = NULL;
    qp_feature *features = NULL;
    uint8_t *present = PyMem_Calloc((size_t)n_features + 1, 1);
    int64_t *counts = PyMem_Calloc((size_t)n_features + 1, sizeof(int64_t));
    if (present == NULL || counts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (read_specs(spec, 0, "walk_one", &features) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n_features; i++) {
        features[i].present = &present[i];
        features[i].counts = &counts[i];
    }
    outs = dense_outputs(features, n_features);
    if (outs == NULL) {
        /* A size past what memory holds: the pure path raises its own error for it. */
        if (PyErr_ExceptionMatches(PyExc_MemoryError)
            || PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            result = Py_NewRef(Py_None);
        }
        goto done;
    }
    qp_span span = {(const uint8_t *)PyBytes_AS_STRING(record),
                    (size_t)PyBytes_GET_SIZE(record)};
    uint8_t handed_back = 1;
    PyThreadState *saved = qp_gil_let_go(span.len, QP_GIL_FREE_WALK_BYTES);
    qp_walk_status status = qp_walk_examples(&span, 1, features, (size_t)n_features,
                                             &handed_back);
    qp_gil_take(saved);
    if (raise_for(status, "walk_one") < 0)
        goto done;
    if (handed_back) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = PyTuple_New(n_features);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n_features; i++) {
        qp_feature *f = &features[i];
        PyObject *item;
        if (f->kind == QP_DENSE && !present[i])
            item = Py_NewRef(Py_None);
        else if (f->kind == QP_DENSE && f->dtype == QP_INT64 && f->size == 1
                 && i < n_flags && form_flags[i] != 0) {
            int64_t value; /* the one value the walk wrote (dense_len_bytes is 8) */
            memcpy(&value, f->dense, sizeof value);
            item = PyLong_FromLongLong((long long)value);
        }
        else if (f->kind == QP_RAGGED && f->dtype == QP_INT64 && i < n_flags
                 && form_flags[i] != 0)
            item = counted_numbers(f);
        else if (f->kind == QP_DENSE && f->dtype != QP_BYTES)
            item = Py_NewRef(PyTuple_GET_ITEM(outs, i));
        else
            item = feature_result(f);
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, i, item);
    }
done:
    for (Py_ssize_t i = 0; features != NULL && i < n_features; i++)
        qp_feature_release(&features[i]);
    Py_XDECREF(outs);
    PyMem_Free(features);
    PyMem_Free(present);
    PyMem_Free(counts);
    return result;
}

/* The items of a list, a tuple, or a C-contiguous 1-D object array (a NumPy array of dtype
 * object: buffer format "O"), as *items and *n, borrowed while the GIL is held and nothing
 * runs Python code; release view afterwards when view->obj is set. -1 with TypeError for
 * anything else. */
static int
object_items(PyObject *obj, const char *function, Py_buffer *view, PyObject *const **items,
             Py_ssize_t *n)
{
    view->obj = NULL;
    if (PyList_CheckExact(obj) || PyTuple_CheckExact(obj)) {
        *items = PySequence_Fast_ITEMS(obj);
        *n = PySequence_Fast_GET_SIZE(obj);
        return 0;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        view->obj = NULL;
    }
    else if (view->format != NULL && strcmp(view->format, "O") == 0 && view->ndim == 1
             && view->itemsize == (Py_ssize_t)sizeof(PyObject *)) {
        *items = (PyObject *const *)view->buf;
        *n = view->len / (Py_ssize_t)sizeof(PyObject *);
        return 0;
    }
    else {
        PyBuffer_Release(view);
        view->obj = NULL;
    }
    PyErr_Format(PyExc_TypeError, "%s takes a list, a tuple or a C-contiguous 1-D object array",
                 function);
    return -1;
}

/* Whether every one of items[0:n] is exactly bytes (no subclass), each of `length` bytes
 * when length >= 0. */
static int
all_bytes(PyObject *const *items, Py_ssize_t n, Py_ssize_t length)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i] == NULL || !PyBytes_CheckExact(items[i])
            || (length >= 0 && PyBytes_GET_SIZE(items[i]) != length))
            return 0;
    }
    return 1;
}

PyDoc_STRVAR(exact_bytes_doc,
"exact_bytes(items) -> list or None\n\n"
"A new list of items (a list, a tuple or a 1-D object array) when every one is exactly\n"
"bytes, else None.");

static PyObject *
exact_bytes(PyObject *module, PyObject *obj)
{
    (void)module;
    Py_buffer view;
    PyObject *const *items;
    Py_ssize_t n;
    if (object_items(obj, "exact_bytes", &view, &items, &n) < 0)
        return NULL;
    PyObject *result = all_bytes(items, n, -1) ? PyList_New(n) : Py_NewRef(Py_None);
    if (result != NULL && result != Py_None) {
        /* Making a list may run a collection, and finalizers with it, which could change a
         * list given: its items are taken again and checked again. */
        if (view.obj == NULL)
            items = PySequence_Fast_ITEMS(obj);
        if ((view.obj == NULL && PySequence_Fast_GET_SIZE(obj) != n)
            || !all_bytes(items, n, -1)) {
            Py_SETREF(result, Py_NewRef(Py_None));
        }
        else {
            for (Py_ssize_t i = 0; i < n; i++)
                PyList_SET_ITEM(result, i, Py_NewRef(items[i]));
        }
    }
    if (view.obj != NULL)
        PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(all_exact_bytes_doc,
"all_exact_bytes(items) -> bool\n\n"
"Whether every item of items (a list, a tuple or a 1-D object array) is exactly bytes: what\n"
"exact_bytes checks, without the list it makes (a queue's check of a chunk of records).");

static PyObject *
all_exact_bytes(PyObject *module, PyObject *obj)
{
    (void)module;
    Py_buffer view;
    PyObject *const *items;
    Py_ssize_t n;
    if (object_items(obj, "all_exact_bytes", &view, &items, &n) < 0)
        return NULL;
    int all = all_bytes(items, n, -1);  /* (runs no Python code: the items stay as they are) */
    if (view.obj != NULL)
        PyBuffer_Release(&view);
    return PyBool_FromLong(all);
}

PyDoc_STRVAR(join_equal_doc,
"join_equal(items) -> bytearray or None\n\n"
"The items (a list, a tuple or a 1-D object array of at least one item) one after the\n"
"other in a new bytearray when every one is exactly bytes and all have the same length,\n"
"else None. Copies 64 KiB or more without the GIL.");

static PyObject *
join_equal(PyObject *module, PyObject *obj)
{
    (void)module;
    Py_buffer view;
    PyObject *const *items;
    Py_ssize_t n;
    if (object_items(obj, "join_equal", &view, &items, &n) < 0)
        return NULL;
    PyObject *result = NULL, **held = NULL;
    Py_ssize_t length = n > 0 && items[0] != NULL && PyBytes_CheckExact(items[0])
                        ? PyBytes_GET_SIZE(items[0]) : -1;
    size_t total;
    if (length < 0 || !all_bytes(items, n, length)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (__builtin_mul_overflow((size_t)n, (size_t)length, &total)
        || total > (size_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "join_equal: more bytes than memory holds");
        goto done;
    }
    /* The items are copied without the GIL, while another thread may change the list or
     * array given: each is held by a reference of this call's own until the copy is done
     * (bytes never change). */
    if ((held = PyMem_Malloc((size_t)n * sizeof(PyObject *))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        held[i] = Py_NewRef(items[i]);
    /* (allocating a bytearray runs no Python code: the items are the ones checked) */
    result = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (result != NULL) {
        char *out = PyByteArray_AS_STRING(result);
        PyThreadState *saved = qp_gil_let_go(total, QP_GIL_FREE_BYTES);
        for (Py_ssize_t i = 0; i < n; i++)
            memcpy(out + (size_t)i * (size_t)length, PyBytes_AS_STRING(held[i]),
                   (size_t)length);
        qp_gil_take(saved);
    }
    for (Py_ssize_t i = 0; i < n; i++)
        Py_DECREF(held[i]);
    PyMem_Free(held);
done:
    if (view.obj != NULL)
        PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(sparse_table_doc,
"sparse_table(counts, n, table) -> None\n\n"
"Where each batch of n records' VarLenFeature SparseValues lie, from the counts the walk\n"
"gave (counts: a C-contiguous int64 array of [features, records], records a multiple of n)\n"
"into table (a writable C-contiguous int64 array of [records / n, features, 5]): for each\n"
"batch and feature, n and the longest count (the dense shape), where its indices begin and\n"
"end among the batch's, and where its values begin among the feature's. Keeps the GIL.\n"
"ValueError for a negative count or a table of another size. (The pure twin:\n"
"queuepipe.parsing._sinks.pure_sparse_table.)");

/* Takes a C-contiguous int64 array (numpy's "l" or "q" on LP64) of ndim axes from obj. */
static int
int64_array(PyObject *obj, Py_buffer *view, int ndim, int writable_too)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable_too ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    if (view->ndim == ndim && view->itemsize == 8 && view->format != NULL
        && view->format[0] != '\0' && strchr("lq", view->format[0]) != NULL
        && view->format[1] == '\0')
        return 0;
    PyBuffer_Release(view);
    view->obj = NULL;
    PyErr_Format(PyExc_ValueError, "sparse_table: counts and table must be C-contiguous "
                 "int64 arrays of 2 and 3 axes, the table writable");
    return -1;
}

static PyObject *
sparse_table(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *counts_arg, *table_arg, *result = NULL;
    Py_ssize_t per_batch;
    if (!PyArg_ParseTuple(args, "OnO:sparse_table", &counts_arg, &per_batch, &table_arg))
        return NULL;
    Py_buffer counts = {0}, table = {0};
    if (per_batch < 0) {
        PyErr_Format(PyExc_ValueError, "sparse_table: n is %zd, negative", per_batch);
        return NULL;
    }
    if (int64_array(counts_arg, &counts, 2, 0) < 0 || int64_array(table_arg, &table, 3, 1) < 0)
        goto done;
    if (qp_sparse_table(counts.buf, (size_t)counts.shape[0], (size_t)counts.shape[1],
                        (size_t)per_batch, table.buf, (size_t)table.len / sizeof(int64_t))
        != QP_WALK_OK) {
        PyErr_SetString(PyExc_ValueError, "sparse_table: a count is negative, the records are "
                        "not batches of n, or the table is not [records / n, features, 5]");
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    if (counts.obj != NULL)
        PyBuffer_Release(&counts);
    if (table.obj != NULL)
        PyBuffer_Release(&table);
    return result;
}

/* (held, count, values) of a context feature, or (steps, values) of a feature list. */
static PyObject *
sequence_result(const qp_feature *f, int list, uint8_t held, int64_t count)
{
    PyObject *values = feature_result(f);
    if (values == NULL)
        return NULL;
    if (!list)
        return Py_BuildValue("(OLN)", held ? Py_True : Py_False, (long long)count, values);
    return Py_BuildValue("(NN)", PyByteArray_FromStringAndSize((const char *)f->steps.data,
                                                             (Py_ssize_t)f->steps.len),
                         values);
}

PyDoc_STRVAR(walk_sequence_example_doc,
"walk_sequence_example(record, context_spec, list_spec, context_outs) -> tuple or None\n\n"
"Walks one serialized SequenceExample (bytes) with the GIL released. context_spec and\n"
"context_outs as walk_examples' spec and outs for one record; list_spec: per feature list\n"
"(key bytes, dtype, fixed_steps, stride, required). Returns None when the pure path must\n"
"parse the record, else (context, lists): per context feature (held, count, values), per\n"
"list (a bytearray of each step's int64 count, values); values as walk_examples gives\n"
"them.");

static PyObject *
walk_sequence_example(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *record, *context_spec, *list_spec, *outs;
    if (!PyArg_ParseTuple(args, "O!O!O!O!:walk_sequence_example", &PyBytes_Type, &record,
                          &PyTuple_Type, &context_spec, &PyTuple_Type, &list_spec,
                          &PyTuple_Type, &outs))
        return NULL;
    Py_ssize_t n_context = PyTuple_GET_SIZE(context_spec);
    Py_ssize_t n_lists = PyTuple_GET_SIZE(list_spec);
    if (PyTuple_GET_SIZE(outs) != n_context) {
        PyErr_Format(PyExc_ValueError, "walk_sequence_example: %zd outs for %zd features",
                     PyTuple_GET_SIZE(outs), n_context);
        return NULL;
    }
    PyObject *result = NULL, *context_out = NULL, *lists_out = NULL;
    qp_feature *context = NULL, *lists = NULL;
    Py_buffer *views = PyMem_Calloc((size_t)n_context + 1, sizeof(Py_buffer));
    uint8_t *flags = PyMem_Calloc((size_t)(n_context + n_lists) + 1, 1);
    int64_t *counts = PyMem_Calloc((size_t)(n_context + n_lists) + 1, sizeof(int64_t));
    if (views == NULL || flags == NULL || counts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (read_specs(context_spec, 0, "walk_sequence_example", &context) < 0
        || read_specs(list_spec, 1, "walk_sequence_example", &lists) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n_context + n_lists; i++) {
        qp_feature *f = i < n_context ? &context[i] : &lists[i - n_context];
        f->present = &flags[i];
        f->counts = &counts[i];
    }
    for (Py_ssize_t i = 0; i < n_context; i++) {
        PyObject *out = PyTuple_GET_ITEM(outs, i);
        int numbers = context[i].kind == QP_DENSE && context[i].dtype != QP_BYTES;
        if ((out == Py_None) == numbers) {
            PyErr_Format(PyExc_ValueError, "walk_sequence_example: outs[%zd] must be %s", i,
                         numbers ? "a writable buffer" : "None");
            goto done;
        }
        if (out == Py_None)
            continue;
        if (writable(out, &views[i], 0, "an output") < 0)
            goto done;
        context[i].dense = views[i].buf;
        context[i].dense_len_bytes = (size_t)views[i].len;
    }
    qp_span span = {(const uint8_t *)PyBytes_AS_STRING(record),
                    (size_t)PyBytes_GET_SIZE(record)};
    uint8_t handed_back = 1;
    PyThreadState *saved = qp_gil_let_go(span.len, QP_GIL_FREE_WALK_BYTES);
    qp_walk_status status = qp_walk_sequence_example(span, context, (size_t)n_context, lists,
                                                     (size_t)n_lists, &handed_back);
    qp_gil_take(saved);
    if (raise_for(status, "walk_sequence_example") < 0)
        goto done;
    if (handed_back) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    context_out = PyTuple_New(n_context);
    lists_out = PyTuple_New(n_lists);
    if (context_out == NULL || lists_out == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n_context + n_lists; i++) {
        int list = i >= n_context;
        qp_feature *f = list ? &lists[i - n_context] : &context[i];
        PyObject *item = sequence_result(f, list, flags[i], counts[i]);
        if (item == NULL)
            goto done;
        PyTuple_SET_ITEM(list ? lists_out : context_out, list ? i - n_context : i, item);
    }
    result = PyTuple_Pack(2, context_out, lists_out);
done:
    for (Py_ssize_t i = 0; context != NULL && i < n_context; i++)
        qp_feature_release(&context[i]);
    for (Py_ssize_t i = 0; lists != NULL && i < n_lists; i++)
        qp_feature_release(&lists[i]);
    for (Py_ssize_t i = 0; views != NULL && i < n_context; i++) {
        if (views[i].obj != NULL)
            PyBuffer_Release(&views[i]);
    }
    Py_XDECREF(context_out);
    Py_XDECREF(lists_out);
    PyMem_Free(context);
    PyMem_Free(lists);
    PyMem_Free(views);
    PyMem_Free(flags);
    PyMem_Free(counts);
    return result;
}

static PyMethodDef example_methods[] = {
    {"walk_examples", walk_examples, METH_VARARGS, walk_examples_doc},
    {"walk_one", walk_one, METH_VARARGS, walk_one_doc},
    {"exact_bytes", exact_bytes, METH_O, exact_bytes_doc},
    {"all_exact_bytes", all_exact_bytes, METH_O, all_exact_bytes_doc},
    {"join_equal", join_equal, METH_O, join_equal_doc},
    {"sparse_table", sparse_table, METH_VARARGS, sparse_table_doc},
    {"walk_sequence_example", walk_sequence_example, METH_VARARGS,
     walk_sequence_example_doc},
    {NULL, NULL, 0, NULL},
};

int
qp_example_add_functions(PyObject *module)
{
    return PyModule_AddFunctions(module, example_methods);
}
