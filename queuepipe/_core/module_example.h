/* The Example parsing functions of queuepipe._qpcore (see module_example.c). */
#ifndef QP_MODULE_EXAMPLE_H
#define QP_MODULE_EXAMPLE_H

#include <Python.h>

/* Adds the parsing functions to the module; 0 on success, -1 with an exception set. */
int qp_example_add_functions(PyObject *module);

#endif
