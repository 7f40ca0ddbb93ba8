/* The arena functions of queuepipe._qpcore (see module_columns.c). */
#ifndef QP_MODULE_COLUMNS_H
#define QP_MODULE_COLUMNS_H

#include <Python.h>

/* Adds the arena functions to the module; 0 on success, -1 with an exception set. */
int qp_columns_add_functions(PyObject *module);

#endif
