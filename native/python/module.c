/*
 * sealstore._speedups: the per-call entry points of the cipher classes, in the CPython API.
 *
 * A cffi call costs about 150 ns plus 70 ns per ffi.from_buffer, more than AEGIS needs for a
 * small message, and cffi cannot allocate the result bytes object for C to write into.  This
 * module parses buffers with the buffer protocol, writes straight into a new bytes object or a
 * caller's buffer, and calls the kernel chosen for the context (sealstore._native owns the
 * contexts and the kernels; a context arrives here in a capsule made with it, never as a
 * number, and this module holds its pointer and a reference to the owner).
 *
 * This file holds the module itself and the exceptions it raises; speedups.h lists the others.
 */
#include "speedups.h"

/* ---- errors: the classes of sealstore.errors, looked up on first use ---- */

static PyObject *invalid_tag_cls, *overlapping_cls, *internal_error_cls;

/* sealstore.errors.<name>, looked up once into *slot (borrowed); NULL with an exception. */
static PyObject *error_class(PyObject **slot, const char *name)
{
    if (*slot == NULL) {
        PyObject *mod = PyImport_ImportModule("sealstore.errors");
        if (mod == NULL) {
            return NULL;
        }
        *slot = PyObject_GetAttrString(mod, name);
        Py_DECREF(mod);
    }
    return *slot;
}

void raise_internal_error(const char *msg)
{
    if (error_class(&internal_error_cls, "InternalError") != NULL) {
        PyErr_SetString(internal_error_cls, msg);
    }
}

void raise_invalid_tag(Py_ssize_t index)
{
    PyObject *exc;
    if (error_class(&invalid_tag_cls, "InvalidTag") == NULL) {
        return;
    }
    exc = PyObject_CallNoArgs(invalid_tag_cls);
    if (exc == NULL) {
        return;
    }
    if (index >= 0) {
        PyObject *i = PyLong_FromSsize_t(index);
        if (i == NULL || PyObject_SetAttrString(exc, "index", i) != 0) {
            Py_XDECREF(i);
            Py_DECREF(exc);
            return;
        }
        Py_DECREF(i);
    }
    PyErr_SetObject(invalid_tag_cls, exc);
    Py_DECREF(exc);
}

void set_error_index(Py_ssize_t index)
{
    PyObject *type, *value, *tb, *i;
    if (index < 0) {
        return;
    }
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    i = PyLong_FromSsize_t(index);
    if (value != NULL && i != NULL) {
        (void)PyObject_SetAttrString(value, "index", i);
        PyErr_Clear(); /* an exception type refusing attributes keeps its message only */
    }
    Py_XDECREF(i);
    PyErr_Restore(type, value, tb);
}

void raise_overlap(const char *out_name, const char *name, int in_place_ok)
{
    if (error_class(&overlapping_cls, "OverlappingBuffers") == NULL) {
        return;
    }
    if (in_place_ok) {
        PyErr_Format(overlapping_cls,
                     "%s overlaps %s: it must start exactly where %s starts (in place) or not "
                     "overlap it at all",
                     out_name, name, name);
    } else {
        PyErr_Format(overlapping_cls, "%s must not overlap %s", out_name, name);
    }
}

/* ---- the module ---- */

int add_type(PyObject *module, PyTypeObject **type, PyType_Spec *spec)
{
    if (*type == NULL) {
        *type = (PyTypeObject *)PyType_FromSpec(spec); /* kept for the process's life */
        if (*type == NULL) {
            return -1;
        }
    }
    return PyModule_AddType(module, *type);
}

static PyMethodDef module_functions[] = {
    {"check_disjoint", (PyCFunction)(void (*)(void))py_check_disjoint, METH_FASTCALL,
     "check_disjoint($module, out, written, in_place, data, *others)\n--\n\n"
     "Raise OverlappingBuffers when the "
     "first `written` bytes of out overlap an input (data may start exactly at out when "
     "in_place); None stands for an absent input."},
    {NULL, NULL, 0, NULL},
};

static int speedups_exec(PyObject *m)
{
    if (nonce_register_atfork() < 0 || context_add_type(m) < 0 ||
        PyModule_AddStringConstant(m, "CONTEXT_CAPSULE", SEALSTORE_CTX_CAPSULE) < 0 ||
        bound_add_types(m) < 0 || rowmap_add_functions(m) < 0) {
        return -1;
    }
    return 0;
}

/* The module needs the GIL: the nonce buffer, the openers' one-entry caches and the borrowed
   references taken from dicts and tuples rely on it.  On a free-threaded build (3.13t+)
   importing it turns the GIL back on; one interpreter only (the types are made once). */
static PyModuleDef_Slot speedups_slots[] = {
    {Py_mod_exec, (void *)speedups_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "sealstore._speedups",
    "Fast per-call entry points of the sealstore cipher classes (internal).", 0,
    module_functions, speedups_slots, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
