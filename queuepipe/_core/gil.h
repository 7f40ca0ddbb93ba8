/* When the CPython layer lets go of the GIL around pure-C work (module.c, module_example.c).
 *
 * Letting go is not free when another thread waits for the GIL: it takes the GIL at once,
 * and this thread, done with its work, waits to get it back until that thread lets go in
 * turn (a futex wake and a context switch each way, microseconds). For a chunk of records
 * that is nothing; for one record it is more than the work. Two runner threads that each
 * parse one record per call then hand the GIL to each other on every call: the per-record
 * pattern with two threads cost 20 us of CPU a record on the core against 14 on the pure
 * path before calls this small kept the GIL. So the GIL is let go only for work on at least
 * as many bytes as below. */
#ifndef QP_GIL_H
#define QP_GIL_H

#include <Python.h>

/* Built with QP_COUNT_GIL_HELD (benchmarks/instructions.py --gil-held, never by setup.py's own
 * build), valgrind's callgrind stops counting while the GIL is let go here: it then counts
 * only the instructions run holding it, the work two threads cannot share. */
#ifdef QP_COUNT_GIL_HELD
#include <valgrind/callgrind.h>
#define QP_GIL_COUNT_TOGGLE() CALLGRIND_TOGGLE_COLLECT
#else
#define QP_GIL_COUNT_TOGGLE() ((void)0)
#endif

/* Checksums and copies (several GB/s): 64 KiB is about 10 us of work. */
#define QP_GIL_FREE_BYTES 65536
/* Wire walks (about 1 GB/s on token lists, slower on many small features): 16 KiB. */
#define QP_GIL_FREE_WALK_BYTES 16384
/* A queue's column copies (module_columns.c: gathers and compactions) mostly run while the
 * queue's lock is held: a thread handed the GIL meanwhile that puts or takes blocks on that
 * lock at once and hands it back. They keep it below 128 KiB (about 20 us; a batch of 128
 * rows of 784 bytes is 98 KiB), as the queue's Python copies do (_columns._KEEP_GIL_BYTES). */
#define QP_GIL_FREE_COLUMN_BYTES 131072
/* A batch's list indices (module_columns.c's list_indices: 16 bytes a value, written at
 * several GB/s) keep it below 1 MiB: a batch of 128 token lists is 270 KiB, some 20 us, less
 * than the two hand-overs a let-go costs with another thread waiting. */
#define QP_GIL_FREE_INDEX_BYTES 1048576

/* Lets go of the GIL when bytes >= least; returns what qp_gil_take needs to take it back
 * (NULL: the GIL was kept). */
static inline PyThreadState *
qp_gil_let_go(size_t bytes, size_t least)
{
    if (bytes < least)
        return NULL;
    QP_GIL_COUNT_TOGGLE();
    return PyEval_SaveThread();
}

static inline void
qp_gil_take(PyThreadState *saved)
{
    if (saved != NULL) {
        PyEval_RestoreThread(saved);
        QP_GIL_COUNT_TOGGLE();
    }
}

#endif
