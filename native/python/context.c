/*
 * The Context type: one native cipher context's entry points.  This file holds the type and its
 * one-shot calls (encrypt/decrypt into a new bytes object, encrypt_into/decrypt_into a
 * caller's buffer); the prefixed-value and segment calls are in prefixed.c and segments.c.
 */
#include "speedups.h"

/* Context(capsule, owner): the capsule comes from sealstore.native (SEALSTORE_CTX_CAPSULE, made
   when the native context is created); ``owner`` keeps that context alive.  No number is taken
   for an address, and a Context is initialized once: its context never changes under a call. */
static int Context_init(ContextObject *self, PyObject *args, PyObject *kwds)
{
    PyObject *capsule, *owner;
    static char *kwlist[] = {"context", "owner", NULL};
    void *p;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO", kwlist, &capsule, &owner)) {
        return -1;
    }
    if (self->ctx != NULL) {
        PyErr_SetString(PyExc_TypeError, "sealstore: a cipher context is initialized once");
        return -1;
    }
    if (!PyCapsule_IsValid(capsule, SEALSTORE_CTX_CAPSULE)) {
        PyObject *tname = type_name(capsule);
        if (tname != NULL) {
            PyErr_Format(PyExc_TypeError,
                         "context must be a native context capsule from sealstore.native, not "
                         "%.80U",
                         tname);
            Py_DECREF(tname);
        }
        return -1;
    }
    p = PyCapsule_GetPointer(capsule, SEALSTORE_CTX_CAPSULE);
    if (p == NULL) {
        return -1;
    }
    if (owner == Py_None) {
        PyErr_SetString(PyExc_TypeError, "owner must be the object that keeps the context alive");
        return -1;
    }
    self->ctx = (const sealstore_ctx *)p;
    Py_INCREF(owner);
    Py_XSETREF(self->owner, owner);
    return 0;
}

static void Context_dealloc(ContextObject *self)
{
    PyTypeObject *type = Py_TYPE((PyObject *)self); /* a heap type: each holds a reference */
    Py_XDECREF(self->owner);
    ((freefunc)PyType_GetSlot(type, Py_tp_free))(self);
    Py_DECREF(type);
}

/* ---- the one-shot calls ---- */

/* The nonce, data and AD of a call. */
typedef struct {
    Py_buffer nonce, data, ad;
} Inputs;

static const char *const names_inputs[] = {"data", "nonce", "associated_data"};

/* Take the views of (nonce, data, ad); -1 with an exception and none held. */
static inline int get_inputs(PyObject *nonce, PyObject *data, PyObject *ad, Inputs *in,
                             size_t npublen)
{
    if (get_nonce(nonce, &in->nonce, npublen) != 0) {
        return -1;
    }
    if (get_buffer(data, &in->data, "data", 0) != 0) {
        PyBuffer_Release(&in->nonce);
        return -1;
    }
    if (get_ad(ad, &in->ad) != 0) {
        PyBuffer_Release(&in->data);
        PyBuffer_Release(&in->nonce);
        return -1;
    }
    return 0;
}

static inline void release_inputs(Inputs *in)
{
    release(&in->ad);
    PyBuffer_Release(&in->data);
    PyBuffer_Release(&in->nonce);
}

/* The length of the output, or -1 with InvalidTag when a ciphertext is shorter than its tag. */
static inline Py_ssize_t output_len(const ContextObject *self, const Inputs *in, int enc)
{
    const Py_ssize_t maclen = (Py_ssize_t)self->ctx->maclen;
    if (enc) {
        return in->data.len + maclen;
    }
    if (in->data.len < maclen) {
        raise_invalid_tag(-1);
        return -1;
    }
    return in->data.len - maclen;
}

/* Encrypt or decrypt into ``o`` (the GIL released for large inputs); -1 with an exception. */
static inline int run_crypt(const ContextObject *self, uint8_t *o, const Inputs *in, int enc)
{
    PyThreadState *ts = nogil_begin(in->data.len);
    int rc = enc ? sealstore_encrypt(self->ctx, o, in->data.buf, (size_t)in->data.len,
                                     in->ad.buf, (size_t)in->ad.len, in->nonce.buf)
                 : sealstore_decrypt(self->ctx, o, in->data.buf, (size_t)in->data.len,
                                     in->ad.buf, (size_t)in->ad.len, in->nonce.buf);
    nogil_end(ts);
    if (rc == 0) {
        return 0;
    }
    if (enc) {
        raise_internal_error("sealstore: encryption failed");
    } else {
        raise_invalid_tag(-1);
    }
    return -1;
}

static const char *const names_crypt[] = {"nonce", "data", "associated_data"};

/* encrypt / decrypt into a new bytes object; they share everything but the direction. */
static PyObject *crypt_bytes(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames, int enc)
{
    REQUIRE_CTX(self);
    PyObject *a[3];
    Inputs in;
    PyObject *res = NULL;
    Py_ssize_t need;

    if (parse_args(args, nargs, kwnames, 2, enc ? "encrypt" : "decrypt", a, names_crypt) != 0 ||
        get_inputs(a[0], a[1], a[2], &in, self->ctx->npublen) != 0) {
        return NULL;
    }
    need = output_len(self, &in, enc);
    if (need >= 0) {
        res = PyBytes_FromStringAndSize(NULL, need);
    }
    if (res != NULL && run_crypt(self, (uint8_t *)PyBytes_AS_STRING(res), &in, enc) != 0) {
        Py_CLEAR(res);
    }
    release_inputs(&in);
    return res;
}

static PyObject *Context_encrypt(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    return crypt_bytes(self, args, nargs, kwnames, 1);
}

static PyObject *Context_decrypt(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    return crypt_bytes(self, args, nargs, kwnames, 0);
}

/* cryptography's order (>= 47): the buffer last, every argument required. */
static const char *const names_into[] = {"nonce", "data", "associated_data", "buf"};

#define INTO_ORDER                                                                          \
    "(encrypt_into and decrypt_into take the buffer last, as cryptography's do: "           \
    "(nonce, data, associated_data, buf))"

/* The caller's buffer: -1 with a TypeError that names the argument order (a call in the old
   order, buffer first, lands here: its last argument, the AD or None, is not writable). */
static inline int get_buf(PyObject *obj, Py_buffer *view, const char *fname)
{
    if (obj == NULL) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument 'buf' " INTO_ORDER,
                     fname);
        return -1;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE) != 0) {
        if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyObject *tname;
            PyErr_Clear();
            tname = type_name(obj);
            if (tname != NULL) {
                PyErr_Format(PyExc_TypeError,
                             "buf must be a writable, contiguous bytes-like object, not "
                             "%.80U " INTO_ORDER,
                             tname);
                Py_DECREF(tname);
            }
        }
        return -1;
    }
    return 0;
}

/* 0 if ``out`` can take ``need`` bytes without overlapping an input (the data may start exactly
   at it: in place); -1 with ValueError or OverlappingBuffers. */
static inline int check_out(const Py_buffer *out, Py_ssize_t need, const Inputs *in)
{
    const Py_buffer *ins[3] = {&in->data, &in->nonce, &in->ad};
    if (out->len < need) {
        PyErr_Format(PyExc_ValueError, "buf must be at least %zd bytes, got %zd", need, out->len);
        return -1;
    }
    return check_disjoint("buf", out->buf, need, ins, names_inputs, 3, 1);
}

/* encrypt_into / decrypt_into(nonce, data, associated_data, buf) share everything but the
   direction.  buf is parsed first: a call in the old order fails on it with a TypeError
   before anything else is read. */
static PyObject *crypt_into(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames, int enc)
{
    REQUIRE_CTX(self);
    PyObject *a[4];
    Py_buffer out;
    Inputs in;
    PyObject *res = NULL;
    Py_ssize_t need;
    const char *fname = enc ? "encrypt_into" : "decrypt_into";

    /* three required by parse_args, the fourth (buf) required by get_buf */
    if (parse_args(args, nargs, kwnames, 3, fname, a, names_into) != 0 ||
        get_buf(a[3], &out, fname) != 0) {
        return NULL;
    }
    if (get_inputs(a[0], a[1], a[2], &in, self->ctx->npublen) != 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    need = output_len(self, &in, enc);
    if (need >= 0 && check_out(&out, need, &in) == 0 &&
        run_crypt(self, (uint8_t *)out.buf, &in, enc) == 0) {
        res = PyLong_FromSsize_t(need);
    }
    release_inputs(&in);
    PyBuffer_Release(&out);
    return res;
}

static PyObject *Context_encrypt_into(ContextObject *self, PyObject *const *args,
                                      Py_ssize_t nargs, PyObject *kwnames)
{
    return crypt_into(self, args, nargs, kwnames, 1);
}

static PyObject *Context_decrypt_into(ContextObject *self, PyObject *const *args,
                                      Py_ssize_t nargs, PyObject *kwnames)
{
    return crypt_into(self, args, nargs, kwnames, 0);
}

/* ---- the type ---- */

/* Each docstring starts with its text signature ("name($self, ...)\n--\n\n"), so
   inspect.signature works on the methods (and on the cipher objects, which bind them). */
#define FASTKW (METH_FASTCALL | METH_KEYWORDS)
#define METHOD(name, fn, sig, doc)                                                             \
    {name, (PyCFunction)(void (*)(void))fn, FASTKW, name "($self, " sig ")\n--\n\n" doc}
static PyMethodDef Context_methods[] = {
    METHOD("encrypt", Context_encrypt, "nonce, data, associated_data=None",
           "Encrypt data; returns ciphertext || tag."),
    METHOD("decrypt", Context_decrypt, "nonce, data, associated_data=None",
           "Decrypt and verify ciphertext || tag; returns the plaintext or raises InvalidTag."),
    METHOD("encrypt_into", Context_encrypt_into, "nonce, data, associated_data, buf",
           "Write ciphertext || tag into buf (the buffer last, as cryptography's); returns the "
           "number of bytes written."),
    METHOD("decrypt_into", Context_decrypt_into, "nonce, data, associated_data, buf",
           "Write the plaintext into buf (wiped on failure: InvalidTag); returns the number of "
           "bytes written."),
    METHOD("seal", Context_seal, "prefix, plaintext, associated_data=None",
           "prefix || nonce || ciphertext || tag with a fresh random nonce; AD = prefix || ad."),
    METHOD("open", Context_open, "prefix_len, sealed, associated_data=None",
           "Open a value made by seal; returns the plaintext or raises InvalidTag."),
    METHOD("seal_many", Context_seal_many, "prefix, plaintexts, associated_data=None",
           "seal over a list, in one call; returns a list."),
    METHOD("open_many", Context_open_many, "prefix_len, sealed, associated_data=None",
           "open over a list, in one call; returns a list (InvalidTag has .index)."),
    METHOD("seal_segments_into", Context_seal_segments,
           "out, data, segment_size, nonce_prefix, first_index, final, associated_data=None",
           "Seal data as stream segments first_index, ... into out; returns the bytes written."),
    METHOD("open_segments_into", Context_open_segments,
           "out, data, segment_size, nonce_prefix, first_index, final, associated_data=None",
           "Open what seal_segments_into wrote into out; returns the bytes written."),
    {NULL, NULL, 0, NULL}};

static PyType_Slot Context_slots[] = {
    {Py_tp_doc, (void *)"Context(context, owner)\n--\n\n"
                        "A native cipher context's fast entry points (internal)."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)Context_init},
    {Py_tp_dealloc, (void *)Context_dealloc},
    {Py_tp_methods, Context_methods},
    {0, NULL},
};

static PyType_Spec Context_spec = {
    .name = "sealstore._speedups.Context",
    .basicsize = sizeof(ContextObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = Context_slots,
};

PyTypeObject *ContextType;

int context_add_type(PyObject *module)
{
    return add_type(module, &ContextType, &Context_spec);
}
