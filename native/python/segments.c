/*
 * Segmented streams: seal_segments_into / open_segments_into, one native call (without the
 * GIL) for a whole buffer of stream segments.  Segment i uses nonce nonce_prefix (nonce size - 5 bytes) ||
 * BE32(i) || final flag; each sealed segment is ciphertext || tag.
 */
#include "speedups.h"

/* The scalar arguments and the views of one call. */
typedef struct {
    Py_ssize_t seg, first;
    int final;
    Py_buffer out, data, prefix, ad;
} SegmentCall;

static const char *const names_seg[] = {"out",         "data",  "segment_size", "nonce_prefix",
                                        "first_index", "final", "associated_data"};

/* segment_size, first_index and final; -1 with an exception. */
static int get_scalars(PyObject *const *a, SegmentCall *s)
{
    if (get_size(a[2], "segment_size", &s->seg) != 0 ||
        get_size(a[4], "first_index", &s->first) != 0) {
        return -1;
    }
    s->final = PyObject_IsTrue(a[5]);
    if (s->final < 0) {
        return -1;
    }
    if (s->seg <= 0 || s->first < 0 || (uint64_t)s->first > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError,
                        "segment_size must be > 0 and first_index in 0 .. 2**32 - 1");
        return -1;
    }
    return 0;
}

/* out, data, nonce_prefix (checked for length) and AD; -1 with an exception and none held. */
static int get_views(PyObject *const *a, SegmentCall *s, size_t npublen)
{
    if (get_buffer(a[0], &s->out, "out", 1) != 0) {
        return -1;
    }
    if (get_buffer(a[1], &s->data, "data", 0) != 0) {
        goto out_out;
    }
    if (get_buffer(a[3], &s->prefix, "nonce_prefix", 0) != 0) {
        goto out_data;
    }
    if ((size_t)s->prefix.len != npublen - 5) {
        PyErr_Format(PyExc_ValueError, "nonce_prefix must be %zu bytes, got %zd", npublen - 5,
                     s->prefix.len);
        goto out_prefix;
    }
    if (get_ad(a[6], &s->ad) == 0) {
        return 0;
    }
out_prefix:
    PyBuffer_Release(&s->prefix);
out_data:
    PyBuffer_Release(&s->data);
out_out:
    PyBuffer_Release(&s->out);
    return -1;
}

static void release_views(SegmentCall *s)
{
    release(&s->ad);
    PyBuffer_Release(&s->prefix);
    PyBuffer_Release(&s->data);
    PyBuffer_Release(&s->out);
}

/* The bytes the call writes; -1 with ValueError when out cannot take them, a non-final buffer
   to seal is not whole segments, or out overlaps an input. */
static Py_ssize_t output_len(const SegmentCall *s, size_t maclen, int seal)
{
    /* no in-place: segment i is written at a different offset than it is read from */
    static const char *const names[] = {"data", "nonce_prefix", "associated_data"};
    const Py_buffer *ins[3] = {&s->data, &s->prefix, &s->ad};
    const size_t len = (size_t)s->data.len;
    size_t nseg, need;

    if (seal) {
        if (!s->final && s->data.len % s->seg != 0) {
            PyErr_SetString(PyExc_ValueError, "a non-final buffer must hold whole segments");
            return -1;
        }
        nseg = len / (size_t)s->seg + (s->final ? 1 : 0);
        need = len + nseg * maclen;
    } else {
        nseg = len / ((size_t)s->seg + maclen) + (s->final ? 1 : 0);
        need = len >= nseg * maclen ? len - nseg * maclen : 0;
    }
    if ((size_t)s->out.len < need) {
        PyErr_Format(PyExc_ValueError, "out must be at least %zu bytes, got %zd", need,
                     s->out.len);
        return -1;
    }
    if (check_disjoint("out", s->out.buf, (Py_ssize_t)need, ins, names, 3, 0) != 0) {
        return -1;
    }
    return (Py_ssize_t)need;
}

/* The kernel's segment loop, without the GIL (always bulk work); *bad: the failing segment. */
static int run_segments(const sealstore_ctx *ctx, const SegmentCall *s, int seal, size_t *bad)
{
    PyThreadState *ts = PyEval_SaveThread();
    int rc = seal ? sealstore_seal_segments(ctx, s->out.buf, s->data.buf, (size_t)s->data.len,
                                            (size_t)s->seg, s->prefix.buf, (uint32_t)s->first,
                                            s->final, s->ad.buf, (size_t)s->ad.len)
                  : sealstore_open_segments(ctx, s->out.buf, s->data.buf, (size_t)s->data.len,
                                            (size_t)s->seg, s->prefix.buf, (uint32_t)s->first,
                                            s->final, s->ad.buf, (size_t)s->ad.len, bad);
    nogil_end(ts);
    return rc;
}

/* The exception for the kernel's return code rc != 0. */
static void raise_segments_error(int rc, int seal, size_t bad, Py_ssize_t first)
{
    if (rc == -1 && !seal) {
        raise_invalid_tag((Py_ssize_t)bad);
    } else if (rc == -3) {
        PyErr_SetString(PyExc_ValueError, "segment index would pass 2**32 - 1");
    } else if (seal) {
        PyErr_SetString(PyExc_ValueError,
                        "data cannot be sealed as segments: an empty buffer must be final, and "
                        "segment_size must be positive");
    } else {
        /* framing: the buffer cannot be a sequence of sealed segments (truncated/extended) */
        raise_invalid_tag(first);
    }
}

static PyObject *segments_call(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames, int seal)
{
    REQUIRE_CTX(self);
    PyObject *a[7];
    SegmentCall s;
    PyObject *res = NULL;
    size_t bad = 0;
    Py_ssize_t need;
    int rc;

    if (parse_args(args, nargs, kwnames, 6, seal ? "seal_segments_into" : "open_segments_into", a,
                   names_seg) != 0 ||
        get_scalars(a, &s) != 0 || get_views(a, &s, self->ctx->npublen) != 0) {
        return NULL;
    }
    need = output_len(&s, self->ctx->maclen, seal);
    if (need >= 0) {
        rc = run_segments(self->ctx, &s, seal, &bad);
        if (rc == 0) {
            res = PyLong_FromSsize_t(need);
        } else {
            raise_segments_error(rc, seal, bad, s.first);
        }
    }
    release_views(&s);
    return res;
}

PyObject *Context_seal_segments(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    return segments_call(self, args, nargs, kwnames, 1);
}

PyObject *Context_open_segments(ContextObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    return segments_call(self, args, nargs, kwnames, 0);
}
