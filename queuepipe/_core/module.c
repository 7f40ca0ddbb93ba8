/* queuepipe._qpcore: the CPython layer of the compiled core, and the only framing file that
 * includes Python.h. It converts arguments (buffers through the buffer protocol, so no NumPy
 * headers), calls the pure-C code with the GIL released, and builds results and errors. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "crc32c.h"
#include "frames.h"
#include "gil.h"
#include "module_blocks.h"
#include "module_bytes.h"
#include "module_columns.h"
#include "module_example.h"

/* Bumped whenever a function of this module changes what it takes or gives; queuepipe/_core.py
 * refuses a module whose number differs from its own (a stale build of an older source). */
#define QP_ABI_VERSION 29


static uint32_t
crc_of(uint32_t crc, const Py_buffer *data, uint32_t (*fn)(uint32_t, const uint8_t *, size_t))
{
    PyThreadState *saved = qp_gil_let_go((size_t)data->len, QP_GIL_FREE_BYTES);
    crc = fn(crc, data->buf, (size_t)data->len);
    qp_gil_take(saved);
    return crc;
}

static PyObject *
crc32c_common(PyObject *args, uint32_t (*fn)(uint32_t, const uint8_t *, size_t))
{
    Py_buffer data;
    unsigned long crc = 0;
    if (!PyArg_ParseTuple(args, "y*|k", &data, &crc)) {
        return NULL;
    }
    uint32_t result = crc_of((uint32_t)crc, &data, fn);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(result);
}

PyDoc_STRVAR(crc32c_doc,
"crc32c(data, value=0, /)\n--\n\n"
"The CRC-32C of data (a bytes-like object), continuing from value, the CRC-32C of the\n"
"bytes before (as the crc32c package's crc32c).");

static PyObject *
py_crc32c(PyObject *self, PyObject *args)
{
    (void)self;
    return crc32c_common(args, qp_crc32c);
}

PyDoc_STRVAR(crc32c_by_table_doc,
"crc32c_by_table(data, value=0, /)\n--\n\n"
"crc32c by the table implementation, whatever instruction the CPU has (for tests).");

static PyObject *
py_crc32c_by_table(PyObject *self, PyObject *args)
{
    (void)self;
    return crc32c_common(args, qp_crc32c_by_table);
}

PyDoc_STRVAR(masked_crc32c_doc,
"masked_crc32c(data, /)\n--\n\n"
"The masked CRC-32C of data that a TFRecord frame stores.");

static PyObject *
py_masked_crc32c(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    uint32_t crc = crc_of(0, &data, qp_crc32c);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(qp_crc32c_mask(crc));
}

PyDoc_STRVAR(frame_doc,
"frame(record, /)\n--\n\n"
"record (a bytes-like object) framed as one TFRecord: header, data, footer, as bytes.");

static PyObject *
py_frame(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *out = NULL;
    if (data.len > PY_SSIZE_T_MAX - QP_FRAME_BYTES) {
        PyErr_Format(PyExc_OverflowError, "frame: a record of %zd bytes is too long to frame",
                     data.len);
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, data.len + QP_FRAME_BYTES);
    if (out == NULL) {
        goto done;
    }
    uint8_t *dest = (uint8_t *)PyBytes_AS_STRING(out);
    PyThreadState *saved = qp_gil_let_go((size_t)data.len, QP_GIL_FREE_BYTES);
    qp_frame_write(data.buf, (size_t)data.len, dest);
    qp_gil_take(saved);
done:
    PyBuffer_Release(&data);
    return out;
}

/* The offsets base + starts[i] of n frames, as a list of ints. */
static PyObject *
offsets_of(Py_ssize_t base, size_t n, const size_t *starts)
{
    PyObject *offsets = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; offsets != NULL && i < n; i++) {
        PyObject *offset = PyLong_FromSsize_t(base + (Py_ssize_t)starts[i]);
        if (offset == NULL) {
            Py_CLEAR(offsets);
            break;
        }
        PyList_SET_ITEM(offsets, (Py_ssize_t)i, offset);
    }
    return offsets;
}

/* The data of n frames of buf (frame i at starts[i], lengths[i] data bytes) as a list of
 * bytes. */
static PyObject *
records_of(const uint8_t *buf, size_t n, const size_t *starts, const size_t *lengths)
{
    PyObject *records = PyList_New((Py_ssize_t)n);
    uint8_t **dest = PyMem_Malloc((n ? n : 1) * sizeof(uint8_t *));
    size_t total = 0;
    if (records == NULL || dest == NULL) {
        if (dest == NULL) {
            PyErr_NoMemory();
        }
        goto error;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *record = qp_bytes_new((Py_ssize_t)lengths[i]);
        if (record == NULL) {
            goto error;
        }
        PyList_SET_ITEM(records, (Py_ssize_t)i, record);
        dest[i] = (uint8_t *)PyBytes_AS_STRING(record);
        total += lengths[i];
    }
    /* The new bytes objects are ours alone until returned: filled without the GIL. */
    PyThreadState *saved = qp_gil_let_go(total, QP_GIL_FREE_BYTES);
    for (size_t i = 0; i < n; i++) {
        memcpy(dest[i], buf + starts[i] + QP_FRAME_HEADER_BYTES, lengths[i]);
    }
    qp_gil_take(saved);
    PyMem_Free(dest);
    return records;
error:
    PyMem_Free(dest);
    Py_XDECREF(records);
    return NULL;
}

/* Scans the frames in buffer[pos:end] (0 <= pos <= end <= its length, checked by the
 * caller), at most max_records (>= 0), without the GIL: allocates *starts and *lengths (for
 * the caller to PyMem_Free, on error too) and stores what qp_frames_scan gives. 0, or -1
 * with MemoryError raised. */
static int
scan_unlocked(const Py_buffer *buffer, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_records,
              size_t **starts, size_t **lengths, size_t *n, size_t *stop,
              qp_frames_status *status)
{
    /* A frame takes at least 16 bytes, so at most (end - pos) / 16 fit: the arrays are
     * bounded by the buffer, never by a length read from it. One more than fit lets the
     * scan go on to the frame after them and say why it stops there. */
    size_t cap = (size_t)(end - pos) / QP_FRAME_BYTES + 1;
    if ((size_t)max_records < cap) {
        cap = (size_t)max_records;
    }
    *starts = PyMem_Malloc((cap ? cap : 1) * sizeof(size_t));
    *lengths = PyMem_Malloc((cap ? cap : 1) * sizeof(size_t));
    if (*starts == NULL || *lengths == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    const uint8_t *scanned = (const uint8_t *)buffer->buf + pos;
    size_t *frame_starts = *starts, *data_lengths = *lengths;
    PyThreadState *saved = qp_gil_let_go((size_t)(end - pos), QP_GIL_FREE_BYTES);
    *status = qp_frames_scan(scanned, (size_t)(end - pos), cap, frame_starts, data_lengths, n,
                             stop);
    qp_gil_take(saved);
    return 0;
}

/* Checks scan_frames' and scan_region's arguments (named by function); 0, or -1 with a
 * ValueError raised. */
static int
check_scan_arguments(const char *function, const Py_buffer *buffer, Py_ssize_t pos,
                     Py_ssize_t end, Py_ssize_t max_records, Py_ssize_t base)
{
    if (pos < 0 || pos > end || end > buffer->len) {
        PyErr_Format(PyExc_ValueError,
                     "%s: pos %zd and end %zd must satisfy 0 <= pos <= end <= %zd, "
                     "the buffer's length", function, pos, end, buffer->len);
        return -1;
    }
    if (max_records < 0 || base < 0) {
        PyErr_Format(PyExc_ValueError, "%s: max_records (%zd) and base (%zd) must be >= 0",
                     function, max_records, base);
        return -1;
    }
    /* Every offset returned is base + an index below end: all of them fit when this does. */
    if (base > PY_SSIZE_T_MAX - end) {
        PyErr_Format(PyExc_ValueError,
                     "%s: base (%zd) + end (%zd) passes 2**63 - 1, the largest offset",
                     function, base, end);
        return -1;
    }
    return 0;
}

/* Frames of this many bytes or more on average are not copied into a region: scan_region
 * gives their records, as scan_frames does. A bytes object costs them little beside their
 * bytes, and a second copy of a chunk of them (100 KiB records: 50 MB a chunk) came in fresh
 * pages, too big to keep. */
#define QP_REGION_LONGEST_FRAME 16384

/* The frames of buffer[pos:end] as scan_frames (region 0) or scan_region (region 1) gives
 * them; the arguments are parsed from args by either. */
static PyObject *
scan(PyObject *args, const char *format, const char *function, int region)
{
    Py_buffer buffer;
    Py_ssize_t pos, end, max_records, base;
    int with_offsets = 1;
    if (!PyArg_ParseTuple(args, format, &buffer, &pos, &end, &max_records, &base,
                          &with_offsets)) {
        return NULL;
    }
    PyObject *result = NULL, *offsets = NULL, *taken = NULL;
    size_t *starts = NULL, *lengths = NULL;
    size_t n = 0, stop = 0;
    qp_frames_status status;
    if (check_scan_arguments(function, &buffer, pos, end, max_records, base) < 0
        || scan_unlocked(&buffer, pos, end, max_records, &starts, &lengths, &n, &stop,
                         &status) < 0) {
        goto done;
    }
    const uint8_t *scanned = (const uint8_t *)buffer.buf + pos;
    if ((offsets = with_offsets ? offsets_of(base + pos, n, starts) : Py_NewRef(Py_None))
        == NULL) {
        goto done;
    }
    if (!region || stop / (n ? n : 1) >= QP_REGION_LONGEST_FRAME) {
        taken = records_of(scanned, n, starts, lengths);
    }
    else {
        /* The frames taken end where the scan stopped (the first one not taken, if any,
         * starts there). */
        uint8_t *copy;
        taken = qp_blocks_new(stop, &copy);
        if (taken != NULL) {
            PyThreadState *saved = qp_gil_let_go(stop, QP_GIL_FREE_BYTES);
            memcpy(copy, scanned, stop);
            qp_gil_take(saved);
        }
    }
    if (taken == NULL) {
        goto done;
    }
    result = Py_BuildValue("NNni", offsets, taken, pos + (Py_ssize_t)stop, (int)status);
    offsets = taken = NULL;
done:
    Py_XDECREF(offsets);
    Py_XDECREF(taken);
    PyMem_Free(starts);
    PyMem_Free(lengths);
    PyBuffer_Release(&buffer);
    return result;
}

PyDoc_STRVAR(scan_frames_doc,
"scan_frames(buffer, pos, end, max_records, base, offsets=True, /)\n--\n\n"
"Takes the intact TFRecord frames lying back to back in buffer[pos:end], at most\n"
"max_records, checking both checksums of each, without the GIL.\n\n"
"Returns (offsets, records, stop, status): the frames' offsets (base + their index in\n"
"buffer; None when offsets is false, for a caller that knows them: the list costs an int\n"
"a record) and data (bytes), the index just past the last frame taken, and why the scan\n"
"stopped at stop (0: max_records taken or the end reached; 1: a header cut short; 2: a\n"
"length checksum mismatch; 3: a frame running past end; 4: a data checksum mismatch).");

static PyObject *
py_scan_frames(PyObject *self, PyObject *args)
{
    (void)self;
    return scan(args, "y*nnnn|p", "scan_frames", 0);
}

PyDoc_STRVAR(scan_region_doc,
"scan_region(buffer, pos, end, max_records, base, offsets=True, /)\n--\n\n"
"scan_frames, but the frames taken are returned as one copy of buffer[pos:stop] (a Block)\n"
"in place of their records, for cut_frames to cut: a caller that must scan in order, under\n"
"a lock, makes the records after it. Frames of 16 KiB or more on average are not copied:\n"
"their records (a list of bytes) are returned, as scan_frames returns them.\n\n"
"Returns (offsets, frames or records, stop, status), as scan_frames.");

static PyObject *
py_scan_region(PyObject *self, PyObject *args)
{
    (void)self;
    return scan(args, "y*nnnn|p", "scan_region", 1);
}

PyDoc_STRVAR(cut_frames_doc,
"cut_frames(frames, /)\n--\n\n"
"The data of the TFRecord frames lying back to back in frames (a buffer: what scan_region\n"
"gives), as a list of bytes. Their lengths are checked against the bytes left, not their\n"
"checksums (scan_region checked them).\n\n"
"Raises ValueError when frames does not hold whole frames from its start to its end.");

static PyObject *
py_cut_frames(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_buffer frames;
    if (PyObject_GetBuffer(arg, &frames, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    size_t cap = (size_t)frames.len / QP_FRAME_BYTES + 1;  /* (bounded by the buffer) */
    size_t *starts = PyMem_Malloc(cap * sizeof(size_t));
    size_t *lengths = PyMem_Malloc(cap * sizeof(size_t));
    size_t n = 0, stop = 0;
    if (starts == NULL || lengths == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (qp_frames_walk(frames.buf, (size_t)frames.len, cap, starts, lengths, &n, &stop)
            != QP_FRAMES_OK || stop != (size_t)frames.len) {
        PyErr_Format(PyExc_ValueError, "cut_frames: the buffer holds no whole frame at %zu of "
                     "its %zd bytes", stop, frames.len);
        goto done;
    }
    result = records_of(frames.buf, n, starts, lengths);
done:
    PyMem_Free(starts);
    PyMem_Free(lengths);
    PyBuffer_Release(&frames);
    return result;
}

/* Whether views[i] holds exactly one intact frame of lengths[i] bytes, for every i; stores
 * each one's data length in data_lengths. */
static int
all_intact(const Py_buffer *views, const int64_t *lengths, size_t n, size_t *data_lengths)
{
    for (size_t i = 0; i < n; i++) {
        size_t start, n_records, stop;
        if (lengths[i] != (int64_t)views[i].len
            || qp_frames_scan(views[i].buf, (size_t)views[i].len, 1, &start, &data_lengths[i],
                              &n_records, &stop) != QP_FRAMES_OK
            || n_records != 1 || stop != (size_t)views[i].len) {
            return 0;
        }
    }
    return 1;
}

PyDoc_STRVAR(unframe_doc,
"unframe(frames, lengths, /)\n--\n\n"
"The data of frames (a sequence of bytes-like objects, each one whole frame) as a list of\n"
"bytes, when frame i is lengths[i] (a buffer of int64) bytes long and intact (both\n"
"checksums checked, without the GIL); None when any is not, for the caller to say which.");

static PyObject *
py_unframe(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *frames, *result = NULL;
    Py_buffer lengths;
    if (!PyArg_ParseTuple(args, "Oy*", &frames, &lengths)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(frames, "unframe: frames must be a sequence");
    Py_buffer *views = NULL;
    size_t *data_lengths = NULL;
    Py_ssize_t n = 0, taken = 0;
    if (seq == NULL) {
        goto done;
    }
    n = PySequence_Fast_GET_SIZE(seq);
    if (lengths.len != n * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "unframe: lengths holds %zd bytes, not %zd int64 for "
                     "%zd frames", lengths.len, n, n);
        goto done;
    }
    /* all_intact reads lengths as int64_t: a misaligned buffer would be a misaligned load. */
    if ((uintptr_t)lengths.buf % sizeof(int64_t) != 0) {
        PyErr_SetString(PyExc_ValueError, "unframe: lengths starts at an address that is not "
                        "a multiple of 8 (int64)");
        goto done;
    }
    views = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Py_buffer));
    data_lengths = PyMem_Malloc((n ? (size_t)n : 1) * sizeof(size_t));
    if (views == NULL || data_lengths == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; taken < n; taken++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, taken), &views[taken],
                               PyBUF_SIMPLE) < 0) {
            goto done;
        }
    }
    size_t framed = 0;
    for (Py_ssize_t i = 0; i < n && framed < QP_GIL_FREE_BYTES; i++) {
        framed += (size_t)views[i].len;
    }
    PyThreadState *saved = qp_gil_let_go(framed, QP_GIL_FREE_BYTES);
    int intact = all_intact(views, (const int64_t *)lengths.buf, (size_t)n, data_lengths);
    qp_gil_take(saved);
    if (!intact) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    result = PyList_New(n);
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        PyObject *record = PyBytes_FromStringAndSize(
            (const char *)views[i].buf + QP_FRAME_HEADER_BYTES, (Py_ssize_t)data_lengths[i]);
        if (record == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, record);
    }
done:
    for (Py_ssize_t i = 0; i < taken; i++) {
        PyBuffer_Release(&views[i]);
    }
    PyMem_Free(views);
    PyMem_Free(data_lengths);
    Py_XDECREF(seq);
    PyBuffer_Release(&lengths);
    return result;
}

/* The most characters of an int64 in decimal: a sign and 19 digits. */
#define QP_INT64_DIGITS 20

/* Writes position in decimal at out (room for QP_INT64_DIGITS), as Python's "%d" does;
 * returns the characters written. */
static size_t
decimal(long long position, char *out)
{
    char reversed[QP_INT64_DIGITS];
    size_t n = 0;
    /* the magnitude as unsigned: -LLONG_MIN does not fit a long long */
    unsigned long long magnitude = position < 0 ? (unsigned long long)(-(position + 1)) + 1
                                                : (unsigned long long)position;
    do {
        reversed[n++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0);
    size_t written = 0;
    if (position < 0) {
        out[written++] = '-';
    }
    while (n > 0) {
        out[written++] = reversed[--n];
    }
    return written;
}

PyDoc_STRVAR(format_keys_doc,
"format_keys(prefix, positions, /)\n--\n\n"
"The keys b\"<prefix>:<position>\" of a list of ints (each within int64), as a list of\n"
"bytes: what readers.py's _format_keys makes, one C pass.");

static PyObject *
py_format_keys(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer prefix;
    PyObject *positions;
    if (!PyArg_ParseTuple(args, "y*O!", &prefix, &PyList_Type, &positions)) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(positions);
    PyObject *keys = PyList_New(n);
    if (keys == NULL) {
        goto done;
    }
    /* Making the list may run a collection and finalizers that change the list given; from
     * here on nothing runs Python code (bytes are not tracked by the collector). */
    if (PyList_GET_SIZE(positions) != n) {
        PyErr_SetString(PyExc_RuntimeError, "format_keys: positions changed size");
        Py_CLEAR(keys);
        goto done;
    }
    if (prefix.len > PY_SSIZE_T_MAX - 1 - QP_INT64_DIGITS) {
        PyErr_SetString(PyExc_OverflowError, "format_keys: the prefix is too long");
        Py_CLEAR(keys);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(positions, i);
        if (!PyLong_Check(item)) {
            PyErr_Format(PyExc_TypeError, "format_keys: positions[%zd] is %.80s, not int", i,
                         Py_TYPE(item)->tp_name);
            Py_CLEAR(keys);
            goto done;
        }
        long long position = PyLong_AsLongLong(item);
        if (position == -1 && PyErr_Occurred()) {
            Py_CLEAR(keys);
            goto done;
        }
        char digits[QP_INT64_DIGITS];
        size_t n_digits = decimal(position, digits);
        PyObject *key = PyBytes_FromStringAndSize(NULL, prefix.len + 1 + (Py_ssize_t)n_digits);
        if (key == NULL) {
            Py_CLEAR(keys);
            goto done;
        }
        char *out = PyBytes_AS_STRING(key);
        memcpy(out, prefix.buf, (size_t)prefix.len);
        out[prefix.len] = ':';
        memcpy(out + prefix.len + 1, digits, n_digits);
        PyList_SET_ITEM(keys, i, key);
    }
done:
    PyBuffer_Release(&prefix);
    return keys;
}

static PyMethodDef core_methods[] = {
    {"crc32c", py_crc32c, METH_VARARGS, crc32c_doc},
    {"crc32c_by_table", py_crc32c_by_table, METH_VARARGS, crc32c_by_table_doc},
    {"masked_crc32c", py_masked_crc32c, METH_O, masked_crc32c_doc},
    {"frame", py_frame, METH_O, frame_doc},
    {"scan_frames", py_scan_frames, METH_VARARGS, scan_frames_doc},
    {"scan_region", py_scan_region, METH_VARARGS, scan_region_doc},
    {"cut_frames", py_cut_frames, METH_O, cut_frames_doc},
    {"unframe", py_unframe, METH_VARARGS, unframe_doc},
    {"format_keys", py_format_keys, METH_VARARGS, format_keys_doc},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "queuepipe._qpcore",
    "queuepipe's compiled core: TFRecord framing and CRC-32C (and Example parsing), "
    "run without the GIL. Loaded by queuepipe._core; not a public API.",
    -1, core_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC
PyInit__qpcore(void)
{
    qp_crc32c_init();
    PyObject *module = PyModule_Create(&core_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "ABI_VERSION", QP_ABI_VERSION) < 0
        || PyModule_AddStringConstant(module, "CRC_INSTRUCTION", qp_crc32c_instruction()) < 0
        || qp_example_add_functions(module) < 0 || qp_columns_add_functions(module) < 0
        || qp_blocks_add_functions(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
