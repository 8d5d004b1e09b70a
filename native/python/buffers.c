/*
 * Argument and buffer parsing for sealstore._speedups: the cold halves of the inline helpers in
 * speedups.h (their error messages), keyword parsing, size arguments, sequence snapshots, and
 * check_disjoint for the _into calls written in Python.
 */
#include "speedups.h"

PyObject *type_name(PyObject *obj)
{
    return PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__name__");
}

int buffer_type_error(PyObject *obj, const char *what, int writable)
{
    if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_BufferError)) {
        PyObject *tname;
        PyErr_Clear();
        tname = type_name(obj);
        if (tname == NULL) {
            return -1;
        }
        PyErr_Format(PyExc_TypeError,
                     writable ? "%s must be a writable, contiguous bytes-like object, not %.80U"
                              : "%s must be a contiguous bytes-like object, not %.80U",
                     what, tname);
        Py_DECREF(tname);
    }
    return -1;
}

int nonce_length_error(Py_buffer *view, size_t npublen)
{
    PyErr_Format(PyExc_ValueError, "nonce must be %zu bytes, got %zd", npublen, view->len);
    PyBuffer_Release(view);
    return -1;
}

/* The items of a caller's sequence as a tuple the call owns: a list changed during the call (by
   a callable, a finalizer, or another thread while the GIL is released) cannot move or free
   them.  A tuple is returned as it is; anything else is copied. */
PyObject *snapshot_items(PyObject *obj, const char *msg)
{
    if (PyTuple_CheckExact(obj)) {
        return Py_NewRef(obj);
    }
    if (PyList_CheckExact(obj)) {
        return PyList_AsTuple(obj);
    }
    if (PyType_GetSlot(Py_TYPE(obj), Py_tp_iter) == NULL && !PySequence_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, msg);
        return NULL;
    }
    return PySequence_Tuple(obj);
}

/* The views of check_disjoint's optional inputs (None: absent, NULL in ins); -1 with the views
   taken so far released. */
static int other_views(PyObject *const *objs, Py_ssize_t n, const char *const *names,
                       Py_buffer *views, const Py_buffer **ins)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        ins[i] = NULL;
        views[i].obj = NULL;
        if (objs[i] != Py_None) {
            if (get_buffer(objs[i], &views[i], names[i], 0) != 0) {
                while (i-- > 0) {
                    release(&views[i]);
                }
                return -1;
            }
            ins[i] = &views[i];
        }
    }
    return 0;
}

/* _speedups.check_disjoint(out, written, in_place, data, *others): the same check as the C
   _into calls make; None stands for an absent input. */
PyObject *py_check_disjoint(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *const names[] = {"data", "nonce", "associated_data", "nonce_prefix"};
    Py_buffer out, views[4];
    const Py_buffer *ins[4];
    Py_ssize_t written, nins = nargs - 3;
    int in_place, rc;

    (void)module;
    if (nargs < 4 || nargs > 3 + 4) {
        PyErr_SetString(PyExc_TypeError,
                        "check_disjoint(out, written, in_place, data, *others) takes 4 to 7 "
                        "arguments");
        return NULL;
    }
    written = PyLong_AsSsize_t(args[1]);
    in_place = PyObject_IsTrue(args[2]);
    if ((written == -1 && PyErr_Occurred()) || in_place < 0 ||
        get_buffer(args[0], &out, "out", 0) != 0) {
        return NULL;
    }
    if (other_views(args + 3, nins, names, views, ins) != 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    rc = check_disjoint(in_place ? "buf" : "out", out.buf, written < out.len ? written : out.len,
                        ins, names, (int)nins, in_place);
    for (Py_ssize_t i = 0; i < nins; i++) {
        release(&views[i]);
    }
    PyBuffer_Release(&out);
    if (rc != 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The index of keyword ``name`` in names[0..total), or -1 with a TypeError. */
static Py_ssize_t keyword_index(PyObject *name, const char *const *names, Py_ssize_t total,
                                const char *fname)
{
    for (Py_ssize_t i = 0; i < total; i++) {
        if (PyUnicode_CompareWithASCIIString(name, names[i]) == 0) {
            return i;
        }
    }
    PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname, name);
    return -1;
}

int parse_args_slow(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, Py_ssize_t npos,
                    const char *fname, PyObject **out, const char *const *names)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    Py_ssize_t total = npos + 1;

    if (nargs > total) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd arguments (%zd given)", fname,
                     total, nargs + nkw);
        return -1;
    }
    for (Py_ssize_t i = 0; i < total; i++) {
        out[i] = i < nargs ? args[i] : NULL;
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        Py_ssize_t i = keyword_index(PyTuple_GET_ITEM(kwnames, k), names, total, fname);
        if (i < 0) {
            return -1;
        }
        if (out[i] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname,
                         names[i]);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < npos; i++) {
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fname, names[i]);
            return -1;
        }
    }
    return 0;
}

int get_size(PyObject *obj, const char *what, Py_ssize_t *out)
{
    Py_ssize_t n = PyLong_AsSsize_t(obj);
    if (n == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s is out of range", what);
        }
        return -1;
    }
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "%s must be >= 0", what);
        return -1;
    }
    *out = n;
    return 0;
}
