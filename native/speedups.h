/*
 * What the parts of sealstore._speedups share (internal; not installed): the Context type,
 * nonces, GIL hand-off and the InvalidTag error, defined in speedups.c and used by bound.c
 * and rowmap.c.
 */
#ifndef SEALSTORE_SPEEDUPS_H
#define SEALSTORE_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "sealstore.h"

typedef struct {
    PyObject_HEAD const sealstore_ctx *ctx;
    PyObject *owner; /* keeps the native context alive */
} ContextObject;

extern PyTypeObject ContextType;

/* The name of the capsule a native context crosses from sealstore._native in. */
#define SEALSTORE_CTX_CAPSULE "sealstore._native.ctx"

/* Release the GIL around a native call when the input is large enough to pay for it. */
PyThreadState *nogil_begin(Py_ssize_t n);
void nogil_end(PyThreadState *ts);
/* 16 fresh random bytes from the CSPRNG buffer; caller holds the GIL.  -1 with an exception. */
int next_nonce(uint8_t *npub);
/* Raise sealstore.errors.InvalidTag (with ``.index`` when index >= 0). */
void raise_invalid_tag(Py_ssize_t index);
void raise_internal_error(const char *msg);

/* The items of a sequence as a tuple owned by the caller (new reference; a tuple is returned
   as it is), or NULL with an exception (TypeError ``msg`` when it is not a sequence). */
PyObject *snapshot_items(PyObject *obj, const char *msg);

/* bound.c: the NamedSealer and NamedOpener types, added to the module. */
int bound_add_types(PyObject *module);
/* rowmap.c: map_columns, added to the module. */
int rowmap_add_functions(PyObject *module);

#endif
