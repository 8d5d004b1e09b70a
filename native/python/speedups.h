/*
 * What the parts of sealstore._speedups share (internal; not installed): the Context type, the
 * nonce buffer, GIL hand-off, the errors raised, and the buffer and argument parsing.
 *
 * The helpers every call or every value of a list goes through (argument and buffer parsing,
 * overlap checks, GIL hand-off) are static inline here, so splitting the module into files
 * adds no function call on the per-call and per-value paths; their cold halves (the error
 * messages, keyword arguments) are out of line in the .c files named below.
 *
 *   module.c    the module: definition, exec, slots; the errors raised (sealstore.errors)
 *   nonces.c    the CSPRNG buffer the random nonces come from
 *   buffers.c   argument parsing, sizes, sequence snapshots, check_disjoint for Python
 *   context.c   the Context type and its one-shot and _into calls
 *   prefixed.c  seal/open of prefixed values, one by one and four at a time
 *   segments.c  seal/open of a buffer of stream segments
 *   bound.c     NamedSealer/NamedOpener (one column's seal and open)
 *   rowmap.c    map_columns (opening result rows chunk by chunk)
 */
#ifndef SEALSTORE_SPEEDUPS_H
#define SEALSTORE_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "sealstore.h"

/* ---- the limited API ----
   The sources also build with Py_LIMITED_API (0x030C0000, native/build_speedups.py): one abi3
   module for every CPython >= 3.12, not the package's build (docs/BENCH.md: it costs the column
   path too much).  The macros that read object internals are then the functions of the same
   meaning, defined here under their usual names so the calls read the same both ways; what has
   no such stand-in (a tuple's item array, a str's characters) is written both ways where it is
   used. */
#ifdef Py_LIMITED_API
#define PyBytes_AS_STRING(o) PyBytes_AsString(o)
#define PyBytes_GET_SIZE(o) PyBytes_Size(o)
#define PyByteArray_AS_STRING(o) PyByteArray_AsString(o)
#define PyTuple_GET_ITEM(t, i) PyTuple_GetItem(t, i)
#define PyTuple_GET_SIZE(t) PyTuple_Size(t)
#define PyTuple_SET_ITEM(t, i, v) PyTuple_SetItem(t, i, v)
#define PyList_SET_ITEM(l, i, v) PyList_SetItem(l, i, v)
#define Py_SETREF(dst, src)                                                                 \
    do {                                                                                    \
        PyObject *old_ = (PyObject *)(dst);                                                 \
        (dst) = (src);                                                                      \
        Py_DECREF(old_);                                                                    \
    } while (0)
#define Py_XSETREF(dst, src)                                                                \
    do {                                                                                    \
        PyObject *old_ = (PyObject *)(dst);                                                 \
        (dst) = (src);                                                                      \
        Py_XDECREF(old_);                                                                   \
    } while (0)
static inline PyObject *PyObject_CallOneArg(PyObject *fn, PyObject *arg)
{
    return PyObject_Vectorcall(fn, &arg, 1, NULL);
}
#endif

/* ---- the Context type (context.c) ---- */

typedef struct {
    PyObject_HEAD const sealstore_ctx *ctx;
    PyObject *owner; /* keeps the native context alive */
} ContextObject;

extern PyTypeObject *ContextType; /* a heap type, made once (add_type) */

/* The name of the capsule a native context crosses from sealstore._native in. */
#define SEALSTORE_CTX_CAPSULE "sealstore._native.ctx"

/* A Context made with Context.__new__ alone has no native context: refuse it. */
#define REQUIRE_CTX(self)                                                                   \
    do {                                                                                    \
        if ((self)->ctx == NULL) {                                                          \
            PyErr_SetString(PyExc_ValueError, "sealstore: uninitialized cipher context");   \
            return NULL;                                                                    \
        }                                                                                   \
    } while (0)

/* The Context methods defined in prefixed.c and segments.c (METH_FASTCALL | METH_KEYWORDS). */
PyObject *Context_seal(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames);
PyObject *Context_open(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames);
PyObject *Context_seal_many(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames);
PyObject *Context_open_many(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames);
PyObject *Context_seal_segments(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
PyObject *Context_open_segments(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);

/* ---- GIL hand-off ---- */

/* The GIL is released for inputs of this many bytes or more: below that the call takes under a
   microsecond, and handing the GIL over and back (about 100 ns, measured) would cost more than
   other threads could gain.  Segment loops always release it. */
#define SPEEDUPS_GIL_MIN (32 * 1024)

/* Release the GIL around a native call when the input is large enough to pay for it. */
static inline PyThreadState *nogil_begin(Py_ssize_t n)
{
    return n >= SPEEDUPS_GIL_MIN ? PyEval_SaveThread() : NULL;
}

static inline void nogil_end(PyThreadState *ts)
{
    if (ts != NULL) {
        PyEval_RestoreThread(ts);
    }
}

/* ---- nonces (nonces.c) ---- */

/* 16 fresh random bytes from the CSPRNG buffer; caller holds the GIL.  -1 with an exception. */
int next_nonce(uint8_t *npub, size_t n);
/* Empty the nonce buffer in a forked child (registered once by the module's exec); -1 with
   OSError. */
int nonce_register_atfork(void);

/* ---- errors (module.c) ---- */

/* Raise sealstore.errors.InvalidTag (with ``.index`` when index >= 0). */
void raise_invalid_tag(Py_ssize_t index);
/* sealstore.errors.InternalError: the kernel reported a state that should be impossible. */
void raise_internal_error(const char *msg);
/* sealstore.errors.OverlappingBuffers naming the output ``out_name`` and the input ``name``. */
void raise_overlap(const char *out_name, const char *name, int in_place_ok);
/* Name the list position of the exception being raised (``.index``), as InvalidTag does. */
void set_error_index(Py_ssize_t index);

/* ---- buffers (buffers.c holds the cold halves) ---- */

/* The TypeError for an object that is not a (writable) contiguous buffer; always -1. */
int buffer_type_error(PyObject *obj, const char *what, int writable);

static inline int get_buffer(PyObject *obj, Py_buffer *view, const char *what, int writable)
{
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) != 0) {
        return buffer_type_error(obj, what, writable);
    }
    return 0;
}

/* Optional AD: None means empty. */
static inline int get_ad(PyObject *obj, Py_buffer *view)
{
    if (obj == NULL || obj == Py_None) {
        view->obj = NULL;
        view->buf = NULL;
        view->len = 0;
        return 0;
    }
    return get_buffer(obj, view, "associated_data", 0);
}

/* Release a view that get_ad may have left empty. */
static inline void release(Py_buffer *view)
{
    if (view->obj != NULL) {
        PyBuffer_Release(view);
    }
}

/* The ValueError for a nonce of the wrong length (the view is released); always -1. */
int nonce_length_error(Py_buffer *view, size_t npublen);

static inline int get_nonce(PyObject *obj, Py_buffer *view, size_t npublen)
{
    if (get_buffer(obj, view, "nonce", 0) != 0) {
        return -1;
    }
    if ((size_t)view->len != npublen) {
        return nonce_length_error(view, npublen);
    }
    return 0;
}

/* The first of ins[0..n) (NULL entries skipped) that the ``written`` bytes at ``out`` overlap, or
   -1.  ins[0] is the data: it may start exactly at ``out`` when in_place (each block is read
   before it is written back); a partial overlap would read bytes already overwritten.  The
   other inputs (nonce, AD: the segment calls read them again for every segment) may not overlap
   at all.  Inline: on the per-call path it is a few compares. */
static inline int first_overlap(const void *out, Py_ssize_t written, const Py_buffer *const *ins,
                                int n, int in_place)
{
    const uintptr_t o = (uintptr_t)out;
    if (written <= 0) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const Py_buffer *b = ins[i];
        if (b != NULL && b->len > 0 && o < (uintptr_t)b->buf + (uintptr_t)b->len &&
            (uintptr_t)b->buf < o + (uintptr_t)written && !(i == 0 && in_place && b->buf == out)) {
            return i;
        }
    }
    return -1;
}

/* 0 if the ``written`` bytes at ``out`` overlap none of the inputs (first_overlap), else -1
   with OverlappingBuffers naming the output (the _into calls' ``buf``, the segment calls'
   ``out``) and the input. */
static inline int check_disjoint(const char *out_name, const void *out, Py_ssize_t written,
                                 const Py_buffer *const *ins, const char *const *names, int n,
                                 int in_place)
{
    const int i = first_overlap(out, written, ins, n, in_place);
    if (i < 0) {
        return 0;
    }
    raise_overlap(out_name, names[i], i == 0 && in_place);
    return -1;
}

/* ---- arguments (buffers.c) ---- */

/* parse_args when keywords are given or the count is wrong (buffers.c). */
int parse_args_slow(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, Py_ssize_t npos,
                    const char *fname, PyObject **out, const char *const *names);

/* (positional..., associated_data=None): the npos required arguments and the optional last
   one, by position or by name, into out[0..npos]; -1 with a TypeError.  Inline for the common
   all-positional call. */
static inline int parse_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                             Py_ssize_t npos, const char *fname, PyObject **out,
                             const char *const *names)
{
    if (kwnames != NULL || nargs < npos || nargs > npos + 1) {
        return parse_args_slow(args, nargs, kwnames, npos, fname, out, names);
    }
    for (Py_ssize_t i = 0; i < npos; i++) {
        out[i] = args[i];
    }
    out[npos] = nargs > npos ? args[npos] : NULL;
    return 0;
}
/* The items of a tuple (snapshot_items) as an array: the tuple's own, or under the limited API
   (no access to a tuple's storage) a copy of its borrowed pointers; NULL with MemoryError.
   Release with tuple_items_done. */
static inline PyObject **tuple_items(PyObject *tuple)
{
#ifdef Py_LIMITED_API
    const Py_ssize_t n = PyTuple_Size(tuple);
    PyObject **items = PyMem_New(PyObject *, n > 0 ? n : 1);
    if (items == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        items[i] = PyTuple_GetItem(tuple, i);
    }
    return items;
#else
    return PySequence_Fast_ITEMS(tuple);
#endif
}

static inline void tuple_items_done(PyObject **items)
{
#ifdef Py_LIMITED_API
    PyMem_Free(items);
#else
    (void)items;
#endif
}

/* The __name__ of obj's type (new reference; NULL with an exception), for error messages: the
   limited API cannot read tp_name. */
PyObject *type_name(PyObject *obj);

/* A non-negative size argument; too large or negative is a ValueError naming it. */
int get_size(PyObject *obj, const char *what, Py_ssize_t *out);

/* The items of a sequence as a tuple owned by the caller (new reference; a tuple is returned
   as it is), or NULL with an exception (TypeError ``msg`` when it is not a sequence). */
PyObject *snapshot_items(PyObject *obj, const char *msg);

/* _speedups.check_disjoint(out, written, in_place, data, *others), for the calls written in
   Python (AES-GCM): the in-place ones are the _into calls, whose output is named ``buf``. */
PyObject *py_check_disjoint(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* ---- the other parts of the module ---- */

/* module.c: add the type made from ``spec`` to the module, making it on first use into *type
   (one interpreter, and a re-import adds the same type, as a static type was). */
int add_type(PyObject *module, PyTypeObject **type, PyType_Spec *spec);
/* context.c: the Context type, added to the module. */
int context_add_type(PyObject *module);
/* bound.c: the NamedSealer and NamedOpener types, added to the module. */
int bound_add_types(PyObject *module);
/* rowmap.c: map_columns, added to the module. */
int rowmap_add_functions(PyObject *module);

#endif
