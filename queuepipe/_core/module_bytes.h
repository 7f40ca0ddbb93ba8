/* Bytes objects the core makes, and those of them kept to be made again (module_bytes.c).
 * Every function here is called holding the GIL. */
#ifndef QP_MODULE_BYTES_H
#define QP_MODULE_BYTES_H

#include <Python.h>

/* A new bytes object of size bytes, their contents undefined: the caller fills them before
 * anyone else gets the object. One made earlier and let go of by everyone but the core where
 * one of that size is (records and string values of a few hundred bytes up). NULL with
 * MemoryError raised. */
PyObject *qp_bytes_new(Py_ssize_t size);

/* Lets go of every bytes object kept (the last read plan closed: blocks_release()). */
void qp_bytes_release(void);

/* The number of bytes objects kept now (tests). */
Py_ssize_t qp_bytes_kept(void);

#endif
