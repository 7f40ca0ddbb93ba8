/* Blocks, the core's buffers handed to Python, and the freed ones kept (module_blocks.c).
 * Every function here is called holding the GIL. */
#ifndef QP_MODULE_BLOCKS_H
#define QP_MODULE_BLOCKS_H

#include <Python.h>

#include "wire.h"

/* Gives an empty scratch (data NULL) the biggest kept buffer, if one is kept: a walk's
 * ragged numbers, which then need no fresh pages (nor a copy at each doubling while the
 * buffer holds them). */
void qp_blocks_seed(qp_scratch *s);

/* Keeps the scratch's buffer for a later take (or frees it) and leaves it empty. */
void qp_blocks_keep(qp_scratch *s);

/* A Block of size bytes, their contents undefined (a kept buffer where one of about the size
 * is kept), and in *data where they lie; NULL with MemoryError raised. */
PyObject *qp_blocks_new(size_t size, uint8_t **data);

/* The scratch's bytes as a Block, which takes over its buffer, or copies them to one of
 * about their size where the scratch holds over twice as many (its buffer is then kept);
 * the scratch is left empty, also on failure; NULL with an exception set when the Block
 * cannot be made. The GIL is let go for a copy of QP_GIL_FREE_BYTES or more. */
PyObject *qp_blocks_of_scratch(qp_scratch *s);

/* Readies the Block type and adds blocks(), blocks_kept() and blocks_release() to the
 * module; 0 on success, -1 with an exception set. */
int qp_blocks_add_functions(PyObject *module);

#endif
