/*
 * map_columns(rows, plan): a chunk of result rows with some columns passed through functions.
 *
 * A database driver returns a list of tuples; an encrypted column's value in each is a sealed
 * buffer that must be opened.  Opening them chunk by chunk as the rows arrive, instead of all
 * at once after the whole result was fetched, keeps the sealed buffers hot in the cache and
 * lets their memory serve the plaintexts of the next chunk (fetch-all-then-process holds every
 * ciphertext and every plaintext at once: for large results the process faults in fresh pages
 * for all of them).  This is the loop, in C: ``plan`` is a tuple of (index, callable) pairs
 * with strictly increasing indexes; each row (a tuple or any sequence) becomes a new tuple in
 * which ``row[index]`` is replaced by ``callable(row[index])``.  An exception from a callable
 * propagates and no rows are returned.
 *
 * A callable is Python code: it may change the rows list or a row (a list) while the loop
 * runs.  The loop works on snapshots (tuples of the items, taken before the first call; a tuple
 * is used as it is), so such changes are not seen and cannot free what the loop reads.
 */
#include "speedups.h"

typedef struct {
    Py_ssize_t n, last;
    Py_ssize_t *index;
    PyObject **fn; /* borrowed from the plan's (immutable) pairs, which the caller holds */
} Plan;

static int plan_parse(PyObject *plan, Plan *p)
{
    Py_ssize_t k;

    if (!PyTuple_Check(plan)) {
        PyErr_SetString(PyExc_TypeError, "plan must be a tuple of (index, callable) pairs");
        return -1;
    }
    p->n = PyTuple_GET_SIZE(plan);
    p->last = -1;
    p->index = PyMem_New(Py_ssize_t, p->n ? p->n : 1);
    p->fn = PyMem_New(PyObject *, p->n ? p->n : 1);
    if (p->index == NULL || p->fn == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (k = 0; k < p->n; k++) {
        PyObject *pair = PyTuple_GET_ITEM(plan, k);
        Py_ssize_t i;

        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyCallable_Check(PyTuple_GET_ITEM(pair, 1))) {
            PyErr_SetString(PyExc_TypeError, "plan must be a tuple of (index, callable) pairs");
            return -1;
        }
        i = PyNumber_AsSsize_t(PyTuple_GET_ITEM(pair, 0), PyExc_OverflowError);
        if (i == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (i <= p->last) {
            PyErr_SetString(PyExc_ValueError, "plan indexes must be >= 0 and strictly increasing");
            return -1;
        }
        p->index[k] = p->last = i;
        p->fn[k] = PyTuple_GET_ITEM(pair, 1);
    }
    return 0;
}

/* The new tuple for one row, or NULL with an exception. */
static PyObject *map_row(PyObject *row, const Plan *p)
{
    PyObject *seq, *out = NULL;
    Py_ssize_t width, i, k;

    seq = snapshot_items(row, "each row must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    width = PyTuple_GET_SIZE(seq);
    if (p->last >= width) {
        PyErr_Format(PyExc_IndexError, "a row of %zd columns has no column %zd", width, p->last);
        goto done;
    }
    out = PyTuple_New(width);
    if (out == NULL) {
        goto done;
    }
    for (i = 0, k = 0; i < width; i++) {
        PyObject *v = PyTuple_GET_ITEM(seq, i);

        if (k < p->n && p->index[k] == i) {
            v = PyObject_CallOneArg(p->fn[k++], v);
            if (v == NULL) {
                Py_CLEAR(out);
                goto done;
            }
        } else {
            Py_INCREF(v);
        }
        PyTuple_SET_ITEM(out, i, v);
    }
done:
    Py_DECREF(seq);
    return out;
}

static PyObject *map_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *rows, *out = NULL;
    Plan p = {0, -1, NULL, NULL};
    Py_ssize_t r, count;

    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "map_columns(rows, plan) takes two arguments");
        return NULL;
    }
    if (plan_parse(args[1], &p) < 0) {
        goto done;
    }
    rows = snapshot_items(args[0], "rows must be a sequence");
    if (rows == NULL) {
        goto done;
    }
    count = PyTuple_GET_SIZE(rows);
    out = PyList_New(count);
    for (r = 0; out != NULL && r < count; r++) {
        PyObject *row = map_row(PyTuple_GET_ITEM(rows, r), &p);

        if (row == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, r, row);
    }
    Py_DECREF(rows);
done:
    PyMem_Free(p.index);
    PyMem_Free(p.fn);
    return out;
}

static PyMethodDef rowmap_functions[] = {
    {"map_columns", (PyCFunction)(void (*)(void))map_columns, METH_FASTCALL,
     "map_columns($module, rows, plan, /)\n--\n\n"
     "A list of tuples: each row with row[i] replaced by f(row[i]) for "
     "the (i, f) pairs of plan (strictly increasing indexes)."},
    {NULL, NULL, 0, NULL},
};

int rowmap_add_functions(PyObject *module)
{
    return PyModule_AddFunctions(module, rowmap_functions);
}
