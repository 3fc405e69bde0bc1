/* A run of batched entries -> the buffers of its Arrow columns (a pure codec: bytes in, buffers out).

   Each entry's (uncompressed) batch payload is n times [u32 size][SingleMessageMetadata][payload].
   decode(bodies, counts, firsts, lasts, prefixes, publish_us, allocate) walks every record of
   every entry twice without the GIL: once to check it and size the columns, then (after
   allocate(size) gave each buffer: any writable buffer, Arrow's memory pool in production, whose
   freed pages are reused rather than faulted in again) to fill them. It returns the columns of
   the records [first, last) of each entry that are not compacted out:

     (rows, values, value_offsets, keys, key_offsets, key_validity, key_nulls, ids, id_offsets,
      publish, events, event_validity, event_nulls, props)

   (offsets int32, times int64 microseconds, validity bitmaps LSB first or None when nothing or
   everything is null; props is None when no kept record has properties, else (row_offsets, keys,
   key_offsets, values, value_offsets)). A message id is the entry's prefix + batch_index
   (field 4) + batch_size (field 6), as a consumer serializes it.

   It returns None ("fall back") for anything it does not vouch for, so that the Python decoder
   answers with its rows or its precise error: a size or length past its bounds, an unknown field
   or wire type, a varint over nine bytes, a missing payload_size, key or KeyValue field, bytes
   after the last record, invalid UTF-8 in a key or property, an event time that overflows in
   microseconds, 2 GiB of values. It never raises for bad data: only for arguments of the wrong
   type (a caller's bug). Built with the limited API (one .abi3.so for CPython >= 3.11) by
   scripts/build_native.py; SOURCE_SHA is this file's sha256, so a stale build is detected, and
   BUILD_FLAGS the compiler flags, so a change of $CFLAGS rebuilds it. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef SOURCE_SHA
#define SOURCE_SHA "unknown"
#endif
#ifndef BUILD_FLAGS
#define BUILD_FLAGS "unknown"
#endif

#define EVENT_MAX (INT64_MAX / 1000) /* event_time in ms that still fits in microseconds */
#define LIMIT_32 ((int64_t)INT32_MAX)  /* Arrow's 32-bit offsets */

typedef struct {
    const uint8_t *body, *end, *prefix;
    uint64_t n, first, last;
    Py_ssize_t prefix_len;
    int64_t publish_us;
} Entry;

typedef struct { /* one record's SingleMessageMetadata */
    const uint8_t *key;
    uint32_t key_len; /* 0: no key (absent or empty: an empty key reads as none) */
    uint64_t size, event;
    int compacted;
    uint32_t props, prop_key_bytes, prop_value_bytes;
} Fields;

typedef struct { /* the run's columns: sized by the first walk */
    int64_t rows, value_bytes, key_bytes, id_bytes, props, prop_key_bytes, prop_value_bytes, key_nulls, event_nulls;
} Sizes;

typedef struct { /* the buffers the second walk fills, and where it is in each */
    uint8_t *values, *keys, *key_valid, *ids, *event_valid, *prop_keys, *prop_values;
    int32_t *value_offsets, *key_offsets, *id_offsets, *prop_rows, *prop_key_offsets, *prop_value_offsets;
    int64_t *publish, *events;
    int64_t row, value_at, key_at, id_at, prop, prop_key_at, prop_value_at;
    const Sizes *cap; /* what the first walk sized: the second stays within it, whatever happens */
} Out;

/* The varint at *p (before end): 1 and *p moved past it, or 0 (runs past end, or over 9 bytes). */
static inline int varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    const uint8_t *q = *p;
    uint64_t v = 0;
    for (int shift = 0; shift < 63; shift += 7) {
        if (q >= end) return 0;
        uint8_t b = *q++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *p = q;
            *out = v;
            return 1;
        }
    }
    return 0;
}

static inline int varint_size(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *put_varint(uint8_t *o, uint64_t v) {
    while (v >= 0x80) {
        *o++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *o++ = (uint8_t)v;
    return o;
}

/* Strict UTF-8 (RFC 3629: no overlong forms, surrogates or code points past U+10FFFF), as
   Python's bytes.decode() and Arrow's string validation accept it. */
static int utf8_ok(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && s[i + 1] < 0xA0) return 0; /* overlong */
            if (c == 0xED && s[i + 1] >= 0xA0) return 0; /* surrogate */
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && s[i + 1] < 0x90) return 0; /* overlong */
            if (c == 0xF4 && s[i + 1] >= 0x90) return 0; /* past U+10FFFF */
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* A length-delimited field's body at *p: 1 with *body, *len and *p past it, or 0. */
static inline int span(const uint8_t **p, const uint8_t *end, const uint8_t **body, uint32_t *len) {
    uint64_t n;
    if (!varint(p, end, &n) || n > (uint64_t)(end - *p)) return 0;
    *body = *p;
    *len = (uint32_t)n;
    *p += n;
    return 1;
}

/* One KeyValue submessage: both fields present once each, valid UTF-8 (protobuf requires both;
   anything else is left to the Python decoder). */
static int key_value(const uint8_t *p, const uint8_t *end, const uint8_t **key, uint32_t *key_len,
                     const uint8_t **value, uint32_t *value_len) {
    int have_key = 0, have_value = 0;
    while (p < end) {
        uint8_t tag = *p++;
        if (tag == 0x0A && !have_key) {
            if (!span(&p, end, key, key_len) || !utf8_ok(*key, *key_len)) return 0;
            have_key = 1;
        } else if (tag == 0x12 && !have_value) {
            if (!span(&p, end, value, value_len) || !utf8_ok(*value, *value_len)) return 0;
            have_value = 1;
        } else {
            return 0;
        }
    }
    return have_key && have_value;
}

/* The metadata [p, end) of one record: 1 with f filled, or 0 to fall back. With o, its
   properties are written there (the second walk, of a record already checked and kept). */
static int parse_fields(const uint8_t *p, const uint8_t *end, Fields *f, Out *o) {
    uint64_t v;
    int have_size = 0;
    memset(f, 0, sizeof *f);
    while (p < end) {
        uint8_t tag = *p++;
        switch (tag) {
        case 0x0A: { /* properties */
            const uint8_t *body, *k = NULL, *val = NULL;
            uint32_t len, k_len = 0, val_len = 0;
            if (!span(&p, end, &body, &len) || !key_value(body, body + len, &k, &k_len, &val, &val_len)) return 0;
            f->props++;
            f->prop_key_bytes += k_len;
            f->prop_value_bytes += val_len;
            if (o) {
                if (o->prop >= o->cap->props || o->prop_key_at + k_len > o->cap->prop_key_bytes ||
                    o->prop_value_at + val_len > o->cap->prop_value_bytes)
                    return 0; /* changed since the first walk */
                o->prop_key_offsets[o->prop] = (int32_t)o->prop_key_at;
                o->prop_value_offsets[o->prop] = (int32_t)o->prop_value_at;
                memcpy(o->prop_keys + o->prop_key_at, k, k_len);
                memcpy(o->prop_values + o->prop_value_at, val, val_len);
                o->prop_key_at += k_len;
                o->prop_value_at += val_len;
                o->prop++;
            }
            break;
        }
        case 0x12: /* partition_key: the last one counts, every one must decode */
            if (!span(&p, end, &f->key, &f->key_len) || !utf8_ok(f->key, f->key_len)) return 0;
            break;
        case 0x18: /* payload_size */
            if (!varint(&p, end, &f->size)) return 0;
            have_size = 1;
            break;
        case 0x20: /* compacted_out */
            if (!varint(&p, end, &v)) return 0;
            f->compacted = v != 0;
            break;
        case 0x28: /* event_time */
            if (!varint(&p, end, &f->event)) return 0;
            break;
        case 0x30: /* partition_key_b64_encoded */
        case 0x40: /* sequence_id */
        case 0x48: /* null_value */
        case 0x50: /* null_partition_key */
            if (!varint(&p, end, &v)) return 0;
            break;
        case 0x3A: { /* ordering_key */
            const uint8_t *body;
            uint32_t len;
            if (!span(&p, end, &body, &len)) return 0;
            break;
        }
        default:
            return 0;
        }
    }
    return have_size && f->event <= EVENT_MAX;
}

static inline void set_bit(uint8_t *bits, int64_t i) { bits[i >> 3] |= (uint8_t)(1u << (i & 7)); }

/* The records of one entry: sized into s (o NULL) or written to o. 1, or 0 to fall back. */
static int walk_entry(const Entry *e, Sizes *s, Out *o) {
    const uint8_t *p = e->body, *end = e->end;
    int id_tail = 1 + varint_size(e->n); /* batch_size field */
    for (uint64_t i = 0; i < e->n; i++) {
        if (end - p < 4) return 0;
        uint32_t msize = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        p += 4;
        if (msize > (uint64_t)(end - p)) return 0;
        const uint8_t *mend = p + msize;
        Fields f;
        if (!parse_fields(p, mend, &f, NULL) || f.size > (uint64_t)(end - mend)) return 0;
        const uint8_t *value = mend;
        p = mend + f.size;
        if (i < e->first || i >= e->last || f.compacted) continue;
        if (!o) {
            s->rows++;
            s->value_bytes += (int64_t)f.size;
            s->key_bytes += f.key_len;
            s->key_nulls += f.key_len == 0;
            s->event_nulls += f.event == 0;
            s->id_bytes += e->prefix_len + 1 + varint_size(i) + id_tail;
            s->props += f.props;
            s->prop_key_bytes += f.prop_key_bytes;
            s->prop_value_bytes += f.prop_value_bytes;
            continue;
        }
        /* a body changed between the walks (a caller's bug) must not write past the buffers */
        const Sizes *cap = o->cap;
        int id_len = (int)e->prefix_len + 1 + varint_size(i) + id_tail;
        if (o->row >= cap->rows || o->value_at + (int64_t)f.size > cap->value_bytes ||
            o->key_at + f.key_len > cap->key_bytes || o->id_at + id_len > cap->id_bytes ||
            o->prop + f.props > cap->props || o->prop_key_at + f.prop_key_bytes > cap->prop_key_bytes ||
            o->prop_value_at + f.prop_value_bytes > cap->prop_value_bytes)
            return 0;
        int64_t r = o->row++;
        o->value_offsets[r] = (int32_t)o->value_at;
        memcpy(o->values + o->value_at, value, f.size);
        o->value_at += (int64_t)f.size;
        o->key_offsets[r] = (int32_t)o->key_at;
        if (f.key_len) {
            memcpy(o->keys + o->key_at, f.key, f.key_len);
            o->key_at += f.key_len;
            if (o->key_valid) set_bit(o->key_valid, r);
        }
        o->id_offsets[r] = (int32_t)o->id_at;
        uint8_t *id = o->ids + o->id_at;
        memcpy(id, e->prefix, (size_t)e->prefix_len);
        id += e->prefix_len;
        *id++ = 0x20;
        id = put_varint(id, i);
        *id++ = 0x30;
        id = put_varint(id, e->n);
        o->id_at = id - o->ids;
        o->publish[r] = e->publish_us;
        o->events[r] = (int64_t)f.event * 1000;
        if (o->event_valid && f.event) set_bit(o->event_valid, r);
        if (f.props) {
            o->prop_rows[r] = (int32_t)o->prop;
            if (!parse_fields(mend - msize, mend, &f, o)) return 0;
        } else if (o->prop_rows) {
            o->prop_rows[r] = (int32_t)o->prop;
        }
    }
    return p == end;
}

/* The buffers allocate() gave, held (exported) until decode returns. */
typedef struct {
    PyObject *alloc;
    Py_buffer views[19];
    int held;
} Allocator;

/* allocate(size) -> a writable buffer of at least size bytes: 1 with *obj (a new reference) and
   *data, or 0 with a Python error. */
static int allocate(Allocator *a, int64_t size, PyObject **obj, void *data) {
    *obj = PyObject_CallFunction(a->alloc, "L", (long long)size);
    if (!*obj) return 0;
    Py_buffer *view = &a->views[a->held];
    if (PyObject_GetBuffer(*obj, view, PyBUF_WRITABLE) < 0) return 0;
    a->held++;
    if (view->len < size) {
        PyErr_SetString(PyExc_ValueError, "decode: allocate returned a buffer too small");
        return 0;
    }
    *(uint8_t **)data = view->buf;
    return 1;
}

static PyObject *decode(PyObject *self, PyObject *args) {
    PyObject *bodies, *counts, *firsts, *lasts, *prefixes, *publish;
    Allocator a = {0};
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O", &PyList_Type, &bodies, &PyList_Type, &counts, &PyList_Type,
                          &firsts, &PyList_Type, &lasts, &PyList_Type, &prefixes, &PyList_Type, &publish, &a.alloc))
        return NULL;
    Py_ssize_t k = PyList_Size(bodies);
    if (PyList_Size(counts) != k || PyList_Size(firsts) != k || PyList_Size(lasts) != k ||
        PyList_Size(prefixes) != k || PyList_Size(publish) != k) {
        PyErr_SetString(PyExc_ValueError, "decode: the six lists must have one item per entry");
        return NULL;
    }
    if (k == 0) Py_RETURN_NONE;

    PyObject *result = NULL;
    PyObject *out[14] = {0}, *props[5] = {0};
    Py_buffer *views = calloc((size_t)k, sizeof(Py_buffer));
    Entry *entries = calloc((size_t)k, sizeof(Entry));
    Py_ssize_t held = 0;
    if (!views || !entries) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        Entry *e = &entries[i];
        long long n = PyLong_AsLongLong(PyList_GetItem(counts, i));
        long long first = PyLong_AsLongLong(PyList_GetItem(firsts, i));
        long long last = PyLong_AsLongLong(PyList_GetItem(lasts, i));
        long long pub = PyLong_AsLongLong(PyList_GetItem(publish, i));
        PyObject *prefix = PyList_GetItem(prefixes, i);
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) goto done;
            PyErr_Clear(); /* past 64 bits: the Python decoder's answer */
            goto fall_back;
        }
        if (!PyBytes_Check(prefix)) {
            PyErr_SetString(PyExc_TypeError, "decode: a message-id prefix must be bytes");
            goto done;
        }
        if (n <= 0 || n > INT32_MAX || first < 0 || last < 0) goto fall_back;
        if (PyObject_GetBuffer(PyList_GetItem(bodies, i), &views[i], PyBUF_SIMPLE) < 0) goto done;
        held++;
        e->body = views[i].buf;
        e->end = e->body + views[i].len;
        e->n = (uint64_t)n;
        e->first = (uint64_t)first;
        e->last = (uint64_t)last;
        e->prefix = (const uint8_t *)PyBytes_AsString(prefix); /* immutable, held by the list */
        e->prefix_len = PyBytes_Size(prefix);
        e->publish_us = pub;
    }

    Sizes s = {0};
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < k && ok; i++) ok = walk_entry(&entries[i], &s, NULL);
    Py_END_ALLOW_THREADS
    if (!ok || s.value_bytes > LIMIT_32 || s.key_bytes > LIMIT_32 || s.id_bytes > LIMIT_32 ||
        s.prop_key_bytes > LIMIT_32 || s.prop_value_bytes > LIMIT_32 || s.rows >= LIMIT_32)
        goto fall_back;

    Out o = {0};
    int64_t rows = s.rows, offsets = 4 * (rows + 1), bitmap = (rows + 7) / 8;
    if (!allocate(&a, s.value_bytes, &out[1], &o.values) || !allocate(&a, offsets, &out[2], &o.value_offsets) ||
        !allocate(&a, s.key_bytes, &out[3], &o.keys) || !allocate(&a, offsets, &out[4], &o.key_offsets) ||
        !allocate(&a, s.id_bytes, &out[7], &o.ids) || !allocate(&a, offsets, &out[8], &o.id_offsets) ||
        !allocate(&a, 8 * rows, &out[9], &o.publish) || !allocate(&a, 8 * rows, &out[10], &o.events))
        goto done;
    if (s.key_nulls && s.key_nulls < rows) {
        if (!allocate(&a, bitmap, &out[5], &o.key_valid)) goto done;
        memset(o.key_valid, 0, (size_t)bitmap);
    }
    if (s.event_nulls && s.event_nulls < rows) {
        if (!allocate(&a, bitmap, &out[11], &o.event_valid)) goto done;
        memset(o.event_valid, 0, (size_t)bitmap);
    }
    if (s.props) {
        if (!allocate(&a, offsets, &props[0], &o.prop_rows) || !allocate(&a, s.prop_key_bytes, &props[1], &o.prop_keys) ||
            !allocate(&a, 4 * (s.props + 1), &props[2], &o.prop_key_offsets) ||
            !allocate(&a, s.prop_value_bytes, &props[3], &o.prop_values) ||
            !allocate(&a, 4 * (s.props + 1), &props[4], &o.prop_value_offsets))
            goto done;
        if (!(out[13] = PyTuple_Pack(5, props[0], props[1], props[2], props[3], props[4]))) goto done;
    }
    o.cap = &s;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < k && ok; i++) ok = walk_entry(&entries[i], NULL, &o);
    o.value_offsets[rows] = (int32_t)o.value_at;
    o.key_offsets[rows] = (int32_t)o.key_at;
    o.id_offsets[rows] = (int32_t)o.id_at;
    if (o.prop_rows) {
        o.prop_rows[rows] = (int32_t)o.prop;
        o.prop_key_offsets[o.prop] = (int32_t)o.prop_key_at;
        o.prop_value_offsets[o.prop] = (int32_t)o.prop_value_at;
    }
    Py_END_ALLOW_THREADS
    if (!ok || o.row != rows || o.value_at != s.value_bytes || o.key_at != s.key_bytes || o.id_at != s.id_bytes ||
        o.prop != s.props)
        goto fall_back; /* the bodies changed under it */
    if (!(out[0] = PyLong_FromLongLong(rows)) || !(out[6] = PyLong_FromLongLong(s.key_nulls)) ||
        !(out[12] = PyLong_FromLongLong(s.event_nulls)))
        goto done;
    if (!(result = PyTuple_New(14))) goto done;
    for (int j = 0; j < 14; j++) {
        if (!out[j]) {
            Py_INCREF(Py_None);
            out[j] = Py_None;
        }
        PyTuple_SetItem(result, j, out[j]); /* steals the reference */
        out[j] = NULL;
    }
    goto done;

fall_back:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    for (int j = 0; j < a.held; j++) PyBuffer_Release(&a.views[j]);
    for (int j = 0; j < 14; j++) Py_XDECREF(out[j]);
    for (int j = 0; j < 5; j++) Py_XDECREF(props[j]);
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    free(views);
    free(entries);
    return result;
}

static PyObject *source_sha(PyObject *self, PyObject *unused) { return PyUnicode_FromString(SOURCE_SHA); }

static PyObject *build_flags(PyObject *self, PyObject *unused) { return PyUnicode_FromString(BUILD_FLAGS); }

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(bodies, counts, firsts, lasts, prefixes, publish_us, allocate): a run of batched entries' "
     "column buffers, or None: decode them in Python."},
    {"source_sha", source_sha, METH_NOARGS, "sha256 of the C file this was built from."},
    {"build_flags", build_flags, METH_NOARGS, "the compiler flags it was built with."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_records", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native_records(void) { return PyModule_Create(&module); }
