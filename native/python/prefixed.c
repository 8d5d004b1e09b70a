/*
 * Prefixed values: seal(prefix, plaintext, ad) -> prefix || nonce || ciphertext || tag, with a
 * fresh random nonce and prefix || ad authenticated, open() reversing it, and seal_many /
 * open_many over a list, four values at a time through the context's batch kernel when it has
 * one (the rest one by one).  Everything a list's values go through is in this file or inline
 * in speedups.h: the split adds no call per value.
 */
#include "speedups.h"

/* ---- one value ---- */

static PyObject *seal_one(ContextObject *self, const Py_buffer *prefix, PyObject *item,
                          const Py_buffer *ad)
{
    Py_buffer m;
    PyObject *res;
    uint8_t npub[SEALSTORE_MAX_NPUBBYTES];
    const size_t maclen = self->ctx->maclen;
    int rc;

    if (get_buffer(item, &m, "plaintext", 0) != 0) {
        return NULL;
    }
    if (next_nonce(npub, self->ctx->npublen) != 0) {
        PyBuffer_Release(&m);
        return NULL;
    }
    res = PyBytes_FromStringAndSize(NULL, prefix->len + (Py_ssize_t)self->ctx->npublen + m.len +
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
    const size_t over = prefixlen + self->ctx->npublen + self->ctx->maclen;
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

/* ---- four values at once (ctx->batch) ---- */

/* prefix || ad in ``buf`` or, when it does not fit, in *heap (set then); NULL with an
   exception. */
static const uint8_t *joined_ad(uint8_t *buf, size_t bufsize, uint8_t **heap,
                                const void *prefix, size_t prefixlen, const void *ad,
                                size_t adlen)
{
    uint8_t *dst = buf;
    *heap = NULL;
    if (prefixlen + adlen > bufsize) {
        dst = *heap = (uint8_t *)PyMem_Malloc(prefixlen + adlen);
        if (dst == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    if (prefixlen) {
        memcpy(dst, prefix, prefixlen);
    }
    if (adlen) {
        memcpy(dst + prefixlen, ad, adlen);
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
        res[l] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(pl + self->ctx->npublen + maclen) +
                                                     m[l].len);
        if (res[l] == NULL) {
            goto done;
        }
        o = (uint8_t *)PyBytes_AS_STRING(res[l]);
        if (pl) {
            memcpy(o, prefix->buf, pl);
        }
        if (next_nonce(o + pl, self->ctx->npublen) != 0) {
            goto done;
        }
        npub[l] = o + pl;
        c[l] = o + pl + self->ctx->npublen;
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

/* The views of items[0..3], each at least ``over`` bytes long; -1 with an exception naming the
   list position.  *got: how many views are held (to release). */
static inline int sealed_views(PyObject *const *items, Py_buffer *in, size_t over,
                               Py_ssize_t base, int *got)
{
    for (*got = 0; *got < 4; (*got)++) {
        if (get_buffer(items[*got], &in[*got], "sealed", 0) != 0) {
            set_error_index(base + *got);
            return -1;
        }
        if ((size_t)in[*got].len < over) {
            raise_invalid_tag(base + *got);
            (*got)++;
            return -1;
        }
    }
    return 0;
}

/* Decrypt the four sealed values in[0..3] into new bytes objects res[0..3] with one four-lane
   call; -1 with InvalidTag naming the first failing position. */
static inline int decrypt_four(ContextObject *self, const Py_buffer *in, size_t prefixlen,
                               const uint8_t *fullad, size_t fulladlen, Py_ssize_t base,
                               PyObject **res)
{
    uint8_t *m[4];
    const uint8_t *c[4], *mac[4], *npub[4];
    size_t clen[4];
    int ok[4];
    const size_t maclen = self->ctx->maclen, over = prefixlen + self->ctx->npublen + maclen;

    for (int l = 0; l < 4; l++) {
        const uint8_t *p = (const uint8_t *)in[l].buf;
        res[l] = PyBytes_FromStringAndSize(NULL, in[l].len - (Py_ssize_t)over);
        if (res[l] == NULL) {
            return -1;
        }
        m[l] = (uint8_t *)PyBytes_AS_STRING(res[l]);
        npub[l] = p + prefixlen;
        c[l] = p + prefixlen + self->ctx->npublen;
        clen[l] = (size_t)in[l].len - over;
        mac[l] = c[l] + clen[l];
    }
    if (self->ctx->batch->decrypt4(m, c, clen, mac, maclen, fullad, fulladlen, npub,
                                   self->ctx->key, ok) == 0) {
        return 0;
    }
    for (int l = 0; l < 4; l++) {
        if (!ok[l]) {
            raise_invalid_tag(base + l);
            break;
        }
    }
    return -1;
}

/* Open items[0..3] into res[0..3]: 0, 1 when their prefixes differ (not batchable: the caller
   goes on one by one), -1 with an exception naming the first failing position. */
static int open_four(ContextObject *self, size_t prefixlen, PyObject *const *items,
                     const uint8_t *ad, size_t adlen, Py_ssize_t base, PyObject **res)
{
    Py_buffer in[4];
    const size_t over = prefixlen + self->ctx->npublen + self->ctx->maclen;
    int got = 0, rc = -1;
    uint8_t buf[256];
    uint8_t *heap = NULL;
    const uint8_t *fullad;

    for (int l = 0; l < 4; l++) {
        res[l] = NULL;
    }
    if (sealed_views(items, in, over, base, &got) != 0) {
        goto done;
    }
    /* every value carries its own prefix, and the prefix is part of the AD: the four
       prefixes must be equal to share one AD (the caller groups by header) */
    for (int l = 1; l < 4; l++) {
        if (prefixlen && memcmp(in[l].buf, in[0].buf, prefixlen) != 0) {
            rc = 1;
            goto done;
        }
    }
    fullad = joined_ad(buf, sizeof buf, &heap, in[0].buf, prefixlen, ad, adlen);
    if (fullad != NULL) {
        rc = decrypt_four(self, in, prefixlen, fullad, prefixlen + adlen, base, res);
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

/* ---- lists ---- */

/* The values of items[0..n) four at a time into res, while the prefixes allow: the index
   reached (the rest go one by one), or -1 with an exception. */
static Py_ssize_t many_by_four(ContextObject *self, int seal, const Py_buffer *prefix,
                               size_t prefixlen, PyObject *const *items, Py_ssize_t n,
                               const Py_buffer *ad, PyObject *res)
{
    Py_ssize_t i = 0;
    uint8_t adbuf[256];
    uint8_t *heap = NULL;
    const uint8_t *fullad = NULL;

    if (self->ctx->batch == NULL || n < 4) {
        return 0;
    }
    if (seal) {
        fullad = joined_ad(adbuf, sizeof adbuf, &heap, prefix->buf, (size_t)prefix->len, ad->buf,
                           (size_t)ad->len);
        if (fullad == NULL) {
            return -1;
        }
    }
    for (; i + 4 <= n; i += 4) {
        PyObject *four[4];
        int rc = seal ? seal_four(self, prefix, items + i, fullad,
                                  (size_t)prefix->len + (size_t)ad->len, i, four)
                      : open_four(self, prefixlen, items + i, ad->buf, (size_t)ad->len, i, four);
        if (rc != 0) {
            i = rc > 0 ? i : -1; /* > 0: mixed prefixes, finish one by one */
            break;
        }
        for (int l = 0; l < 4; l++) {
            PyList_SET_ITEM(res, i + l, four[l]);
        }
    }
    PyMem_Free(heap);
    return i;
}

/* The values of items[i..n) one by one into res; -1 with an exception naming the position. */
static int many_by_one(ContextObject *self, int seal, const Py_buffer *prefix, size_t prefixlen,
                       PyObject *const *items, Py_ssize_t i, Py_ssize_t n, const Py_buffer *ad,
                       PyObject *res)
{
    for (; i < n; i++) {
        PyObject *r = seal ? seal_one(self, prefix, items[i], ad)
                           : open_one(self, prefixlen, items[i], ad, i);
        if (r == NULL) {
            if (seal) {
                set_error_index(i);
            }
            return -1;
        }
        PyList_SET_ITEM(res, i, r);
    }
    return 0;
}

/* seal_many / open_many: a list of the results, or NULL with an exception. */
static PyObject *many(ContextObject *self, int seal, const Py_buffer *prefix, size_t prefixlen,
                      PyObject *values, const Py_buffer *ad)
{
    /* a tuple of the items: the caller's list may change while the GIL is released */
    PyObject *seq = snapshot_items(values, "expected a sequence of bytes-like objects");
    PyObject *res;
    Py_ssize_t n, i;

    if (seq == NULL) {
        return NULL;
    }
    n = PyTuple_GET_SIZE(seq);
    res = PyList_New(n);
    if (res != NULL) {
        PyObject **items = tuple_items(seq);
        i = items == NULL ? -1 : many_by_four(self, seal, prefix, prefixlen, items, n, ad, res);
        if (i < 0 || many_by_one(self, seal, prefix, prefixlen, items, i, n, ad, res) != 0) {
            Py_CLEAR(res);
        }
        tuple_items_done(items);
    }
    Py_DECREF(seq);
    return res;
}

/* ---- the methods ---- */

static const char *const names_seal[] = {"prefix", "plaintext", "associated_data"};
static const char *const names_open[] = {"prefix_len", "sealed", "associated_data"};
static const char *const names_seal_many[] = {"prefix", "plaintexts", "associated_data"};

static PyObject *prefixed_call(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames, int seal, int is_many)
{
    REQUIRE_CTX(self);
    PyObject *a[3];
    Py_buffer prefix = {0}, ad;
    Py_ssize_t prefixlen = 0;
    PyObject *res;
    const char *fname = seal ? (is_many ? "seal_many" : "seal") : (is_many ? "open_many" : "open");

    if (parse_args(args, nargs, kwnames, 2, fname, a,
                   seal ? (is_many ? names_seal_many : names_seal) : names_open) != 0) {
        return NULL;
    }
    if (seal ? get_buffer(a[0], &prefix, "prefix", 0) != 0
             : get_size(a[0], "prefix_len", &prefixlen) != 0) {
        return NULL;
    }
    if (get_ad(a[2], &ad) != 0) {
        release(&prefix);
        return NULL;
    }
    if (is_many) {
        res = many(self, seal, &prefix, (size_t)prefixlen, a[1], &ad);
    } else {
        res = seal ? seal_one(self, &prefix, a[1], &ad)
                   : open_one(self, (size_t)prefixlen, a[1], &ad, -1);
    }
    release(&ad);
    release(&prefix);
    return res;
}

PyObject *Context_seal(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    return prefixed_call(self, args, nargs, kwnames, 1, 0);
}

PyObject *Context_open(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    return prefixed_call(self, args, nargs, kwnames, 0, 0);
}

PyObject *Context_seal_many(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    return prefixed_call(self, args, nargs, kwnames, 1, 1);
}

PyObject *Context_open_many(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    return prefixed_call(self, args, nargs, kwnames, 0, 1);
}
