/*
 * NamedSealer and NamedOpener: one column's seal and open, as single C callables.
 *
 * An encrypted column seals every value it writes and opens every value it reads, through the
 * keyring registered under a name, with the same context.  In Python that is a processor
 * function, a registry lookup, a method call and the codec: about 0.4-0.7 us a value, more
 * than the cipher.  These objects do the same in one call: look the name up in the registry
 * dict (so a keyring swapped or rotated at run time is seen at once), read the keyring's
 * published native table (``Keyring._native``), and seal or open through the Context of the
 * slot, encoding or decoding ASCII text and exact bytes on the way.
 *
 * Only the common case is handled here; everything else goes to the Python path the object was
 * given (``fallback``), which raises the precise error or serves suites that have no native
 * Context (AES-256-GCM): no registered keyring, a closed one, a header no usable slot has, a
 * value too short, a value that is not exact ASCII str / bytes within the length (the codec's
 * ``encode`` runs then, or the fallback when there is none).  A value whose tag fails, or whose
 * plaintext does not decode, goes to the fallback too: it opens the value again and raises the
 * precise error, naming the column (the failure path is cold; nothing of the plaintext or the
 * decoder's exception, which would carry it, is kept).
 *
 * ``Keyring._native`` is (open_table, seal): open_table maps 7-byte headers to Context objects,
 * seal is (threshold, Context, prefix, small Context, small prefix) or None.  The keyring
 * replaces the whole tuple when its keys change, so an identity check keeps the opener's
 * one-entry cache of (table, header) -> Context valid.
 */
#include "speedups.h"

#ifndef Py_T_PYSSIZET /* before 3.12: the member types under their old names */
#include <structmember.h>
#define Py_T_PYSSIZET T_PYSSIZET
#define Py_READONLY READONLY
#endif

#define HEADER_SIZE 7
#define RAW_NONE 0
#define RAW_BYTES 1
#define RAW_STR 2

static PyObject *str_native; /* interned "_native" */

/* The keyring's published table, or NULL (no exception) when the value must take the
   fallback: no keyring under the name, or not a native-capable one. */
static PyObject *native_table(PyObject *registry, PyObject *name)
{
    PyObject *ring = PyDict_GetItemWithError(registry, name); /* borrowed */
    PyObject *table;
    if (ring == NULL) {
        return NULL;
    }
    Py_INCREF(ring); /* attribute lookup may run code that edits the registry */
    table = PyObject_GetAttr(ring, str_native);
    Py_DECREF(ring);
    if (table == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyTuple_CheckExact(table) || PyTuple_GET_SIZE(table) != 2 ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(table, 0))) {
        Py_DECREF(table);
        return NULL;
    }
    return table;
}

static int one_arg(const char *fname, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError, "%s takes exactly one positional argument", fname);
        return -1;
    }
    return 0;
}

/* What both types hold: where the keyring is found, the context digest, the Python path, and
   the codec's encode (sealer) or decode (opener) callable or None. */
#define BOUND_HEAD                                                                             \
    PyObject_HEAD PyObject *registry, *name, *ad, *fallback, *codec;                          \
    vectorcallfunc vectorcall;

typedef struct {
    BOUND_HEAD
} BoundObject;

/* ---- NamedSealer ---- */

typedef struct {
    BOUND_HEAD
    int raw;            /* sealed as it is: exact ASCII str (RAW_STR), exact bytes (RAW_BYTES) */
    int out_bytearray;  /* return a bytearray (sqlite3 binds those without adaptation) */
    Py_ssize_t max_len; /* -1: unbounded */
    Py_ssize_t max_over; /* the column's overhead allowance; -1: none */
} SealerObject;

/* The sealed value of data (new reference), or Py_NotImplemented when its overhead would pass
   max_over (>= 0): the fallback then raises the column's precise error. */
static PyObject *seal_with(PyObject *seal, const char *data, Py_ssize_t n, PyObject *ad,
                           int out_bytearray, Py_ssize_t max_over)
{
    Py_ssize_t threshold, size;
    PyObject *ctxobj, *prefix, *res;
    uint8_t *out;
    uint8_t npub[SEALSTORE_MAX_NPUBBYTES];
    const sealstore_ctx *ctx;
    PyThreadState *ts;
    int rc;

    threshold = PyLong_AsSsize_t(PyTuple_GET_ITEM(seal, 0));
    if (threshold == -1 && PyErr_Occurred()) {
        return NULL;
    }
    ctxobj = PyTuple_GET_ITEM(seal, n >= threshold ? 1 : 3);
    prefix = PyTuple_GET_ITEM(seal, n >= threshold ? 2 : 4);
    if (!PyObject_TypeCheck(ctxobj, ContextType) || !PyBytes_CheckExact(prefix) ||
        ((ContextObject *)ctxobj)->ctx == NULL) {
        PyErr_SetString(PyExc_TypeError, "sealstore: malformed native keyring table");
        return NULL;
    }
    ctx = ((ContextObject *)ctxobj)->ctx;
    if (n > PY_SSIZE_T_MAX - PyBytes_GET_SIZE(prefix) - SEALSTORE_MAX_NPUBBYTES - 32) {
        return PyErr_NoMemory();
    }
    if (max_over >= 0 &&
        PyBytes_GET_SIZE(prefix) + (Py_ssize_t)(ctx->npublen + ctx->maclen) > max_over) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (next_nonce(npub, ctx->npublen) != 0) {
        return NULL;
    }
    size = PyBytes_GET_SIZE(prefix) + (Py_ssize_t)ctx->npublen + n + (Py_ssize_t)ctx->maclen;
    res = out_bytearray ? PyByteArray_FromStringAndSize(NULL, size)
                        : PyBytes_FromStringAndSize(NULL, size);
    if (res == NULL) {
        return NULL;
    }
    out = out_bytearray ? (uint8_t *)PyByteArray_AS_STRING(res) : (uint8_t *)PyBytes_AS_STRING(res);
    Py_INCREF(ctxobj); /* the table may be replaced while the GIL is released */
    ts = nogil_begin(n);
    rc = sealstore_seal_prefixed(ctx, out, (const uint8_t *)PyBytes_AS_STRING(prefix),
                                 (size_t)PyBytes_GET_SIZE(prefix), npub, (const uint8_t *)data,
                                 (size_t)n, (const uint8_t *)PyBytes_AS_STRING(ad),
                                 (size_t)PyBytes_GET_SIZE(ad));
    nogil_end(ts);
    Py_DECREF(ctxobj);
    if (rc != 0) {
        Py_DECREF(res);
        return PyErr_NoMemory();
    }
    return res;
}

/* The characters of an exact str when they are all ASCII (sealed as they are), else NULL with
   no exception (the codec or the fallback takes the value). */
static inline const char *ascii_chars(PyObject *value, Py_ssize_t *n)
{
#ifdef Py_LIMITED_API
    /* no access to a str's storage: its UTF-8 form (an ASCII str's own characters, not a copy)
       is ASCII when it is as long as the str; lone surrogates fail here and in the codec */
    const char *p = PyUnicode_AsUTF8AndSize(value, n);
    if (p == NULL) {
        PyErr_Clear(); /* a UnicodeEncodeError holds the value in .object */
        return NULL;
    }
    return *n == PyUnicode_GetLength(value) ? p : NULL;
#else
    if (!PyUnicode_IS_ASCII(value)) {
        return NULL;
    }
    *n = PyUnicode_GET_LENGTH(value);
    return (const char *)PyUnicode_DATA(value);
#endif
}

static PyObject *Sealer_call(SealerObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
{
    PyObject *value, *table, *seal, *encoded = NULL, *res;
    const char *data;
    Py_ssize_t n;

    if (one_arg("NamedSealer", nargsf, kwnames) != 0) {
        return NULL;
    }
    value = args[0];
    if (value == Py_None) {
        Py_RETURN_NONE;
    }
    table = native_table(self->registry, self->name);
    if (table == NULL) {
        return PyErr_Occurred() ? NULL : PyObject_CallOneArg(self->fallback, value);
    }
    seal = PyTuple_GET_ITEM(table, 1);
    if (!PyTuple_CheckExact(seal) || PyTuple_GET_SIZE(seal) != 5) {
        Py_DECREF(table);
        return PyObject_CallOneArg(self->fallback, value);
    }
    if (self->raw == RAW_STR && PyUnicode_CheckExact(value) &&
        (data = ascii_chars(value, &n)) != NULL && (self->max_len < 0 || n <= self->max_len)) {
        /* data, n: the str's characters */
    } else if (self->raw == RAW_BYTES && PyBytes_CheckExact(value) &&
               (self->max_len < 0 || PyBytes_GET_SIZE(value) <= self->max_len)) {
        data = PyBytes_AS_STRING(value);
        n = PyBytes_GET_SIZE(value);
    } else if (self->codec != Py_None) {
        encoded = PyObject_CallOneArg(self->codec, value); /* raises the codec's error */
        if (encoded == NULL) {
            Py_DECREF(table);
            return NULL;
        }
        if (!PyBytes_CheckExact(encoded)) {
            PyObject *tname = type_name(encoded);
            if (tname != NULL) {
                PyErr_Format(PyExc_TypeError, "codec encode returned %.100U, not bytes", tname);
                Py_DECREF(tname);
            }
            Py_DECREF(encoded);
            Py_DECREF(table);
            return NULL;
        }
        data = PyBytes_AS_STRING(encoded);
        n = PyBytes_GET_SIZE(encoded);
    } else {
        Py_DECREF(table);
        return PyObject_CallOneArg(self->fallback, value);
    }
    res = seal_with(seal, data, n, self->ad, self->out_bytearray, self->max_over);
    Py_XDECREF(encoded);
    Py_DECREF(table);
    if (res == Py_NotImplemented) {
        Py_DECREF(res);
        return PyObject_CallOneArg(self->fallback, value);
    }
    return res;
}

/* ---- NamedOpener ---- */

typedef struct {
    BOUND_HEAD
    int text; /* 1: return str (strict UTF-8), 0: bytes; then codec (decode) when given */
    /* one-entry cache: the Context of cached_header in cached_table */
    PyObject *cached_table, *cached_ctx;
    uint8_t cached_header[HEADER_SIZE];
} OpenerObject;

/* The Context for the header of ``in`` in ``opens`` (new reference), or NULL without an
   exception when the fallback must decide. */
static PyObject *find_context(OpenerObject *self, PyObject *opens, const uint8_t *in)
{
    PyObject *key, *ctx;
    if (self->cached_table == opens && memcmp(self->cached_header, in, HEADER_SIZE) == 0) {
        Py_INCREF(self->cached_ctx);
        return self->cached_ctx;
    }
    key = PyBytes_FromStringAndSize((const char *)in, HEADER_SIZE);
    if (key == NULL) {
        return NULL;
    }
    ctx = PyDict_GetItemWithError(opens, key); /* borrowed */
    Py_DECREF(key);
    if (ctx == NULL || !PyObject_TypeCheck(ctx, ContextType) ||
        ((ContextObject *)ctx)->ctx == NULL) {
        return NULL;
    }
    Py_INCREF(opens);
    Py_XSETREF(self->cached_table, opens);
    Py_INCREF(ctx);
    Py_XSETREF(self->cached_ctx, ctx);
    memcpy(self->cached_header, in, HEADER_SIZE);
    Py_INCREF(ctx);
    return ctx;
}

#ifdef Py_LIMITED_API
/* Decrypt into a buffer (the limited API cannot write into a new str), decode it as strict
   UTF-8 and wipe it.  NULL without an exception when the tag fails or the text is not UTF-8:
   the fallback decides. */
static PyObject *open_text(const sealstore_ctx *ctx, const Py_buffer *in, size_t mlen,
                           PyObject *ad)
{
    uint8_t small[256];
    uint8_t *m = mlen <= sizeof small ? small : (uint8_t *)PyMem_Malloc(mlen);
    PyObject *text = NULL;
    PyThreadState *ts;
    int rc;

    if (m == NULL) {
        return PyErr_NoMemory();
    }
    ts = nogil_begin(in->len);
    rc = sealstore_open_prefixed(ctx, m, in->buf, (size_t)in->len, HEADER_SIZE,
                                 (const uint8_t *)PyBytes_AS_STRING(ad),
                                 (size_t)PyBytes_GET_SIZE(ad));
    nogil_end(ts);
    if (rc == 0) {
        text = PyUnicode_DecodeUTF8((const char *)m, (Py_ssize_t)mlen, NULL);
        if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear(); /* it holds the plaintext in .object */
        }
    }
    sealstore_memzero(m, mlen);
    if (m != small) {
        PyMem_Free(m);
    }
    return text;
}
#else
/* 1 if the n bytes at p are all ASCII. */
static int all_ascii(const uint8_t *p, size_t n)
{
    uint64_t acc = 0, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        acc |= w;
    }
    for (; i < n; i++) {
        acc |= p[i];
    }
    return (acc & 0x8080808080808080ull) == 0;
}

/* Decrypt straight into a new ASCII str; plaintext that turns out not to be ASCII is decoded
   as strict UTF-8 from there, and that first string is wiped before it is freed.  NULL without
   an exception when the tag fails or the text is not UTF-8: the fallback decides. */
static PyObject *open_text(const sealstore_ctx *ctx, const Py_buffer *in, size_t mlen,
                           PyObject *ad)
{
    PyObject *res, *text;
    uint8_t *m;
    PyThreadState *ts;
    int rc;

    res = PyUnicode_New((Py_ssize_t)mlen, 127);
    if (res == NULL) {
        return NULL;
    }
    m = PyUnicode_1BYTE_DATA(res); /* not shared until returned (mlen 0 writes nothing) */
    ts = nogil_begin(in->len);
    rc = sealstore_open_prefixed(ctx, m, in->buf, (size_t)in->len, HEADER_SIZE,
                                 (const uint8_t *)PyBytes_AS_STRING(ad),
                                 (size_t)PyBytes_GET_SIZE(ad));
    nogil_end(ts);
    if (rc != 0) { /* m was wiped */
        Py_DECREF(res);
        return NULL;
    }
    if (all_ascii(m, mlen)) {
        return res;
    }
    text = PyUnicode_DecodeUTF8((const char *)m, (Py_ssize_t)mlen, NULL);
    sealstore_memzero(m, mlen);
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear(); /* it holds the plaintext in .object */
    }
    Py_DECREF(res);
    return text;
}
#endif

/* Decrypt into new bytes; NULL without an exception when the tag fails. */
static PyObject *open_bytes(const sealstore_ctx *ctx, const Py_buffer *in, size_t mlen,
                            PyObject *ad)
{
    PyObject *res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)mlen);
    PyThreadState *ts;
    int rc;

    if (res == NULL) {
        return NULL;
    }
    ts = nogil_begin(in->len);
    rc = sealstore_open_prefixed(ctx, (uint8_t *)PyBytes_AS_STRING(res), in->buf,
                                 (size_t)in->len, HEADER_SIZE,
                                 (const uint8_t *)PyBytes_AS_STRING(ad),
                                 (size_t)PyBytes_GET_SIZE(ad));
    nogil_end(ts);
    if (rc != 0) {
        Py_DECREF(res);
        return NULL;
    }
    return res;
}

static PyObject *Opener_call(OpenerObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
{
    PyObject *value, *table, *ctxobj = NULL, *res = NULL;
    Py_buffer in;
    const sealstore_ctx *ctx;
    size_t over;

    if (one_arg("NamedOpener", nargsf, kwnames) != 0) {
        return NULL;
    }
    value = args[0];
    if (value == Py_None) {
        Py_RETURN_NONE;
    }
    table = native_table(self->registry, self->name);
    if (table == NULL) {
        return PyErr_Occurred() ? NULL : PyObject_CallOneArg(self->fallback, value);
    }
    if (PyBytes_CheckExact(value)) { /* the usual case: no buffer export needed */
        in.buf = PyBytes_AS_STRING(value);
        in.len = PyBytes_GET_SIZE(value);
        in.obj = NULL;
    } else if (PyObject_GetBuffer(value, &in, PyBUF_SIMPLE) != 0) {
        PyErr_Clear();
        Py_DECREF(table);
        return PyObject_CallOneArg(self->fallback, value); /* names the wrong type */
    }
    if (in.len >= HEADER_SIZE) {
        ctxobj = find_context(self, PyTuple_GET_ITEM(table, 0), in.buf);
    }
    Py_DECREF(table);
    if (ctxobj == NULL) {
        PyBuffer_Release(&in);
        return PyErr_Occurred() ? NULL : PyObject_CallOneArg(self->fallback, value);
    }
    ctx = ((ContextObject *)ctxobj)->ctx;
    over = HEADER_SIZE + ctx->npublen + ctx->maclen;
    if ((size_t)in.len < over) { /* the fallback raises the precise "too short" error */
        PyBuffer_Release(&in);
        Py_DECREF(ctxobj);
        return PyObject_CallOneArg(self->fallback, value);
    }
    if (self->text) {
        res = open_text(ctx, &in, (size_t)in.len - over, self->ad);
    } else {
        res = open_bytes(ctx, &in, (size_t)in.len - over, self->ad);
    }
    PyBuffer_Release(&in);
    Py_DECREF(ctxobj);
    if (res != NULL && self->codec != Py_None) {
        Py_SETREF(res, PyObject_CallOneArg(self->codec, res));
        if (res == NULL && PyErr_ExceptionMatches(PyExc_Exception)) {
            PyErr_Clear(); /* a decoder's error may carry the plaintext */
        }
    }
    if (res == NULL && !PyErr_Occurred()) { /* a failed tag or decode: the fallback names it */
        return PyObject_CallOneArg(self->fallback, value);
    }
    return res;
}

/* ---- construction ---- */

/* Check the common arguments and store them in a new object of ``type``; NULL on error. */
static BoundObject *bound_new(PyTypeObject *type, PyObject *registry, PyObject *name,
                             PyObject *ad, PyObject *fallback, PyObject *codec,
                             const char *codec_name, vectorcallfunc call)
{
    BoundObject *self;
    if (!PyDict_Check(registry)) {
        PyErr_SetString(PyExc_TypeError, "registry must be a dict");
        return NULL;
    }
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "name must be a str");
        return NULL;
    }
    if (!PyBytes_CheckExact(ad)) {
        PyErr_SetString(PyExc_TypeError, "associated_data must be bytes");
        return NULL;
    }
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "fallback must be callable");
        return NULL;
    }
    if (codec != Py_None && !PyCallable_Check(codec)) {
        PyErr_Format(PyExc_TypeError, "%s must be callable or None", codec_name);
        return NULL;
    }
    self = (BoundObject *)PyType_GenericAlloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->registry = Py_NewRef(registry);
    self->name = Py_NewRef(name);
    self->ad = Py_NewRef(ad);
    self->fallback = Py_NewRef(fallback);
    self->codec = Py_NewRef(codec);
    self->vectorcall = call;
    return self;
}

static int bound_traverse(BoundObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE((PyObject *)self)); /* a heap type: each instance holds a reference */
    Py_VISIT(self->registry);
    Py_VISIT(self->fallback);
    Py_VISIT(self->codec);
    return 0;
}

static void bound_clear(BoundObject *self)
{
    Py_CLEAR(self->registry);
    Py_CLEAR(self->name);
    Py_CLEAR(self->ad);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->codec);
}

static void Bound_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    (void)((inquiry)PyType_GetSlot(type, Py_tp_clear))(self);
    ((freefunc)PyType_GetSlot(type, Py_tp_free))(self);
    Py_DECREF(type);
}

static PyObject *Sealer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"registry", "name", "associated_data", "fallback", "raw",
                             "max_len", "encode", "out_bytearray", "max_overhead", NULL};
    PyObject *registry, *name, *ad, *fallback, *encode = Py_None;
    int raw = RAW_NONE, out_bytearray = 0;
    Py_ssize_t max_len = -1, max_over = -1;
    SealerObject *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO|$inOpn", kwlist, &registry, &name, &ad,
                                     &fallback, &raw, &max_len, &encode, &out_bytearray,
                                     &max_over)) {
        return NULL;
    }
    if (raw != RAW_NONE && raw != RAW_BYTES && raw != RAW_STR) {
        PyErr_SetString(PyExc_ValueError, "raw must be 0 (none), 1 (bytes) or 2 (ASCII str)");
        return NULL;
    }
    self = (SealerObject *)bound_new(type, registry, name, ad, fallback, encode, "encode",
                                     (vectorcallfunc)Sealer_call);
    if (self != NULL) {
        self->raw = raw;
        self->out_bytearray = out_bytearray;
        self->max_len = max_len < 0 ? -1 : max_len;
        self->max_over = max_over < 0 ? -1 : max_over;
    }
    return (PyObject *)self;
}

static PyObject *Opener_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"registry", "name", "associated_data", "fallback", "text",
                             "decode", NULL};
    PyObject *registry, *name, *ad, *fallback, *decode = Py_None;
    int text = 0;
    OpenerObject *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO|$pO", kwlist, &registry, &name, &ad,
                                     &fallback, &text, &decode)) {
        return NULL;
    }
    self = (OpenerObject *)bound_new(type, registry, name, ad, fallback, decode, "decode",
                                     (vectorcallfunc)Opener_call);
    if (self != NULL) {
        self->text = text;
    }
    return (PyObject *)self;
}

static int Sealer_clear(SealerObject *self)
{
    bound_clear((BoundObject *)self);
    return 0;
}

static int Opener_traverse(OpenerObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->cached_table);
    Py_VISIT(self->cached_ctx);
    return bound_traverse((BoundObject *)self, visit, arg);
}

static int Opener_clear(OpenerObject *self)
{
    Py_CLEAR(self->cached_table);
    Py_CLEAR(self->cached_ctx);
    bound_clear((BoundObject *)self);
    return 0;
}

static PyObject *no_reduce(PyObject *self, PyObject *unused)
{
    PyObject *tname = type_name(self);
    (void)unused;
    if (tname != NULL) {
        PyErr_Format(PyExc_TypeError, "%.100U objects cannot be pickled", tname);
        Py_DECREF(tname);
    }
    return NULL;
}

static PyMethodDef bound_methods[] = {
    {"__reduce__", no_reduce, METH_NOARGS, "__reduce__($self, /)\n--\n\nRefused: not picklable."},
    {NULL, NULL, 0, NULL},
};

/* Called through vectorcall (the instance's ``vectorcall`` field, named by this member). */
static PyMemberDef Sealer_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(SealerObject, vectorcall), Py_READONLY,
     NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyMemberDef Opener_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(OpenerObject, vectorcall), Py_READONLY,
     NULL},
    {NULL, 0, 0, 0, NULL},
};

#define BOUND_FLAGS                                                                         \
    (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |                 \
     Py_TPFLAGS_IMMUTABLETYPE)

static PyType_Slot Sealer_slots[] = {
    {Py_tp_doc, (void *)"NamedSealer(registry, name, associated_data, fallback, *, raw=0, "
                        "max_len=-1, encode=None, out_bytearray=False, max_overhead=-1)"
                        "\n--\n\n"
                        "Seals one column value through the keyring registry[name] (internal; "
                        "see sealstore.keyring.named_sealer)."},
    {Py_tp_new, (void *)Sealer_new},
    {Py_tp_call, (void *)PyVectorcall_Call},
    {Py_tp_members, Sealer_members},
    {Py_tp_traverse, (void *)bound_traverse},
    {Py_tp_clear, (void *)Sealer_clear},
    {Py_tp_dealloc, (void *)Bound_dealloc},
    {Py_tp_methods, bound_methods},
    {0, NULL},
};

static PyType_Slot Opener_slots[] = {
    {Py_tp_doc, (void *)"NamedOpener(registry, name, associated_data, fallback, *, text=False, "
                        "decode=None)\n--\n\nOpens one column value through the keyring "
                        "registry[name] (internal; see sealstore.keyring.named_opener)."},
    {Py_tp_new, (void *)Opener_new},
    {Py_tp_call, (void *)PyVectorcall_Call},
    {Py_tp_members, Opener_members},
    {Py_tp_traverse, (void *)Opener_traverse},
    {Py_tp_clear, (void *)Opener_clear},
    {Py_tp_dealloc, (void *)Bound_dealloc},
    {Py_tp_methods, bound_methods},
    {0, NULL},
};

static PyType_Spec Sealer_spec = {
    .name = "sealstore._speedups.NamedSealer",
    .basicsize = sizeof(SealerObject),
    .flags = BOUND_FLAGS,
    .slots = Sealer_slots,
};

static PyType_Spec Opener_spec = {
    .name = "sealstore._speedups.NamedOpener",
    .basicsize = sizeof(OpenerObject),
    .flags = BOUND_FLAGS,
    .slots = Opener_slots,
};

static PyTypeObject *SealerType, *OpenerType;

int bound_add_types(PyObject *module)
{
    str_native = PyUnicode_InternFromString("_native");
    if (str_native == NULL || add_type(module, &SealerType, &Sealer_spec) < 0 ||
        add_type(module, &OpenerType, &Opener_spec) < 0) {
        return -1;
    }
    return 0;
}
