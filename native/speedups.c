/*
 * sealstore._speedups: the per-call entry points of the cipher classes, in the CPython API.
 *
 * A cffi call costs about 150 ns plus 70 ns per ffi.from_buffer, more than AEGIS needs for a
 * small message, and cffi cannot allocate the result bytes object for C to write into.  This
 * module parses buffers with the buffer protocol, writes straight into a new bytes object or a
 * caller's buffer, and calls the kernel chosen for the context (sealstore._native owns the
 * contexts and the kernels; a context arrives here in a capsule made with it, never as a
 * number, and this module holds its pointer and a reference to the owner).
 * The GIL is released for inputs of SPEEDUPS_GIL_MIN bytes or more: below that the call takes
 * under a microsecond, and handing the GIL over and back (about 100 ns, measured) would cost
 * more than other threads could gain.  Segment loops always release it.
 */
#include "speedups.h"

#if defined(__linux__)
#include <pthread.h>
#include <sys/random.h>
#define SPEEDUPS_HAVE_GETRANDOM 1
#elif defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__NetBSD__)
#include <pthread.h>
#include <stdlib.h>
#define SPEEDUPS_HAVE_ARC4RANDOM 1
#endif

#define SPEEDUPS_GIL_MIN (32 * 1024)

/* Release the GIL around a native call when the input is large enough to pay for it. */
PyThreadState *nogil_begin(Py_ssize_t n)
{
    return n >= SPEEDUPS_GIL_MIN ? PyEval_SaveThread() : NULL;
}

void nogil_end(PyThreadState *ts)
{
    if (ts != NULL) {
        PyEval_RestoreThread(ts);
    }
}

/* ---- nonces: the OS CSPRNG, fetched 4 KiB at a time (emptied in a forked child) ---- */

#define RBUF_SIZE 4096
static uint8_t rbuf[RBUF_SIZE];
static size_t rpos = RBUF_SIZE; /* protected by the GIL (the module declares Py_MOD_GIL_USED) */

#if defined(SPEEDUPS_HAVE_GETRANDOM) || defined(SPEEDUPS_HAVE_ARC4RANDOM)
static void rbuf_reset_after_fork(void)
{
    rpos = RBUF_SIZE;
}
#endif

static int fill_random(uint8_t *p, size_t n)
{
#if defined(SPEEDUPS_HAVE_GETRANDOM)
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
#elif defined(SPEEDUPS_HAVE_ARC4RANDOM)
    arc4random_buf(p, n);
    return 0;
#else
    PyObject *os = PyImport_ImportModule("os");
    PyObject *b;
    if (os == NULL) {
        return -1;
    }
    b = PyObject_CallMethod(os, "urandom", "n", (Py_ssize_t)n);
    Py_DECREF(os);
    if (b == NULL) {
        return -1;
    }
    memcpy(p, PyBytes_AS_STRING(b), n);
    Py_DECREF(b);
    return 0;
#endif
}

/* 16 fresh random bytes; caller holds the GIL. */
int next_nonce(uint8_t *npub)
{
    if (rpos + SEALSTORE_NPUBBYTES > RBUF_SIZE) {
        if (fill_random(rbuf, RBUF_SIZE) != 0) {
            return -1;
        }
        rpos = 0;
    }
    memcpy(npub, rbuf + rpos, SEALSTORE_NPUBBYTES);
    sealstore_memzero(rbuf + rpos, SEALSTORE_NPUBBYTES);
    rpos += SEALSTORE_NPUBBYTES;
    return 0;
}

/* ---- errors ---- */

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

/* sealstore.errors.InternalError: the kernel reported a state that should be impossible. */
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

/* Name the list position of the exception being raised (``.index``), as InvalidTag does. */
static void set_error_index(Py_ssize_t index)
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

/* ---- buffers ---- */

static int get_buffer(PyObject *obj, Py_buffer *view, const char *what, int writable)
{
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) != 0) {
        if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         writable ? "%s must be a writable, contiguous bytes-like object, not %.80s"
                                  : "%s must be a contiguous bytes-like object, not %.80s",
                         what, Py_TYPE(obj)->tp_name);
        }
        return -1;
    }
    return 0;
}

/* Optional AD: None means empty. */
static int get_ad(PyObject *obj, Py_buffer *view)
{
    if (obj == NULL || obj == Py_None) {
        view->obj = NULL;
        view->buf = NULL;
        view->len = 0;
        return 0;
    }
    return get_buffer(obj, view, "associated_data", 0);
}

static void release(Py_buffer *view)
{
    if (view->obj != NULL) {
        PyBuffer_Release(view);
    }
}

static int get_nonce(PyObject *obj, Py_buffer *view)
{
    if (get_buffer(obj, view, "nonce", 0) != 0) {
        return -1;
    }
    if (view->len != SEALSTORE_NPUBBYTES) {
        PyErr_Format(PyExc_ValueError, "nonce must be %d bytes, got %zd", SEALSTORE_NPUBBYTES,
                     view->len);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
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
    if (Py_TYPE(obj)->tp_iter == NULL && !PySequence_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, msg);
        return NULL;
    }
    return PySequence_Tuple(obj);
}

/* ---- overlapping buffers ---- */

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

static void raise_overlap(const char *name, int in_place_ok)
{
    if (error_class(&overlapping_cls, "OverlappingBuffers") != NULL) {
        PyErr_Format(overlapping_cls,
                     in_place_ok ? "out overlaps %s: it must start exactly where %s starts (in "
                                   "place) or not overlap it at all"
                                 : "out must not overlap %s",
                     name, name);
    }
}

/* 0 if the ``written`` bytes at ``out`` overlap none of the inputs (first_overlap), else -1
   with OverlappingBuffers naming the input. */
static inline int check_disjoint(const void *out, Py_ssize_t written, const Py_buffer *const *ins,
                                 const char *const *names, int n, int in_place)
{
    const int i = first_overlap(out, written, ins, n, in_place);
    if (i < 0) {
        return 0;
    }
    raise_overlap(names[i], i == 0 && in_place);
    return -1;
}

/* _speedups.check_disjoint(out, written, in_place, data, *others): the same check for the
   into-calls written in Python (AES-GCM); None stands for an absent input. */
static PyObject *py_check_disjoint(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *const names[] = {"data", "nonce", "associated_data", "nonce_prefix"};
    Py_buffer out, views[4];
    const Py_buffer *ins[4] = {NULL, NULL, NULL, NULL};
    Py_ssize_t written, got = 0;
    int in_place, rc = -1;

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
    for (; got < nargs - 3; got++) {
        PyObject *o = args[3 + got];
        views[got].obj = NULL;
        if (o != Py_None) {
            if (get_buffer(o, &views[got], names[got], 0) != 0) {
                goto done;
            }
            ins[got] = &views[got];
        }
    }
    rc = check_disjoint(out.buf, written < out.len ? written : out.len, ins, names, (int)got,
                        in_place);
done:
    for (Py_ssize_t i = 0; i < got; i++) {
        release(&views[i]);
    }
    PyBuffer_Release(&out);
    if (rc != 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* A Context made with Context.__new__ alone has no native context: refuse it. */
#define REQUIRE_CTX(self)                                                                   \
    do {                                                                                    \
        if ((self)->ctx == NULL) {                                                          \
            PyErr_SetString(PyExc_ValueError, "sealstore: uninitialized cipher context");   \
            return NULL;                                                                    \
        }                                                                                   \
    } while (0)

/* ---- argument parsing: (positional..., associated_data=None) ---- */

static int parse_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, Py_ssize_t npos,
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
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t i;
        for (i = 0; i < total; i++) {
            if (PyUnicode_CompareWithASCIIString(name, names[i]) == 0) {
                break;
            }
        }
        if (i == total) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname,
                         name);
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

/* ---- the Context type ---- */

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
        PyErr_Format(PyExc_TypeError,
                     "context must be a native context capsule from sealstore.native, not "
                     "%.80s",
                     Py_TYPE(capsule)->tp_name);
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
    Py_XDECREF(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static const char *const names_crypt[] = {"nonce", "data", "associated_data"};
static const char *const names_into[] = {"out", "nonce", "data", "associated_data"};
static const char *const names_inputs[] = {"data", "nonce", "associated_data"};

/* encrypt / decrypt into a new bytes object; they share everything but the direction. */
static PyObject *crypt_bytes(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames, int enc)
{
    REQUIRE_CTX(self);
    PyObject *a[3];
    Py_buffer nonce, data, ad;
    PyObject *res = NULL;
    const size_t maclen = self->ctx->maclen;

    if (parse_args(args, nargs, kwnames, 2, enc ? "encrypt" : "decrypt", a, names_crypt) != 0 ||
        get_nonce(a[0], &nonce) != 0) {
        return NULL;
    }
    if (get_buffer(a[1], &data, "data", 0) != 0) {
        goto out_nonce;
    }
    if (get_ad(a[2], &ad) != 0) {
        goto out_data;
    }
    if (!enc && (size_t)data.len < maclen) {
        raise_invalid_tag(-1);
        goto out_ad;
    }
    res = PyBytes_FromStringAndSize(NULL, enc ? data.len + (Py_ssize_t)maclen
                                              : data.len - (Py_ssize_t)maclen);
    if (res != NULL) {
        uint8_t *o = (uint8_t *)PyBytes_AS_STRING(res);
        PyThreadState *ts = nogil_begin(data.len);
        int rc = enc ? sealstore_encrypt(self->ctx, o, data.buf, (size_t)data.len, ad.buf,
                                         (size_t)ad.len, nonce.buf)
                     : sealstore_decrypt(self->ctx, o, data.buf, (size_t)data.len, ad.buf,
                                         (size_t)ad.len, nonce.buf);
        nogil_end(ts);
        if (rc != 0) {
            Py_CLEAR(res);
            if (enc) {
                raise_internal_error("sealstore: encryption failed");
            } else {
                raise_invalid_tag(-1);
            }
        }
    }
out_ad:
    release(&ad);
out_data:
    PyBuffer_Release(&data);
out_nonce:
    PyBuffer_Release(&nonce);
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

/* encrypt_into / decrypt_into share everything but the direction. */
static PyObject *crypt_into(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames, int enc)
{
    REQUIRE_CTX(self);
    PyObject *a[4];
    Py_buffer out, nonce, data, ad;
    PyObject *res = NULL;
    const size_t maclen = self->ctx->maclen;
    Py_ssize_t need;

    if (parse_args(args, nargs, kwnames, 3, enc ? "encrypt_into" : "decrypt_into", a,
                   names_into) != 0 ||
        get_buffer(a[0], &out, "out", 1) != 0) {
        return NULL;
    }
    if (get_nonce(a[1], &nonce) != 0) {
        goto out_out;
    }
    if (get_buffer(a[2], &data, "data", 0) != 0) {
        goto out_nonce;
    }
    if (get_ad(a[3], &ad) != 0) {
        goto out_data;
    }
    if (!enc && (size_t)data.len < maclen) {
        raise_invalid_tag(-1);
        goto out_ad;
    }
    need = enc ? data.len + (Py_ssize_t)maclen : data.len - (Py_ssize_t)maclen;
    if (out.len < need) {
        PyErr_Format(PyExc_ValueError, "out must be at least %zd bytes, got %zd", need, out.len);
        goto out_ad;
    }
    {
        const Py_buffer *ins[3] = {&data, &nonce, &ad};
        if (check_disjoint(out.buf, need, ins, names_inputs, 3, 1) != 0) {
            goto out_ad;
        }
    }
    {
        int rc;
        PyThreadState *ts = nogil_begin(data.len);
        if (enc) {
            rc = sealstore_encrypt(self->ctx, out.buf, data.buf, (size_t)data.len, ad.buf,
                                   (size_t)ad.len, nonce.buf);
        } else {
            rc = sealstore_decrypt(self->ctx, out.buf, data.buf, (size_t)data.len, ad.buf,
                                   (size_t)ad.len, nonce.buf);
        }
        nogil_end(ts);
        if (rc != 0) {
            if (enc) {
                raise_internal_error("sealstore: encryption failed");
            } else {
                raise_invalid_tag(-1);
            }
        } else {
            res = PyLong_FromSsize_t(need);
        }
    }
out_ad:
    release(&ad);
out_data:
    PyBuffer_Release(&data);
out_nonce:
    PyBuffer_Release(&nonce);
out_out:
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

/* ---- prefixed values ---- */

static PyObject *seal_one(ContextObject *self, const Py_buffer *prefix, PyObject *item,
                          const Py_buffer *ad)
{
    Py_buffer m;
    PyObject *res;
    uint8_t npub[SEALSTORE_NPUBBYTES];
    const size_t maclen = self->ctx->maclen;
    int rc;

    if (get_buffer(item, &m, "plaintext", 0) != 0) {
        return NULL;
    }
    if (next_nonce(npub) != 0) {
        PyBuffer_Release(&m);
        return NULL;
    }
    res = PyBytes_FromStringAndSize(NULL, prefix->len + SEALSTORE_NPUBBYTES + m.len +
                                              (Py_ssize_t)maclen);
    if (res != NULL) {
        uint8_t *o = (uint8_t *)PyBytes_AS_STRING(res);
        PyThreadState *ts = nogil_begin(m.len);
        rc = sealstore_seal_prefixed(self->ctx, o, prefix->buf, (size_t)prefix->len, npub, m.buf,
                                     (size_t)m.len, ad->buf, (size_t)ad->len);
        nogil_end(ts);
        if (rc != 0) {
            Py_CLEAR(res);
            PyErr_NoMemory();
        }
    }
    PyBuffer_Release(&m);
    return res;
}

static PyObject *open_one(ContextObject *self, size_t prefixlen, PyObject *item,
                          const Py_buffer *ad, Py_ssize_t index)
{
    Py_buffer in;
    PyObject *res = NULL;
    const size_t over = prefixlen + SEALSTORE_NPUBBYTES + self->ctx->maclen;
    int rc;

    if (get_buffer(item, &in, "sealed", 0) != 0) {
        set_error_index(index);
        return NULL;
    }
    if ((size_t)in.len < over) {
        raise_invalid_tag(index);
        PyBuffer_Release(&in);
        return NULL;
    }
    res = PyBytes_FromStringAndSize(NULL, in.len - (Py_ssize_t)over);
    if (res != NULL) {
        uint8_t *m = (uint8_t *)PyBytes_AS_STRING(res);
        PyThreadState *ts = nogil_begin(in.len);
        rc = sealstore_open_prefixed(self->ctx, m, in.buf, (size_t)in.len, prefixlen, ad->buf,
                                     (size_t)ad->len);
        nogil_end(ts);
        if (rc != 0) {
            Py_CLEAR(res);
            raise_invalid_tag(index);
        }
    }
    PyBuffer_Release(&in);
    return res;
}

/* A non-negative size argument; too large or negative is a ValueError naming it. */
static int get_size(PyObject *obj, const char *what, Py_ssize_t *out)
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

static int get_prefixlen(PyObject *obj, size_t *out)
{
    Py_ssize_t n;
    if (get_size(obj, "prefix_len", &n) != 0) {
        return -1;
    }
    *out = (size_t)n;
    return 0;
}

/* ---- four values at once (ctx->batch) ---- */

/* prefix || ad, once per list; *heap is set when it had to be allocated. */
static const uint8_t *joined_ad(uint8_t *buf, size_t bufsize, uint8_t **heap,
                                const uint8_t *prefix_bytes, size_t prefixlen,
                                const Py_buffer *ad)
{
    uint8_t *dst = buf;
    *heap = NULL;
    if (prefixlen + (size_t)ad->len > bufsize) {
        dst = *heap = (uint8_t *)PyMem_Malloc(prefixlen + (size_t)ad->len);
        if (dst == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    if (prefixlen) {
        memcpy(dst, prefix_bytes, prefixlen);
    }
    if (ad->len) {
        memcpy(dst + prefixlen, ad->buf, (size_t)ad->len);
    }
    return dst;
}

/* Seal items[0..3] into res[0..3] (new references) with one four-lane call. */
static int seal_four(ContextObject *self, const Py_buffer *prefix, PyObject *const *items,
                     const uint8_t *fullad, size_t fulladlen, Py_ssize_t base, PyObject **res)
{
    Py_buffer m[4];
    uint8_t *c[4], *mac[4];
    const uint8_t *mp[4], *npub[4];
    size_t mlen[4];
    const size_t maclen = self->ctx->maclen, pl = (size_t)prefix->len;
    int got = 0, rc = -1;

    for (int l = 0; l < 4; l++) {
        res[l] = NULL;
    }
    for (; got < 4; got++) {
        if (get_buffer(items[got], &m[got], "plaintext", 0) != 0) {
            set_error_index(base + got); /* as open_many does: name the list position */
            goto done;
        }
    }
    for (int l = 0; l < 4; l++) {
        uint8_t *o;
        res[l] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(pl + SEALSTORE_NPUBBYTES + maclen) +
                                                     m[l].len);
        if (res[l] == NULL) {
            goto done;
        }
        o = (uint8_t *)PyBytes_AS_STRING(res[l]);
        if (pl) {
            memcpy(o, prefix->buf, pl);
        }
        if (next_nonce(o + pl) != 0) {
            goto done;
        }
        npub[l] = o + pl;
        c[l] = o + pl + SEALSTORE_NPUBBYTES;
        mac[l] = c[l] + m[l].len;
        mp[l] = m[l].buf;
        mlen[l] = (size_t)m[l].len;
    }
    rc = self->ctx->batch->encrypt4(c, mac, maclen, mp, mlen, fullad, fulladlen, npub,
                                    self->ctx->key);
    if (rc != 0) {
        raise_internal_error("sealstore: encryption failed");
    }
done:
    for (int l = 0; l < got; l++) {
        PyBuffer_Release(&m[l]);
    }
    if (rc != 0) {
        for (int l = 0; l < 4; l++) {
            Py_CLEAR(res[l]);
        }
    }
    return rc;
}

/* Open items[0..3]; on a failure raise InvalidTag naming the first failing position. */
static int open_four(ContextObject *self, size_t prefixlen, PyObject *const *items,
                     const uint8_t *ad, size_t adlen, Py_ssize_t base, PyObject **res)
{
    Py_buffer in[4];
    uint8_t *m[4];
    const uint8_t *c[4], *mac[4], *npub[4];
    size_t clen[4];
    int ok[4];
    const size_t maclen = self->ctx->maclen, over = prefixlen + SEALSTORE_NPUBBYTES + maclen;
    int got = 0, rc = -1;
    uint8_t buf[256];
    uint8_t *heap = NULL;
    const uint8_t *fullad = NULL;

    for (int l = 0; l < 4; l++) {
        res[l] = NULL;
    }
    for (; got < 4; got++) {
        if (get_buffer(items[got], &in[got], "sealed", 0) != 0) {
            set_error_index(base + got);
            goto done;
        }
        if ((size_t)in[got].len < over) {
            raise_invalid_tag(base + got);
            got++;
            goto done;
        }
    }
    /* every value carries its own prefix, and the prefix is part of the AD: the four
       prefixes must be equal to share one AD (the caller groups by header) */
    for (int l = 1; l < 4; l++) {
        if (prefixlen && memcmp(in[l].buf, in[0].buf, prefixlen) != 0) {
            rc = 1; /* not batchable: caller falls back */
            goto done;
        }
    }
    fullad = buf;
    if (prefixlen + adlen > sizeof buf) {
        fullad = heap = (uint8_t *)PyMem_Malloc(prefixlen + adlen);
        if (heap == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    memcpy((uint8_t *)fullad, in[0].buf, prefixlen);
    if (adlen) {
        memcpy((uint8_t *)fullad + prefixlen, ad, adlen);
    }
    for (int l = 0; l < 4; l++) {
        const uint8_t *p = (const uint8_t *)in[l].buf;
        res[l] = PyBytes_FromStringAndSize(NULL, in[l].len - (Py_ssize_t)over);
        if (res[l] == NULL) {
            goto done;
        }
        m[l] = (uint8_t *)PyBytes_AS_STRING(res[l]);
        npub[l] = p + prefixlen;
        c[l] = p + prefixlen + SEALSTORE_NPUBBYTES;
        clen[l] = (size_t)in[l].len - over;
        mac[l] = c[l] + clen[l];
    }
    if (self->ctx->batch->decrypt4(m, c, clen, mac, maclen, fullad, prefixlen + adlen, npub,
                                   self->ctx->key, ok) == 0) {
        rc = 0;
    } else {
        for (int l = 0; l < 4; l++) {
            if (!ok[l]) {
                raise_invalid_tag(base + l);
                break;
            }
        }
    }
done:
    PyMem_Free(heap);
    for (int l = 0; l < got; l++) {
        PyBuffer_Release(&in[l]);
    }
    if (rc != 0) {
        for (int l = 0; l < 4; l++) {
            Py_CLEAR(res[l]);
        }
    }
    return rc;
}

static const char *const names_seal[] = {"prefix", "plaintext", "associated_data"};
static const char *const names_open[] = {"prefix_len", "sealed", "associated_data"};
static const char *const names_seal_many[] = {"prefix", "plaintexts", "associated_data"};

static PyObject *prefixed_call(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames, int seal, int many)
{
    REQUIRE_CTX(self);
    PyObject *a[3];
    Py_buffer prefix = {0}, ad;
    size_t prefixlen = 0;
    PyObject *res = NULL;
    const char *fname = seal ? (many ? "seal_many" : "seal") : (many ? "open_many" : "open");

    if (parse_args(args, nargs, kwnames, 2, fname, a,
                   seal ? (many ? names_seal_many : names_seal) : names_open) != 0) {
        return NULL;
    }
    if (seal) {
        if (get_buffer(a[0], &prefix, "prefix", 0) != 0) {
            return NULL;
        }
    } else if (get_prefixlen(a[0], &prefixlen) != 0) {
        return NULL;
    }
    if (get_ad(a[2], &ad) != 0) {
        release(&prefix);
        return NULL;
    }
    if (!many) {
        res = seal ? seal_one(self, &prefix, a[1], &ad) : open_one(self, prefixlen, a[1], &ad, -1);
    } else {
        /* a tuple of the items: the caller's list may change while the GIL is released */
        PyObject *seq = snapshot_items(a[1], "expected a sequence of bytes-like objects");
        if (seq != NULL) {
            Py_ssize_t n = PyTuple_GET_SIZE(seq);
            PyObject **items = PySequence_Fast_ITEMS(seq);
            Py_ssize_t i = 0;
            uint8_t adbuf[256];
            uint8_t *heap = NULL;
            const uint8_t *fullad = NULL;
            res = PyList_New(n);
            if (res != NULL && seal && self->ctx->batch != NULL && n >= 4) {
                fullad = joined_ad(adbuf, sizeof adbuf, &heap, prefix.buf, (size_t)prefix.len, &ad);
                if (fullad == NULL) {
                    Py_CLEAR(res);
                }
            }
            /* four at a time through the batch kernel, the rest one by one */
            for (; res != NULL && self->ctx->batch != NULL && i + 4 <= n; i += 4) {
                PyObject *four[4];
                int rc = seal ? seal_four(self, &prefix, items + i, fullad,
                                          (size_t)prefix.len + (size_t)ad.len, i, four)
                              : open_four(self, prefixlen, items + i, ad.buf, (size_t)ad.len, i,
                                          four);
                if (rc > 0) {
                    break; /* mixed prefixes: finish one by one */
                }
                if (rc < 0) {
                    Py_CLEAR(res);
                    break;
                }
                for (int l = 0; l < 4; l++) {
                    PyList_SET_ITEM(res, i + l, four[l]);
                }
            }
            PyMem_Free(heap);
            for (; res != NULL && i < n; i++) {
                PyObject *r = seal ? seal_one(self, &prefix, items[i], &ad)
                                   : open_one(self, prefixlen, items[i], &ad, i);
                if (r == NULL) {
                    if (seal) {
                        set_error_index(i);
                    }
                    Py_CLEAR(res);
                } else {
                    PyList_SET_ITEM(res, i, r);
                }
            }
            Py_DECREF(seq);
        }
    }
    release(&ad);
    release(&prefix);
    return res;
}

static PyObject *Context_seal(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    return prefixed_call(self, args, nargs, kwnames, 1, 0);
}

static PyObject *Context_open(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    return prefixed_call(self, args, nargs, kwnames, 0, 0);
}

static PyObject *Context_seal_many(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames)
{
    return prefixed_call(self, args, nargs, kwnames, 1, 1);
}

static PyObject *Context_open_many(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames)
{
    return prefixed_call(self, args, nargs, kwnames, 0, 1);
}

/* ---- segmented streams ---- */

static const char *const names_seg[] = {"out",         "data",  "segment_size", "nonce_prefix",
                                        "first_index", "final", "associated_data"};

static PyObject *segments_call(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames, int seal)
{
    REQUIRE_CTX(self);
    PyObject *a[7];
    Py_buffer out, data, prefix, ad;
    PyObject *res = NULL;
    const size_t T = self->ctx->maclen;
    Py_ssize_t seg, first;
    int final, rc;
    size_t bad = 0, nseg, need;

    if (parse_args(args, nargs, kwnames, 6, seal ? "seal_segments_into" : "open_segments_into", a,
                   names_seg) != 0) {
        return NULL;
    }
    if (get_size(a[2], "segment_size", &seg) != 0 || get_size(a[4], "first_index", &first) != 0) {
        return NULL;
    }
    final = PyObject_IsTrue(a[5]);
    if (final < 0) {
        return NULL;
    }
    if (seg <= 0 || first < 0 || (uint64_t)first > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError,
                        "segment_size must be > 0 and first_index in 0 .. 2**32 - 1");
        return NULL;
    }
    if (get_buffer(a[0], &out, "out", 1) != 0) {
        return NULL;
    }
    if (get_buffer(a[1], &data, "data", 0) != 0) {
        goto out_out;
    }
    if (get_buffer(a[3], &prefix, "nonce_prefix", 0) != 0) {
        goto out_data;
    }
    if (prefix.len != SEALSTORE_NPUBBYTES - 5) {
        PyErr_Format(PyExc_ValueError, "nonce_prefix must be %d bytes, got %zd",
                     SEALSTORE_NPUBBYTES - 5, prefix.len);
        goto out_prefix;
    }
    if (get_ad(a[6], &ad) != 0) {
        goto out_prefix;
    }
    if (seal) {
        if (!final && data.len % seg != 0) {
            PyErr_SetString(PyExc_ValueError,
                            "a non-final buffer must hold whole segments");
            goto out_ad;
        }
        nseg = (size_t)(data.len / seg) + (final ? 1 : 0);
        need = (size_t)data.len + nseg * T;
    } else {
        const size_t sealed = (size_t)seg + T;
        nseg = (size_t)data.len / sealed;
        if (final) {
            nseg += 1;
        }
        need = (size_t)data.len >= nseg * T ? (size_t)data.len - nseg * T : 0;
    }
    if ((size_t)out.len < need) {
        PyErr_Format(PyExc_ValueError, "out must be at least %zu bytes, got %zd", need, out.len);
        goto out_ad;
    }
    {
        /* no in-place: segment i is written at a different offset than it is read from */
        static const char *const names[] = {"data", "nonce_prefix", "associated_data"};
        const Py_buffer *ins[3] = {&data, &prefix, &ad};
        if (check_disjoint(out.buf, (Py_ssize_t)need, ins, names, 3, 0) != 0) {
            goto out_ad;
        }
    }
    {
        PyThreadState *ts = PyEval_SaveThread(); /* always bulk work */
        if (seal) {
            rc = sealstore_seal_segments(self->ctx, out.buf, data.buf, (size_t)data.len,
                                         (size_t)seg, prefix.buf, (uint32_t)first, final, ad.buf,
                                         (size_t)ad.len);
        } else {
            rc = sealstore_open_segments(self->ctx, out.buf, data.buf, (size_t)data.len,
                                         (size_t)seg, prefix.buf, (uint32_t)first, final, ad.buf,
                                         (size_t)ad.len, &bad);
        }
        nogil_end(ts);
    }
    if (rc == 0) {
        res = PyLong_FromSize_t(need);
    } else if (rc == -1 && !seal) {
        raise_invalid_tag((Py_ssize_t)bad);
    } else if (rc == -3) {
        PyErr_SetString(PyExc_ValueError, "segment index would pass 2**32 - 1");
    } else if (seal) {
        PyErr_SetString(PyExc_ValueError,
                        "data cannot be sealed as segments: an empty buffer must be final, and "
                        "segment_size must be positive");
    } else {
        /* framing: the buffer cannot be a sequence of sealed segments (truncated/extended) */
        raise_invalid_tag((Py_ssize_t)first);
    }
out_ad:
    release(&ad);
out_prefix:
    PyBuffer_Release(&prefix);
out_data:
    PyBuffer_Release(&data);
out_out:
    PyBuffer_Release(&out);
    return res;
}

static PyObject *Context_seal_segments(ContextObject *self, PyObject *const *args,
                                       Py_ssize_t nargs, PyObject *kwnames)
{
    return segments_call(self, args, nargs, kwnames, 1);
}

static PyObject *Context_open_segments(ContextObject *self, PyObject *const *args,
                                       Py_ssize_t nargs, PyObject *kwnames)
{
    return segments_call(self, args, nargs, kwnames, 0);
}

#define FASTKW (METH_FASTCALL | METH_KEYWORDS)
static PyMethodDef Context_methods[] = {
    {"encrypt", (PyCFunction)(void (*)(void))Context_encrypt, FASTKW,
     "encrypt(nonce, data, associated_data=None) -> ciphertext || tag"},
    {"decrypt", (PyCFunction)(void (*)(void))Context_decrypt, FASTKW,
     "decrypt(nonce, data, associated_data=None) -> plaintext"},
    {"encrypt_into", (PyCFunction)(void (*)(void))Context_encrypt_into, FASTKW,
     "encrypt_into(out, nonce, data, associated_data=None) -> bytes written"},
    {"decrypt_into", (PyCFunction)(void (*)(void))Context_decrypt_into, FASTKW,
     "decrypt_into(out, nonce, data, associated_data=None) -> bytes written"},
    {"seal", (PyCFunction)(void (*)(void))Context_seal, FASTKW,
     "seal(prefix, plaintext, associated_data=None) -> prefix || nonce || ct || tag"},
    {"open", (PyCFunction)(void (*)(void))Context_open, FASTKW,
     "open(prefix_len, sealed, associated_data=None) -> plaintext"},
    {"seal_many", (PyCFunction)(void (*)(void))Context_seal_many, FASTKW,
     "seal_many(prefix, plaintexts, associated_data=None) -> list"},
    {"open_many", (PyCFunction)(void (*)(void))Context_open_many, FASTKW,
     "open_many(prefix_len, sealed, associated_data=None) -> list"},
    {"seal_segments_into", (PyCFunction)(void (*)(void))Context_seal_segments, FASTKW,
     "seal_segments_into(out, data, segment_size, nonce_prefix, first_index, final, "
     "associated_data=None) -> bytes written"},
    {"open_segments_into", (PyCFunction)(void (*)(void))Context_open_segments, FASTKW,
     "open_segments_into(out, data, segment_size, nonce_prefix, first_index, final, "
     "associated_data=None) -> bytes written"},
    {NULL, NULL, 0, NULL}};

PyTypeObject ContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sealstore._speedups.Context",
    .tp_basicsize = sizeof(ContextObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A native cipher context's fast entry points (internal).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Context_init,
    .tp_dealloc = (destructor)Context_dealloc,
    .tp_methods = Context_methods,
};

static PyMethodDef module_functions[] = {
    {"check_disjoint", (PyCFunction)(void (*)(void))py_check_disjoint, METH_FASTCALL,
     "check_disjoint(out, written, in_place, data, *others): raise OverlappingBuffers when the "
     "first `written` bytes of out overlap an input (data may start exactly at out when "
     "in_place); None stands for an absent input."},
    {NULL, NULL, 0, NULL},
};

static int speedups_exec(PyObject *m)
{
#if defined(SPEEDUPS_HAVE_GETRANDOM) || defined(SPEEDUPS_HAVE_ARC4RANDOM)
    static int atfork_done;
    if (!atfork_done) {
        if (pthread_atfork(NULL, NULL, rbuf_reset_after_fork) != 0) {
            PyErr_SetString(PyExc_OSError, "sealstore: pthread_atfork failed");
            return -1;
        }
        atfork_done = 1;
    }
#endif
    if (PyType_Ready(&ContextType) < 0) {
        return -1;
    }
    Py_INCREF(&ContextType);
    if (PyModule_AddObject(m, "Context", (PyObject *)&ContextType) < 0) {
        Py_DECREF(&ContextType);
        return -1;
    }
    if (PyModule_AddStringConstant(m, "CONTEXT_CAPSULE", SEALSTORE_CTX_CAPSULE) < 0 ||
        bound_add_types(m) < 0 || rowmap_add_functions(m) < 0) {
        return -1;
    }
    return 0;
}

/* The module needs the GIL: the nonce buffer, the openers' one-entry caches and the borrowed
   references taken from dicts and tuples rely on it.  On a free-threaded build (3.13t+)
   importing it turns the GIL back on; one interpreter only (the types are static). */
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
