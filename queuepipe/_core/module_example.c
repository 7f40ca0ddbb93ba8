/* Stub until core-example's Example walk lands: adds no function. */
#include "module_example.h"

int
qp_example_add_functions(PyObject *module)
{
    (void)module;
    return 0;
}
