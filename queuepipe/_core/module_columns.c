/* The CPython layer of the sparse columns' arena moves (columns.c): converts arguments and
 * raises what the pure twin in queuepipe/_columns.py raises. */
#include "module_columns.h"

#include <string.h>

#include "columns.h"
#include "gil.h"

/* Takes a C-contiguous buffer of int64 from obj into view. */
static int
int64_buffer(PyObject *obj, Py_buffer *view, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        view->obj = NULL;
    } else if (view->itemsize == 8 && view->format != NULL && view->format[0] != '\0'
               && strchr("lq", view->format[0]) != NULL && view->format[1] == '\0') {
        return 0;
    } else {
        PyBuffer_Release(view);
        view->obj = NULL;
    }
    PyErr_Format(PyExc_ValueError, "compact_segments: %s must be a C-contiguous array of "
                 "int64", what);
    return -1;
}

/* Takes the arena, a writable C-contiguous array of numbers (not of Python objects, whose
 * references a raw move would duplicate), into view; its items are its rows. */
static int
arena_buffer(PyObject *obj, Py_buffer *view, size_t *n_items, size_t *item_bytes)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        view->obj = NULL;
    } else if (view->ndim >= 1 && view->format != NULL && strchr(view->format, 'O') == NULL) {
        *n_items = (size_t)view->shape[0];
        *item_bytes = *n_items ? (size_t)view->len / *n_items : 0;
        return 0;
    } else {
        PyBuffer_Release(view);
        view->obj = NULL;
    }
    PyErr_SetString(PyExc_ValueError, "compact_segments: the arena must be a writable "
                    "C-contiguous array of numbers");
    return -1;
}

static const char *const refusals[] = {
    [QP_COLUMNS_NEGATIVE] = "has a negative start or length",
    [QP_COLUMNS_ORDER] = "begins before the end of the segment before it",
    [QP_COLUMNS_PAST_END] = "ends past the arena's end",
};

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
    Py_buffer arena = {0}, starts = {0}, lengths = {0};
    size_t n_items, item_bytes, n_live = 0, bad = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO:compact_segments", &arena_arg, &starts_arg, &lengths_arg))
        return NULL;
    if (arena_buffer(arena_arg, &arena, &n_items, &item_bytes) < 0
        || int64_buffer(starts_arg, &starts, "starts") < 0
        || int64_buffer(lengths_arg, &lengths, "lengths") < 0)
        goto done;
    if (starts.len != lengths.len) {
        PyErr_Format(PyExc_ValueError, "compact_segments: %zd starts but %zd lengths",
                     starts.len / 8, lengths.len / 8);
        goto done;
    }
    size_t n_segments = (size_t)starts.len / 8;
    PyThreadState *saved = qp_gil_let_go((size_t)arena.len, QP_GIL_FREE_BYTES);
    qp_columns_status status = qp_columns_compact(arena.buf, n_items, item_bytes, starts.buf,
                                                  lengths.buf, n_segments, &n_live, &bad);
    qp_gil_take(saved);
    if (status != QP_COLUMNS_OK) {
        PyErr_Format(PyExc_ValueError, "compact_segments: segment %zu (start %lld, length "
                     "%lld) %s", bad, (long long)((const int64_t *)starts.buf)[bad],
                     (long long)((const int64_t *)lengths.buf)[bad], refusals[status]);
        goto done;
    }
    result = PyLong_FromSize_t(n_live);
done:
    if (arena.obj)
        PyBuffer_Release(&arena);
    if (starts.obj)
        PyBuffer_Release(&starts);
    if (lengths.obj)
        PyBuffer_Release(&lengths);
    return result;
}

static PyMethodDef columns_methods[] = {
    {"compact_segments", py_compact_segments, METH_VARARGS, compact_segments_doc},
    {NULL, NULL, 0, NULL}};

int
qp_columns_add_functions(PyObject *module)
{
    return PyModule_AddFunctions(module, columns_methods);
}
