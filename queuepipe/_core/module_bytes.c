/* Bytes objects made again: the records a chunk is read into and the string values a walk
 * gives (an mnist image each), once everyone else has let go of them.
 *
 * Each one of more than 512 bytes is a malloc and, when its last reference goes, a free,
 * holding the GIL: on mnist, a record and an image of about 800 bytes a record, 40% of the
 * instructions read_batch_features runs holding it (benchmarks/instructions.py --gil-held),
 * the work that two enqueue threads cannot share. So the core keeps a reference to the last
 * few thousand it made of each of a few sizes, in the order made; asked for one of a kept
 * size, it looks at the oldest few: the first whose only reference left is the core's (its
 * batch was parsed and dropped) is made again, its hash forgotten, and handed out as new.
 *
 *     records_of / span_bytes --new--> bytes --> list, array, batch ... all let go
 *             ^                                                             |
 *             +---- the oldest kept, held by the core alone (refcount 1) ---+
 *
 * An object is only ever changed while the core holds its one reference: nobody else can see
 * it, as CPython itself changes a string of one reference in place. One still held when its
 * size's ring is full is let go by the core, and freed by its last holder as usual. The
 * kept objects are let go when the last of read_batch_features' read plans closes
 * (blocks_release()). Off from Python 3.12 (whose bytes objects this was not checked on) and
 * where threads run without the GIL (a reference count is then no proof of sole holding). */
#include "module_bytes.h"

#if PY_VERSION_HEX < 0x030C0000 && !defined(Py_GIL_DISABLED)
#define QP_KEEP_BYTES 1
#else
#define QP_KEEP_BYTES 0
#endif

/* Smaller ones come from CPython's own allocator, which keeps them cheaply; bigger ones cost
 * their copy far more than their malloc. */
#define QP_KEPT_LEAST 513
#define QP_KEPT_MOST ((Py_ssize_t)64 << 10)
/* Sizes kept at a time (mnist: a record's and an image's), the least recently asked for
 * replaced once it has not been asked for in QP_KEPT_STALE asks (records of many lengths,
 * token lists', each rare, would otherwise replace one another's objects at every ask:
 * they are made as new); and the objects kept of each: a chunk's worth for each of two
 * enqueue threads, of QP_KEPT_BYTES at most (16 MiB in all, whoever reads: a plain
 * reader's records are kept too, until the process ends or a read plan closes). */
#define QP_KEPT_SIZES 4
#define QP_KEPT_STALE 65536ULL
#define QP_KEPT_PER_SIZE 4096
#define QP_KEPT_BYTES ((size_t)4 << 20)
/* The oldest ones looked at for one held by the core alone, before a new one is made. */
#define QP_KEPT_PROBES 4

typedef struct {
    Py_ssize_t size;  /* 0: a free place */
    PyObject **ring;  /* cap references, the oldest at head */
    size_t cap, head, count;
    unsigned long long asked;  /* when this size was last asked for */
} kept_size;

static kept_size sizes[QP_KEPT_SIZES];
static unsigned long long asks;

/* Lets go of every object kept of k's size and frees the place. (Bytes objects run no code
 * when freed.) */
static void
release_size(kept_size *k)
{
    for (size_t i = 0; i < k->count; i++)
        Py_DECREF(k->ring[(k->head + i) % k->cap]);
    PyMem_Free(k->ring);
    *k = (kept_size){0};
}

#if QP_KEEP_BYTES
/* The place of size's objects, made (the least recently asked for size let go, if stale) if
 * none is; NULL when none can be had (the caller then keeps nothing). */
static kept_size *
place_of(Py_ssize_t size)
{
    kept_size *oldest = &sizes[0];
    asks++;
    for (size_t i = 0; i < QP_KEPT_SIZES; i++) {
        if (sizes[i].size == size) {
            sizes[i].asked = asks;
            return &sizes[i];
        }
        if (sizes[i].asked < oldest->asked)
            oldest = &sizes[i];
    }
    if (oldest->size != 0 && asks - oldest->asked < QP_KEPT_STALE)
        return NULL;
    if (oldest->size != 0)
        release_size(oldest);
    oldest->asked = asks;
    oldest->cap = QP_KEPT_BYTES / (size_t)size < QP_KEPT_PER_SIZE
                  ? QP_KEPT_BYTES / (size_t)size : QP_KEPT_PER_SIZE;
    oldest->ring = PyMem_Malloc(oldest->cap * sizeof(PyObject *));
    if (oldest->ring == NULL)
        return NULL;
    oldest->size = size;
    return oldest;
}

/* Forgets the hash a bytes object cached, its bytes about to change. (CPython deprecates the
 * field since 3.11, meaning to stop caching; until then it must be reset.) */
static void
forget_hash(PyObject *bytes)
{
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    ((PyBytesObject *)bytes)->ob_shash = -1;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}

/* A bytes object of k's size: of its oldest few, the first whose only reference is the
 * core's, made again (each one passed over, still held elsewhere, goes to the back: one kept
 * long by a caller does not stop the others being made again); else a new one, kept as the
 * newest (the oldest let go when k is full). */
static PyObject *
kept_new(kept_size *k)
{
    for (int probe = 0; probe < QP_KEPT_PROBES && probe < (int)k->count; probe++) {
        PyObject *oldest = k->ring[k->head];
        k->head = (k->head + 1) % k->cap;
        k->ring[(k->head + k->count - 1) % k->cap] = oldest;  /* now the newest */
        if (Py_REFCNT(oldest) == 1) {
            forget_hash(oldest);
            return Py_NewRef(oldest);
        }
    }
    PyObject *made = PyBytes_FromStringAndSize(NULL, k->size);
    if (made == NULL)
        return NULL;
    if (k->count == k->cap) {  /* the oldest, still held elsewhere: let go of */
        Py_DECREF(k->ring[k->head]);
        k->head = (k->head + 1) % k->cap;
        k->count--;
    }
    k->ring[(k->head + k->count) % k->cap] = Py_NewRef(made);
    k->count++;
    return made;
}
#endif

PyObject *
qp_bytes_new(Py_ssize_t size)
{
#if QP_KEEP_BYTES
    if (size >= QP_KEPT_LEAST && size <= QP_KEPT_MOST) {
        kept_size *k = place_of(size);
        if (k != NULL)
            return kept_new(k);
    }
#endif
    return PyBytes_FromStringAndSize(NULL, size);
}

void
qp_bytes_release(void)
{
    for (size_t i = 0; i < QP_KEPT_SIZES; i++) {
        if (sizes[i].size != 0)
            release_size(&sizes[i]);
    }
}

Py_ssize_t
qp_bytes_kept(void)
{
    size_t n = 0;
    for (size_t i = 0; i < QP_KEPT_SIZES; i++)
        n += sizes[i].count;
    return (Py_ssize_t)n;
}
