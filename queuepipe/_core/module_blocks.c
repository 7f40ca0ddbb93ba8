/* Blocks: buffers of the core's own handed to Python as they are, and the few freed ones kept
 * for the next chunk.
 *
 * A chunk of token lists makes megabytes of outputs: the values the walk gathers (a block per
 * chunk) and each batch's [values, 2] indices (270 KiB a batch of 128 lists). Allocated fresh,
 * each came with fresh pages: glibc gives the top of a thread's heap back to the kernel when
 * it is freed (the consumer frees a batch, in another thread than the one that made it), and
 * every page written next costs a fault and a page cleared by the kernel. Two enqueue threads
 * made 120-225 faults every 1,000 records on tokens against 50-80 for one, half of them in
 * the indices. So a block's buffer, when its last array goes, is kept (up to
 * QP_POOL_BUFFERS of them, QP_POOL_BYTES in all) and handed to the next block or walk that
 * needs one of its size: its pages stay mapped and warm.
 *
 *     walk / blocks() --take--> Block --arrays on it--> ... last one gone --give--> kept
 *          ^                                                                         |
 *          +-------------------------------------------------------------------------+
 *
 * The kept buffers are guarded by the GIL: every take and give runs holding it (a Block's
 * dealloc, blocks(), and walk_examples before and after its walk). They are freed when the
 * last of read_batch_features' read plans closes (blocks_release()). */
#include "module_blocks.h"

#include <stdlib.h>
#include <string.h>

#include "gil.h"
#include "module_bytes.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define QP_POISON(data, n) ASAN_POISON_MEMORY_REGION((data), (n))
#define QP_UNPOISON(data, n) ASAN_UNPOISON_MEMORY_REGION((data), (n))
#else
#define QP_POISON(data, n) ((void)(data), (void)(n))
#define QP_UNPOISON(data, n) ((void)(data), (void)(n))
#endif

/* At most this many buffers are kept, of at most this many bytes in all, each at least
 * QP_POOL_LEAST bytes (smaller ones are malloc's own business: its bins keep them). */
#define QP_POOL_BUFFERS 32
#define QP_POOL_BYTES ((size_t)32 << 20)
#define QP_POOL_LEAST ((size_t)64 << 10)

typedef struct {
    uint8_t *data;
    size_t cap;
} kept_buffer;

static kept_buffer kept[QP_POOL_BUFFERS];
static size_t n_kept, kept_bytes;

/* Takes kept buffer i out of the pool (its place filled by the last one). */
static uint8_t *
take_kept(size_t i, size_t *cap)
{
    uint8_t *data = kept[i].data;
    *cap = kept[i].cap;
    kept_bytes -= kept[i].cap;
    kept[i] = kept[--n_kept];
    QP_UNPOISON(data, *cap);
    return data;
}

/* A buffer of at least need bytes (*cap: how many): the smallest kept one that holds them
 * and is at most twice as big, else a new one; NULL when memory is short. */
static uint8_t *
pool_take(size_t need, size_t *cap)
{
    size_t best = n_kept;
    for (size_t i = 0; i < n_kept; i++) {
        if (kept[i].cap >= need && kept[i].cap / 2 <= need
            && (best == n_kept || kept[i].cap < kept[best].cap))
            best = i;
    }
    if (need >= QP_POOL_LEAST && best < n_kept)
        return take_kept(best, cap);
    *cap = need ? need : 1;
    return malloc(*cap);
}

/* Keeps data (cap bytes) for a later take where there is room, else frees it. */
static void
pool_give(uint8_t *data, size_t cap)
{
    if (data == NULL)
        return;
    if (cap < QP_POOL_LEAST || n_kept == QP_POOL_BUFFERS || cap > QP_POOL_BYTES - kept_bytes) {
        free(data);
        return;
    }
    QP_POISON(data, cap);
    kept[n_kept].data = data;
    kept[n_kept].cap = cap;
    n_kept++;
    kept_bytes += cap;
}

void
qp_blocks_seed(qp_scratch *s)
{
    if (s->data != NULL || n_kept == 0)
        return;
    size_t largest = 0;
    for (size_t i = 1; i < n_kept; i++) {
        if (kept[i].cap > kept[largest].cap)
            largest = i;
    }
    s->data = take_kept(largest, &s->cap);
    s->len = 0;
}

void
qp_blocks_keep(qp_scratch *s)
{
    pool_give(s->data, s->cap);
    s->data = NULL;
    s->len = s->cap = 0;
}

typedef struct {
    PyObject_HEAD
    uint8_t *data;
    Py_ssize_t len;
    size_t cap;
} qp_block;

static int
block_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    qp_block *block = (qp_block *)self;
    return PyBuffer_FillInfo(view, self, block->data, block->len, 0, flags);
}

static void
block_dealloc(PyObject *self)
{
    qp_block *block = (qp_block *)self;
    pool_give(block->data, block->cap);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs block_as_buffer = {block_getbuffer, NULL};

static PyTypeObject block_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "queuepipe._qpcore.Block",
    .tp_basicsize = sizeof(qp_block),
    .tp_dealloc = block_dealloc,
    .tp_as_buffer = &block_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Bytes of the core's own (a writable buffer; made by walk_examples and blocks "
              "only).",
};

/* A Block owning data (len bytes of cap); data is freed (or kept) when the Block cannot be
 * made. */
static PyObject *
new_block(uint8_t *data, size_t len, size_t cap)
{
    qp_block *block = PyObject_New(qp_block, &block_type);
    if (block == NULL) {
        pool_give(data, cap);
        return NULL;
    }
    block->data = data;
    block->len = (Py_ssize_t)len;
    block->cap = cap;
    return (PyObject *)block;
}

PyObject *
qp_blocks_new(size_t size, uint8_t **data)
{
    size_t cap;
    *data = pool_take(size, &cap);
    if (*data == NULL) {
        return PyErr_NoMemory();
    }
    return new_block(*data, size, cap);
}

PyObject *
qp_blocks_of_scratch(qp_scratch *s)
{
    if (s->cap >= QP_POOL_LEAST && s->cap / 2 > s->len) {
        /* Seeded with a kept buffer far bigger than what it gathered (a wide schema's
         * short lists each take the biggest one kept): the bytes go to a buffer of about
         * their size, and the big one back to the pool, so that no Block holds more than
         * twice its bytes for as long as its arrays live. */
        size_t len = s->len, cap;
        uint8_t *fitted = pool_take(len, &cap);
        if (fitted == NULL) {
            qp_blocks_keep(s);
            return PyErr_NoMemory();
        }
        PyThreadState *saved = qp_gil_let_go(len, QP_GIL_FREE_BYTES);
        memcpy(fitted, s->data, len);
        qp_gil_take(saved);
        qp_blocks_keep(s);
        return new_block(fitted, len, cap);
    }
    PyObject *block = new_block(s->data, s->len, s->cap);
    s->data = NULL;
    s->len = s->cap = 0;
    return block;
}

PyDoc_STRVAR(blocks_doc,
"blocks(sizes) -> list\n\n"
"Writable buffers (Blocks) of the given sizes in bytes (a list of ints), their contents\n"
"undefined: buffers freed by earlier Blocks where one of about the size is kept, so that\n"
"their pages are not fresh.");

static PyObject *
blocks(PyObject *self, PyObject *sizes)
{
    (void)self;
    if (!PyList_CheckExact(sizes)) {
        PyErr_SetString(PyExc_TypeError, "blocks: sizes must be a list of ints");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(sizes);
    PyObject *result = PyList_New(n);
    if (result == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(sizes, i);
        Py_ssize_t size = PyLong_CheckExact(item) ? PyLong_AsSsize_t(item) : -1;
        if (size < 0) {
            if (!PyLong_CheckExact(item))
                PyErr_Format(PyExc_TypeError, "blocks: sizes[%zd] is not an int", i);
            else if (PyErr_Occurred())
                PyErr_Format(PyExc_OverflowError, "blocks: sizes[%zd] is too large", i);
            else
                PyErr_Format(PyExc_ValueError, "blocks: sizes[%zd] is negative (%zd)", i,
                             size);
            Py_DECREF(result);
            return NULL;
        }
        uint8_t *data;
        PyObject *block = qp_blocks_new((size_t)size, &data);
        if (block == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyList_SET_ITEM(result, i, block);
    }
    return result;
}

PyDoc_STRVAR(blocks_kept_doc,
"blocks_kept() -> (buffers, bytes)\n\n"
"The freed buffers kept for later Blocks: how many, and their bytes in all.");

static PyObject *
blocks_kept(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_BuildValue("(nn)", (Py_ssize_t)n_kept, (Py_ssize_t)kept_bytes);
}

PyDoc_STRVAR(bytes_kept_doc,
"bytes_kept() -> int\n\n"
"The bytes objects kept to be made again (module_bytes.c).");

static PyObject *
bytes_kept(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromSsize_t(qp_bytes_kept());
}

PyDoc_STRVAR(blocks_release_doc,
"blocks_release()\n\n"
"Frees the buffers kept for later Blocks and lets go of the bytes objects kept to be made\n"
"again (read_batch_features' plans call it when the last of them closes: memory kept for\n"
"chunks to come is not kept once none come).");

static PyObject *
blocks_release(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    while (n_kept > 0) {
        size_t cap;
        free(take_kept(n_kept - 1, &cap));
    }
    qp_bytes_release();
    Py_RETURN_NONE;
}

static PyMethodDef blocks_methods[] = {
    {"blocks", blocks, METH_O, blocks_doc},
    {"blocks_kept", blocks_kept, METH_NOARGS, blocks_kept_doc},
    {"bytes_kept", bytes_kept, METH_NOARGS, bytes_kept_doc},
    {"blocks_release", blocks_release, METH_NOARGS, blocks_release_doc},
    {NULL, NULL, 0, NULL},
};

int
qp_blocks_add_functions(PyObject *module)
{
    if (PyType_Ready(&block_type) < 0)
        return -1;
    return PyModule_AddFunctions(module, blocks_methods);
}
