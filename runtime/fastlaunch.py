"""The launch fast path in C: `mod.k[grid](*args)` keyed, packed and launched without Python bytecode in between.

A repeated launch costs what its host work costs, so the work that runs on every launch is a small CPython
extension, written here and compiled on first use with the system C compiler (as Triton builds its own launcher):

    launcher = kernel[grid]       # a Launcher, cached per grid by Kernel.__getitem__
    launcher(x, y, out, n)        # C: key the arguments, find the plan, pack, cuLaunchKernel

The Launcher computes the plan key from the arguments the way runtime/kernel.py's `_signature` does (per tensor:
dtype, shape, strides, 16-byte alignment of data_ptr, device; which tensors overlap; per int: divisibility by 16;
per float or bool: its type; keyword arguments by type and value) and looks it up in the kernel's C plans for its
grid (kept per grid: a plan may rely on its grid, tle/abi.py's grid facts). It reads tensor attributes through torch.Tensor's own
descriptors, called directly; with one visible GPU the device is not asked.
A C plan is the CUfunction with its block size, the CUDA context its module was loaded in, and for each kernel
parameter where its value comes from (a positional argument, converted by its kind, or a value fixed for the plan:
sizes, strides).
A hit writes the parameters into a buffer on the C stack and calls cuLaunchKernel on torch's current stream of the
plan's device, with the GIL released.

Everything else returns to the Python path (`Kernel._launch_from_c`), which keeps every check and message: a
first launch, a grid that is no tuple of 1 to 3 ints, arguments the C key does not describe (tensor subclasses
other than nn.Parameter, CPU tensors, other objects, keyword tensors), a value that does not fit its parameter, a
CUDA context other than the plan's (another device is current), and kernels the C plan does not cover (the
interpreter, scratch buffers, clusters and other cuLaunchKernelEx attributes, f16/bf16 constants). After a
successful launch the Python path stores the C plan under the key the Launcher computed, so the next identical
launch stays in C.

The extension needs no CUDA headers or libraries at build time: it declares the two driver functions it calls
and finds them with dlopen("libcuda.so.1") when the first plan is made. It is cached in tle's cache directory
(runtime/cache.py; a temporary directory with TLE_CACHE=0) under a hash of this source, the Python version and
the compiler. Without a C compiler or Python's headers, or with TLE_FAST_LAUNCH=0, launches take the Python path
(TLE_DEBUG=1 says why).
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from .. import debug

# Parameter kinds, as the C code numbers them (binary.params strings -> code).
KINDS = {"ptr": 0, "i1": 1, "i8": 2, "i16": 3, "i32": 4, "i64": 5, "f16": 6, "bf16": 7, "f32": 8, "f64": 9}
MAX_SLOTS = 256

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

/* The CUDA driver API, declared here: no CUDA headers are needed to build this file. */
typedef int CUresult;
typedef void *CUfunction;
typedef void *CUstream;
typedef void *CUcontext;
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
typedef CUresult (*ctx_fn)(CUcontext *);
static launch_fn cu_launch_kernel = NULL;
static ctx_fn cu_ctx_get_current = NULL;

#define MAX_SLOTS 256
#define MAX_ARGS 128
#define MAX_WORDS 2048

enum { K_PTR, K_I1, K_I8, K_I16, K_I32, K_I64, K_F16, K_BF16, K_F32, K_F64, K_COUNT };
enum { A_TENSOR = 1, A_INT = 2, A_BOOL = 3, A_FLOAT = 4, A_OVERLAP = 5 };

static PyTypeObject *tensor_type = NULL, *parameter_type = NULL, *dtype_type = NULL;
static PyObject *s_is_cuda, *s_dtype, *s_shape, *s_stride, *s_data_ptr, *s_get_device;
/* The same attributes as torch.Tensor's descriptors, called directly (no attribute lookup); NULL: by name. */
static PyObject *d_is_cuda, *d_dtype, *d_shape, *d_stride, *d_data_ptr, *d_get_device;
static int single_device = 0;  /* one CUDA device visible: every CUDA tensor is on device 0 */

static PyObject *attr(PyObject *o, PyObject *descr, PyObject *name)
{
    if (descr != NULL) return Py_TYPE(descr)->tp_descr_get(descr, o, (PyObject *)Py_TYPE(o));
    return PyObject_GetAttr(o, name);
}

static PyObject *method(PyObject *o, PyObject *descr, PyObject *name)
{
    if (descr != NULL) return PyObject_Vectorcall(descr, &o, 1, NULL);
    return PyObject_CallMethodNoArgs(o, name);
}

/* What a launch in test mode would have passed to cuLaunchKernel (CPU tests of the whole path). */
static struct {
    long calls;
    unsigned grid[3], block[3], shared;
    unsigned long long stream;
    int nparams;
    uint64_t params[MAX_SLOTS];
} recorded;
static uintptr_t test_context = 0;
static CUresult test_result = 0;

/* ---- keys ------------------------------------------------------------------------------------------------- */

typedef struct {
    int tag;
    union { uint64_t ptr; long long i; double d; } v;
    uint64_t end;  /* a tensor's: one past the last byte it spans (v.ptr for an empty one) */
} ArgValue;

/* Element sizes of the dtypes seen, by address (torch's dtypes live as long as torch). -1: none. */
static struct { PyObject *dtype; long long size; } itemsizes[64];
static int n_itemsizes = 0;

static long long itemsize_of(PyObject *dtype)
{
    for (int i = 0; i < n_itemsizes; i++)
        if (itemsizes[i].dtype == dtype) return itemsizes[i].size;
    PyObject *o = PyObject_GetAttrString(dtype, "itemsize");
    if (o == NULL) { PyErr_Clear(); return -1; }
    long long size = PyLong_AsLongLong(o);
    Py_DECREF(o);
    if (size <= 0 || PyErr_Occurred()) { PyErr_Clear(); return -1; }
    if (n_itemsizes < 64) { itemsizes[n_itemsizes].dtype = dtype; itemsizes[n_itemsizes++].size = size; }
    return size;
}

/* Append one positional argument to the key words; keep the value packing needs. 1: done, 0: not described. */
static int key_arg(PyObject *a, int allow_cpu, uint64_t *w, int *n, ArgValue *out)
{
    PyTypeObject *t = Py_TYPE(a);
    if (t == tensor_type || t == parameter_type) {
        PyObject *o = attr(a, d_is_cuda, s_is_cuda);
        if (o == NULL) goto error;
        int cuda = (o == Py_True);
        Py_DECREF(o);
        if (!cuda && !allow_cpu) return 0;
        PyObject *dtype = attr(a, d_dtype, s_dtype);
        if (dtype == NULL) goto error;
        Py_DECREF(dtype); /* torch's dtypes live as long as torch: the address names the dtype */
        PyObject *shape = attr(a, d_shape, s_shape);
        if (shape == NULL) goto error;
        PyObject *stride = method(a, d_stride, s_stride);
        if (stride == NULL) { Py_DECREF(shape); goto error; }
        Py_ssize_t nd = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
        if (nd < 0 || !PyTuple_Check(stride) || PyTuple_GET_SIZE(stride) != nd || *n + 3 + 2 * nd > MAX_WORDS) {
            Py_DECREF(shape); Py_DECREF(stride);
            return 0;
        }
        int at = *n;
        w[at + 1] = (uint64_t)(uintptr_t)dtype;
        long long size = itemsize_of(dtype);
        if (size < 0) { Py_DECREF(shape); Py_DECREF(stride); return 0; }
        unsigned long long last = 0;  /* the offset of the last element, in elements */
        int empty = 0;
        for (Py_ssize_t i = 0; i < nd; i++) {
            long long s = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
            long long st = PyLong_AsLongLong(PyTuple_GET_ITEM(stride, i));
            w[at + 3 + i] = (uint64_t)s;
            w[at + 3 + nd + i] = (uint64_t)st;
            if (s <= 0) empty = 1;
            else last += (unsigned long long)(s - 1) * (unsigned long long)(st < 0 ? -st : st);
        }
        Py_DECREF(shape); Py_DECREF(stride);
        if (PyErr_Occurred()) goto error;
        PyObject *p = method(a, d_data_ptr, s_data_ptr);
        if (p == NULL) goto error;
        unsigned long long ptr = PyLong_AsUnsignedLongLong(p);
        Py_DECREF(p);
        if (PyErr_Occurred()) goto error;
        long long device = -1;
        if (cuda && single_device) {
            device = 0;
        } else if (cuda) {
            PyObject *d = method(a, d_get_device, s_get_device);
            if (d == NULL) goto error;
            device = PyLong_AsLongLong(d);
            Py_DECREF(d);
            if (PyErr_Occurred()) goto error;
        }
        /* tag, rank, alignment, device in one word; then dtype, device again for clarity, sizes, strides */
        w[at] = (uint64_t)A_TENSOR | ((uint64_t)nd << 8) | ((uint64_t)(ptr % 16 == 0) << 16)
                | ((uint64_t)(device + 1) << 24);
        w[at + 2] = (uint64_t)cuda;
        *n = at + 3 + 2 * (int)nd;
        out->tag = A_TENSOR;
        out->v.ptr = ptr;
        out->end = empty || ptr == 0 ? ptr : ptr + (last + 1) * (unsigned long long)size;
        return 1;
    }
    if (*n + 1 > MAX_WORDS) return 0;
    if (PyLong_CheckExact(a)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(a, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
        w[(*n)++] = (uint64_t)A_INT | ((uint64_t)(v % 16 == 0) << 8);
        out->tag = A_INT;
        out->v.i = v;
        return 1;
    }
    if (PyBool_Check(a)) {
        w[(*n)++] = A_BOOL;
        out->tag = A_BOOL;
        out->v.i = (a == Py_True);
        return 1;
    }
    if (PyFloat_CheckExact(a)) {
        w[(*n)++] = A_FLOAT;
        out->tag = A_FLOAT;
        out->v.d = PyFloat_AS_DOUBLE(a);
        return 1;
    }
    return 0;
error: /* whatever failed here fails the same way on the Python path, which reports it */
    PyErr_Clear();
    return 0;
}

/* The plan key of a call: bytes for the positional arguments; with keyword arguments a tuple
   (bytes, name, type, value, ...). NULL without an error set: the call is not described by a key. */
static PyObject *make_key(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject *const *kwvalues,
                          int allow_cpu, ArgValue *values)
{
    uint64_t words[MAX_WORDS];
    int n = 0;
    if (nargs > MAX_ARGS) return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (!key_arg(args[i], allow_cpu, words, &n, &values[i])) return NULL;
    /* Tensors whose bytes overlap (an in-place launch): a word per pair, as runtime/kernel.py's _overlapping, so
       such a launch gets a plan of its own (tle/abi.py aliases); none where nothing overlaps. */
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (values[i].tag != A_TENSOR || values[i].end == values[i].v.ptr) continue;
        for (Py_ssize_t j = i + 1; j < nargs; j++) {
            if (values[j].tag != A_TENSOR || values[j].end == values[j].v.ptr) continue;
            if (values[i].v.ptr < values[j].end && values[j].v.ptr < values[i].end) {
                if (n + 1 > MAX_WORDS) return NULL;
                words[n++] = (uint64_t)A_OVERLAP | ((uint64_t)i << 8) | ((uint64_t)j << 24);
            }
        }
    }
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)words, (Py_ssize_t)n * 8);
    if (bytes == NULL) { PyErr_Clear(); return NULL; }
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nk == 0) return bytes;
    PyObject *key = PyTuple_New(1 + 3 * nk);
    if (key == NULL) { PyErr_Clear(); Py_DECREF(bytes); return NULL; }
    PyTuple_SET_ITEM(key, 0, bytes);
    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject *v = kwvalues[i];
        PyTypeObject *t = Py_TYPE(v);
        if (!(PyLong_CheckExact(v) || PyBool_Check(v) || PyFloat_CheckExact(v) || PyUnicode_CheckExact(v)
              || v == Py_None || t == dtype_type)) {
            Py_DECREF(key);
            return NULL;
        }
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        Py_INCREF(name); Py_INCREF(t); Py_INCREF(v);
        PyTuple_SET_ITEM(key, 1 + 3 * i, name);
        PyTuple_SET_ITEM(key, 2 + 3 * i, (PyObject *)t);
        PyTuple_SET_ITEM(key, 3 + 3 * i, v);
    }
    return key;
}

/* ---- plans ------------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    CUfunction function;
    CUcontext context;
    unsigned block[3], shared;
    unsigned grid[3];     /* the grid to launch, where the plan fixes one (a persistent kernel's one wave); else 0s */
    int nargs;            /* positional arguments the plan takes */
    int nslots;
    signed char kind[MAX_SLOTS];
    short source[MAX_SLOTS];  /* positional index, or -1: fixed[i] */
    uint64_t fixed[MAX_SLOTS];
    PyObject *device;     /* int: the argument of stream() */
    PyObject *stream;     /* device -> torch's current raw stream */
    PyObject *on_error;   /* CUresult -> raises */
    PyObject *keep;       /* kept alive with the plan (the LoadedKernel owning the module) */
    int test;             /* record instead of launching */
    int disabled;         /* the module was unloaded: every launch goes back to the Python path */
    PyObject *weakrefs;
} Plan;

static int plan_traverse(Plan *self, visitproc visit, void *arg)
{
    Py_VISIT(self->device); Py_VISIT(self->stream); Py_VISIT(self->on_error); Py_VISIT(self->keep);
    return 0;
}

static int plan_clear(Plan *self)
{
    Py_CLEAR(self->device); Py_CLEAR(self->stream); Py_CLEAR(self->on_error); Py_CLEAR(self->keep);
    return 0;
}

static void plan_dealloc(Plan *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL) PyObject_ClearWeakRefs((PyObject *)self);
    plan_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"function", "context", "block", "shared", "device", "nargs", "kinds", "sources",
                            "fixed", "stream", "on_error", "keep", "test", "grid", NULL};
    unsigned long long function, context;
    unsigned bx, by, bz, shared, gx = 0, gy = 0, gz = 0;
    int device, nargs, test = 0;
    PyObject *kinds, *sources, *fixed, *stream, *on_error, *keep;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KK(III)IiiOOOOOO|p(III)", names, &function, &context, &bx, &by,
                                     &bz, &shared, &device, &nargs, &kinds, &sources, &fixed, &stream, &on_error,
                                     &keep, &test, &gx, &gy, &gz))
        return NULL;
    if (!PyList_Check(kinds) || !PyList_Check(sources) || !PyList_Check(fixed)
        || PyList_GET_SIZE(sources) != PyList_GET_SIZE(kinds) || PyList_GET_SIZE(fixed) != PyList_GET_SIZE(kinds)) {
        PyErr_SetString(PyExc_ValueError, "kinds, sources and fixed must be lists of one length");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(kinds);
    if (n > MAX_SLOTS || nargs < 0 || nargs > MAX_ARGS) {
        PyErr_SetString(PyExc_ValueError, "too many parameters for the C launcher");
        return NULL;
    }
    if (!PyCallable_Check(stream) || !PyCallable_Check(on_error)) {
        PyErr_SetString(PyExc_TypeError, "stream and on_error must be callable");
        return NULL;
    }
    Plan *self = (Plan *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->function = (CUfunction)(uintptr_t)function;
    self->context = (CUcontext)(uintptr_t)context;
    self->block[0] = bx; self->block[1] = by; self->block[2] = bz;
    self->grid[0] = gx; self->grid[1] = gy; self->grid[2] = gz;
    self->shared = shared;
    self->nargs = nargs;
    self->nslots = (int)n;
    self->test = test;
    for (Py_ssize_t i = 0; i < n; i++) {
        long k = PyLong_AsLong(PyList_GET_ITEM(kinds, i));
        long s = PyLong_AsLong(PyList_GET_ITEM(sources, i));
        unsigned long long f = PyLong_AsUnsignedLongLongMask(PyList_GET_ITEM(fixed, i));
        if (PyErr_Occurred()) { Py_DECREF(self); return NULL; }
        if (k < 0 || k >= K_COUNT || s < -1 || s >= nargs) {
            PyErr_Format(PyExc_ValueError, "parameter %zd: bad kind %ld or source %ld", i, k, s);
            Py_DECREF(self);
            return NULL;
        }
        self->kind[i] = (signed char)k;
        self->source[i] = (short)s;
        self->fixed[i] = f;
    }
    self->device = PyLong_FromLong(device);
    if (self->device == NULL) { Py_DECREF(self); return NULL; }
    Py_INCREF(stream); self->stream = stream;
    Py_INCREF(on_error); self->on_error = on_error;
    Py_INCREF(keep); self->keep = keep;
    return (PyObject *)self;
}

static int double_of(const ArgValue *a, double *d)
{
    if (a->tag == A_FLOAT) { *d = a->v.d; return 1; }
    if (a->tag == A_INT) { *d = (double)a->v.i; return 1; }
    return 0;
}

/* Write the parameters of one launch into vals. 1: done; 0: a value the Python path must convert or reject. */
static int pack(const Plan *plan, const ArgValue *values, Py_ssize_t nargs, uint64_t *vals)
{
    if (nargs != plan->nargs) return 0;
    for (int i = 0; i < plan->nslots; i++) {
        int s = plan->source[i];
        if (s < 0) { vals[i] = plan->fixed[i]; continue; }
        const ArgValue *a = &values[s];
        double d;
        switch (plan->kind[i]) {
        case K_PTR:
            if (a->tag != A_TENSOR) return 0;
            vals[i] = a->v.ptr;
            break;
        case K_I1:
            if (a->tag != A_BOOL) return 0;
            vals[i] = (uint64_t)a->v.i;
            break;
        case K_I8: case K_I16: case K_I32: case K_I64: {
            if (a->tag != A_INT) return 0;
            int bits = plan->kind[i] == K_I8 ? 8 : plan->kind[i] == K_I16 ? 16 : plan->kind[i] == K_I32 ? 32 : 64;
            if (bits < 64 && (a->v.i < -(1LL << (bits - 1)) || a->v.i >= (1LL << (bits - 1)))) return 0;
            vals[i] = bits < 64 ? (uint64_t)a->v.i & ((1ULL << bits) - 1) : (uint64_t)a->v.i;
            break;
        }
        case K_F32: {
            if (!double_of(a, &d)) return 0;
            float f = (float)d;
            if (f - f != 0 && d - d == 0) return 0;  /* a finite value that rounds to inf: the Python path says so */
            vals[i] = 0;
            memcpy(&vals[i], &f, sizeof f);
            break;
        }
        case K_F64:
            if (!double_of(a, &d)) return 0;
            memcpy(&vals[i], &d, sizeof d);
            break;
        case K_F16: {
            unsigned char b[2];
            if (!double_of(a, &d)) return 0;
#if PY_VERSION_HEX >= 0x030B0000
            if (PyFloat_Pack2(d, (char *)b, 1) < 0) { PyErr_Clear(); return 0; }
#else
            if (_PyFloat_Pack2(d, b, 1) < 0) { PyErr_Clear(); return 0; }
#endif
            vals[i] = (uint64_t)b[0] | ((uint64_t)b[1] << 8);
            break;
        }
        case K_BF16: {  /* as launch.py's _half_bits: f32 first, then round to nearest even, NaN stays NaN */
            unsigned char b[4];
            if (!double_of(a, &d)) return 0;
#if PY_VERSION_HEX >= 0x030B0000
            if (PyFloat_Pack4(d, (char *)b, 1) < 0) { PyErr_Clear(); return 0; }
#else
            if (_PyFloat_Pack4(d, b, 1) < 0) { PyErr_Clear(); return 0; }
#endif
            uint32_t bits = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
            uint32_t h;
            if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu))
                h = (bits >> 16) | 0x40;
            else
                h = (uint32_t)((((uint64_t)bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF);
            vals[i] = h;
            break;
        }
        default:
            return 0;
        }
    }
    return 1;
}

static PyObject *plan_disable(Plan *self, PyObject *noargs)
{
    self->disabled = 1;
    Py_RETURN_NONE;
}

static PyMethodDef plan_methods[] = {
    {"disable", (PyCFunction)plan_disable, METH_NOARGS, "send every later launch of this plan to the Python path"},
    {NULL},
};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tle_launch.Plan",
    .tp_basicsize = sizeof(Plan),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A launch plan the C launcher runs: a CUfunction, its block, and where each parameter comes from.",
    .tp_new = plan_new,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_traverse = (traverseproc)plan_traverse,
    .tp_clear = (inquiry)plan_clear,
    .tp_methods = plan_methods,
    .tp_weaklistoffset = offsetof(Plan, weakrefs),
};

/* ---- launchers -------------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *grid;      /* as given */
    PyObject *plans;     /* dict: key -> Plan (the kernel's) */
    PyObject *fallback;  /* fallback(grid, key or None, args, kwargs) */
    unsigned g[3];
    int fast_grid;       /* the grid is a tuple of 1 to 3 ints in [0, 2**31) */
    int allow_cpu;       /* tests: key CPU tensors as if they were on a device */
} Launcher;

static PyObject *call_fallback(Launcher *self, PyObject *key, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    PyObject *tuple = PyTuple_New(nargs);
    PyObject *kwargs = PyDict_New();
    PyObject *result = NULL;
    if (tuple == NULL || kwargs == NULL) goto done;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(tuple, i, args[i]);
    }
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nk; i++)
        if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) goto done;
    PyObject *call[4] = {self->grid, key ? key : Py_None, tuple, kwargs};
    result = PyObject_Vectorcall(self->fallback, call, 4, NULL);
done:
    Py_XDECREF(tuple);
    Py_XDECREF(kwargs);
    return result;
}

static PyObject *launcher_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Launcher *self = (Launcher *)obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!self->fast_grid) return call_fallback(self, NULL, args, nargs, kwnames);
    ArgValue values[MAX_ARGS];
    PyObject *key = make_key(args, nargs, kwnames, args + nargs, self->allow_cpu, values);
    if (key == NULL) return call_fallback(self, NULL, args, nargs, kwnames);
    PyObject *found = PyDict_GetItemWithError(self->plans, key);
    if (found == NULL || Py_TYPE(found) != &PlanType) {
        PyObject *result = PyErr_Occurred() ? NULL : call_fallback(self, key, args, nargs, kwnames);
        Py_DECREF(key);
        return result;
    }
    Py_DECREF(key);
    Plan *plan = (Plan *)found;
    uint64_t vals[MAX_SLOTS];
    void *argv[MAX_SLOTS];
    if (plan->disabled || !pack(plan, values, nargs, vals)) return call_fallback(self, NULL, args, nargs, kwnames);
    CUcontext current = NULL;
    if (plan->test)
        current = (CUcontext)test_context;
    else if (cu_launch_kernel == NULL || cu_ctx_get_current(&current) != 0)
        return call_fallback(self, NULL, args, nargs, kwnames);
    if (current != plan->context)  /* another device is current: the Python path switches to the plan's */
        return call_fallback(self, NULL, args, nargs, kwnames);
    if ((unsigned long long)self->g[0] * self->g[1] * self->g[2] == 0) Py_RETURN_NONE;
    const unsigned *g = plan->grid[0] ? plan->grid : self->g;  /* a persistent kernel's plan launches one wave */
    Py_INCREF(plan);  /* the stream query runs Python code, which could drop the plan from its table */
    PyObject *s = PyObject_CallOneArg(plan->stream, plan->device);
    if (s == NULL) { Py_DECREF(plan); return NULL; }
    unsigned long long stream = PyLong_AsUnsignedLongLong(s);
    Py_DECREF(s);
    if (stream == (unsigned long long)-1 && PyErr_Occurred()) { Py_DECREF(plan); return NULL; }
    for (int i = 0; i < plan->nslots; i++) argv[i] = &vals[i];
    CUresult err = 0;
    if (plan->test) {
        recorded.calls++;
        memcpy(recorded.grid, g, sizeof recorded.grid);
        memcpy(recorded.block, plan->block, sizeof recorded.block);
        recorded.shared = plan->shared;
        recorded.stream = stream;
        recorded.nparams = plan->nslots;
        memcpy(recorded.params, vals, sizeof(uint64_t) * plan->nslots);
        err = test_result;
    } else {
        CUfunction function = plan->function;
        unsigned bx = plan->block[0], by = plan->block[1], bz = plan->block[2], shared = plan->shared;
        Py_BEGIN_ALLOW_THREADS
        err = cu_launch_kernel(function, g[0], g[1], g[2], bx, by, bz, shared,
                               (CUstream)(uintptr_t)stream, argv, NULL);
        Py_END_ALLOW_THREADS
    }
    if (err != 0) {
        PyObject *r = PyObject_CallFunction(plan->on_error, "i", err);
        Py_DECREF(plan);
        if (r == NULL) return NULL;
        Py_DECREF(r);
        PyErr_Format(PyExc_RuntimeError, "cuLaunchKernel failed: %d", err);
        return NULL;
    }
    Py_DECREF(plan);
    Py_RETURN_NONE;
}

static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"grid", "plans", "fallback", "allow_cpu", NULL};
    PyObject *grid, *plans, *fallback;
    int allow_cpu = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!O|p", names, &grid, &PyDict_Type, &plans, &fallback, &allow_cpu))
        return NULL;
    Launcher *self = (Launcher *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = launcher_vectorcall;
    Py_INCREF(grid); self->grid = grid;
    Py_INCREF(plans); self->plans = plans;
    Py_INCREF(fallback); self->fallback = fallback;
    self->allow_cpu = allow_cpu;
    self->g[0] = self->g[1] = self->g[2] = 1;
    self->fast_grid = 0;
    if (PyTuple_CheckExact(grid) && PyTuple_GET_SIZE(grid) >= 1 && PyTuple_GET_SIZE(grid) <= 3) {
        self->fast_grid = 1;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(grid); i++) {
            PyObject *g = PyTuple_GET_ITEM(grid, i);
            int overflow = 0;
            long long v = PyLong_CheckExact(g) ? PyLong_AsLongLongAndOverflow(g, &overflow) : -1;
            if (overflow || v < 0 || v > 0x7FFFFFFFLL) { PyErr_Clear(); self->fast_grid = 0; break; }
            self->g[i] = (unsigned)v;
        }
    }
    return (PyObject *)self;
}

static int launcher_traverse(Launcher *self, visitproc visit, void *arg)
{
    Py_VISIT(self->grid); Py_VISIT(self->plans); Py_VISIT(self->fallback);
    return 0;
}

static int launcher_clear(Launcher *self)
{
    Py_CLEAR(self->grid); Py_CLEAR(self->plans); Py_CLEAR(self->fallback);
    return 0;
}

static void launcher_dealloc(Launcher *self)
{
    PyObject_GC_UnTrack(self);
    launcher_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef launcher_members[] = {
    {"grid", T_OBJECT, offsetof(Launcher, grid), READONLY, "the grid, as given"},
    {"fast_grid", T_INT, offsetof(Launcher, fast_grid), READONLY, "whether launches of this grid can stay in C"},
    {NULL},
};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tle_launch.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "kernel[grid]: launch(*args, **kwargs) in C when a plan matches, else through the Python path.",
    .tp_new = launcher_new,
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_traverse = (traverseproc)launcher_traverse,
    .tp_clear = (inquiry)launcher_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Launcher, vectorcall),
    .tp_members = launcher_members,
};

/* ---- module functions ------------------------------------------------------------------------------------- */

static PyObject *m_configure(PyObject *m, PyObject *args)
{
    PyObject *tensor, *parameter, *dtype, *descrs = Py_None;
    if (!PyArg_ParseTuple(args, "O!OO!|O", &PyType_Type, &tensor, &parameter, &PyType_Type, &dtype, &descrs))
        return NULL;
    if (parameter != Py_None && !PyType_Check(parameter))
        return PyErr_Format(PyExc_TypeError, "parameter: a type or None");
    PyObject *d[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    if (descrs != Py_None) {  /* (is_cuda, dtype, shape, stride, data_ptr, get_device) */
        if (!PyTuple_Check(descrs) || PyTuple_GET_SIZE(descrs) != 6)
            return PyErr_Format(PyExc_TypeError, "descriptors: a tuple of 6");
        for (int i = 0; i < 6; i++) {
            d[i] = PyTuple_GET_ITEM(descrs, i);
            int getter = i < 3;
            if (getter ? Py_TYPE(d[i])->tp_descr_get == NULL : !PyCallable_Check(d[i]))
                return PyErr_Format(PyExc_TypeError, "descriptor %d is no %s", i, getter ? "getter" : "method");
        }
    }
    PyObject **slots[6] = {&d_is_cuda, &d_dtype, &d_shape, &d_stride, &d_data_ptr, &d_get_device};
    for (int i = 0; i < 6; i++) {
        Py_XINCREF(d[i]);
        Py_XSETREF(*slots[i], d[i]);
    }
    Py_INCREF(tensor); Py_INCREF(dtype);
    Py_XSETREF(tensor_type, (PyTypeObject *)tensor);
    Py_XSETREF(parameter_type, parameter == Py_None ? NULL : (PyTypeObject *)Py_NewRef(parameter));
    Py_XSETREF(dtype_type, (PyTypeObject *)dtype);
    Py_RETURN_NONE;
}

static PyObject *m_set_single_device(PyObject *m, PyObject *arg)
{
    int v = PyObject_IsTrue(arg);
    if (v < 0) return NULL;
    single_device = v;
    Py_RETURN_NONE;
}

static PyObject *m_load_driver(PyObject *m, PyObject *noargs)
{
    if (cu_launch_kernel != NULL) Py_RETURN_NONE;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) return PyErr_Format(PyExc_OSError, "cannot load libcuda.so.1: %s", dlerror());
    void *launch = dlsym(lib, "cuLaunchKernel");
    void *ctx = dlsym(lib, "cuCtxGetCurrent");
    if (launch == NULL || ctx == NULL)
        return PyErr_Format(PyExc_OSError, "libcuda.so.1 lacks cuLaunchKernel or cuCtxGetCurrent");
    cu_ctx_get_current = (ctx_fn)ctx;
    cu_launch_kernel = (launch_fn)launch;
    Py_RETURN_NONE;
}

static PyObject *m_key(PyObject *m, PyObject *args)
{
    PyObject *tuple, *kwargs;
    int allow_cpu = 0;
    if (!PyArg_ParseTuple(args, "O!O!|p", &PyTuple_Type, &tuple, &PyDict_Type, &kwargs, &allow_cpu)) return NULL;
    Py_ssize_t nargs = PyTuple_GET_SIZE(tuple), nk = PyDict_GET_SIZE(kwargs);
    PyObject *flat[MAX_ARGS + 64];
    if (nargs > MAX_ARGS || nk > 64) Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < nargs; i++) flat[i] = PyTuple_GET_ITEM(tuple, i);
    PyObject *kwnames = nk ? PyTuple_New(nk) : NULL;
    if (nk && kwnames == NULL) return NULL;
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *v;
    while (PyDict_Next(kwargs, &pos, &k, &v)) {
        Py_INCREF(k);
        PyTuple_SET_ITEM(kwnames, i, k);
        flat[nargs + i++] = v;
    }
    ArgValue values[MAX_ARGS];
    PyObject *key = make_key(flat, nargs, kwnames, flat + nargs, allow_cpu, values);
    Py_XDECREF(kwnames);
    if (key == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    return key;
}

static PyObject *m_pack(PyObject *m, PyObject *args)
{
    PyObject *plan, *tuple;
    int allow_cpu = 0;
    if (!PyArg_ParseTuple(args, "O!O!|p", &PlanType, &plan, &PyTuple_Type, &tuple, &allow_cpu)) return NULL;
    Py_ssize_t nargs = PyTuple_GET_SIZE(tuple);
    if (nargs > MAX_ARGS) Py_RETURN_NONE;
    ArgValue values[MAX_ARGS];
    uint64_t words[MAX_WORDS], vals[MAX_SLOTS];
    int n = 0;
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (!key_arg(PyTuple_GET_ITEM(tuple, i), allow_cpu, words, &n, &values[i])) Py_RETURN_NONE;
    if (!pack((Plan *)plan, values, nargs, vals)) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)vals, (Py_ssize_t)((Plan *)plan)->nslots * 8);
}

static PyObject *m_recorded(PyObject *m, PyObject *noargs)
{
    PyObject *params = PyBytes_FromStringAndSize((const char *)recorded.params, (Py_ssize_t)recorded.nparams * 8);
    if (params == NULL) return NULL;
    return Py_BuildValue("{s:l,s:(III),s:(III),s:I,s:K,s:N}", "calls", recorded.calls, "grid", recorded.grid[0],
                         recorded.grid[1], recorded.grid[2], "block", recorded.block[0], recorded.block[1],
                         recorded.block[2], "shared", recorded.shared, "stream", recorded.stream, "params", params);
}

static PyObject *m_set_test(PyObject *m, PyObject *args)
{
    unsigned long long context;
    int result;
    if (!PyArg_ParseTuple(args, "Ki", &context, &result)) return NULL;
    test_context = (uintptr_t)context;
    test_result = result;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", m_configure, METH_VARARGS, "configure(Tensor, Parameter or None, dtype, descriptors=None): the "
     "types the keys know, and Tensor's (is_cuda, dtype, shape, stride, data_ptr, get_device) to call directly"},
    {"set_single_device", m_set_single_device, METH_O, "whether one CUDA device is all there is (no get_device)"},
    {"load_driver", m_load_driver, METH_NOARGS, "find cuLaunchKernel and cuCtxGetCurrent in libcuda.so.1"},
    {"key", m_key, METH_VARARGS, "key(args, kwargs, allow_cpu=False): the plan key a Launcher computes, or None"},
    {"pack", m_pack, METH_VARARGS, "pack(plan, args, allow_cpu=False): the parameter words, or None"},
    {"recorded", m_recorded, METH_NOARGS, "the last launch of a test plan"},
    {"set_test", m_set_test, METH_VARARGS, "set_test(context, result): the CUDA context test plans see as "
     "current, and the CUresult their launches return"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tle_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__tle_launch(void)
{
    if (PyType_Ready(&PlanType) < 0 || PyType_Ready(&LauncherType) < 0) return NULL;
    s_is_cuda = PyUnicode_InternFromString("is_cuda");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_shape = PyUnicode_InternFromString("shape");
    s_stride = PyUnicode_InternFromString("stride");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_get_device = PyUnicode_InternFromString("get_device");
    if (!s_is_cuda || !s_dtype || !s_shape || !s_stride || !s_data_ptr || !s_get_device) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&PlanType);
    Py_INCREF(&LauncherType);
    if (PyModule_AddObject(m, "Plan", (PyObject *)&PlanType) < 0
        || PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType) < 0
        || PyModule_AddIntConstant(m, "MAX_SLOTS", MAX_SLOTS) < 0
        || PyModule_AddIntConstant(m, "MAX_ARGS", MAX_ARGS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
"""


# ---- building and loading ---------------------------------------------------------------------------------------
_MODULE = None
_TRIED = False
UNAVAILABLE: str | None = None  # why the extension is not in use, once tried


def _compiler() -> list[str] | None:
    cc = os.environ.get("CC")
    if cc:
        return shlex.split(cc)
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return [path]
    return None


def _build(cc: list[str], include: str, path: str) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        src = os.path.join(tmp, "tle_launch.c")
        with open(src, "w", encoding="utf-8") as f:
            f.write(SOURCE)
        out = os.path.join(tmp, "tle_launch.so")
        cmd = [*cc, "-O2", "-shared", "-fPIC", "-o", out, src, f"-I{include}", "-ldl"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} failed:\n{(done.stderr or done.stdout).strip()[-2000:]}")
        os.replace(out, path)  # atomic: concurrent builders each write a whole file


def _load(path: str):
    loader = importlib.machinery.ExtensionFileLoader("_tle_launch", path)
    spec = importlib.util.spec_from_file_location("_tle_launch", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def library_path(cc: list[str]) -> str:
    """Where the compiled extension lives: the cache directory, keyed by source, Python and compiler."""
    h = hashlib.sha256("\0".join([SOURCE, sys.version, sysconfig.get_config_var("EXT_SUFFIX") or "",
                                  *cc]).encode()).hexdigest()[:16]
    root = debug.cache_dir()
    if root is None:
        root = os.path.join(tempfile.gettempdir(), f"tle-launch-{os.getuid() if hasattr(os, 'getuid') else 0}")
    return os.path.join(root, "launcher", f"tle_launch-{h}.so")


def _make():
    if os.environ.get("TLE_FAST_LAUNCH", "1") == "0":
        raise RuntimeError("TLE_FAST_LAUNCH=0")
    import torch
    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc or clang; or set CC)")
    path = library_path(cc)
    if not os.path.exists(path):
        include = sysconfig.get_paths()["include"]
        if not os.path.exists(os.path.join(include, "Python.h")):
            raise RuntimeError(f"Python's headers are missing (no {include}/Python.h)")
        with debug.timed("build the C launcher"):
            _build(cc, include, path)
    module = _load(path)
    configure(module, torch)
    return module


ATTRIBUTES = ("is_cuda", "dtype", "shape", "stride", "data_ptr", "get_device")


def configure(module, torch, descriptors: bool = True) -> None:
    """Tell the extension torch's types, and the descriptors of the tensor attributes a key reads, so that it
    calls them without looking them up by name. nn.Parameter is keyed like a tensor only if it resolves every
    attribute to the same descriptor."""
    import inspect
    tensor, parameter = torch.Tensor, torch.nn.Parameter
    own = tuple(inspect.getattr_static(tensor, a) for a in ATTRIBUTES)
    if any(inspect.getattr_static(parameter, a) is not d for a, d in zip(ATTRIBUTES, own)):
        parameter = None
    module.configure(tensor, parameter, torch.dtype, own if descriptors else None)


def extension():
    """The C launcher module, built and loaded on first use; None where it cannot be (then launches stay on the
    Python path, and TLE_DEBUG=1 says why)."""
    global _MODULE, _TRIED, UNAVAILABLE
    if not _TRIED:
        _TRIED = True
        try:
            _MODULE = _make()
        except Exception as exc:  # noqa: BLE001 - any failure only costs speed
            UNAVAILABLE = str(exc).strip() or type(exc).__name__
            debug.note(f"the C launcher is unavailable ({UNAVAILABLE}); launches take the Python path")
    return _MODULE


_CUDA = None


def for_launch():
    """The extension for kernel[grid]: built on first use where torch sees a GPU; on a machine without one,
    only if it was built already (CPU tensors run on the interpreter, which the C launcher never runs)."""
    global _CUDA
    if _MODULE is not None or _TRIED:
        return _MODULE
    if _CUDA is None:
        try:
            import torch
            _CUDA = bool(torch.cuda.is_available())
        except Exception:  # noqa: BLE001
            _CUDA = False
    return extension() if _CUDA else None
