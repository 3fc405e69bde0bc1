/* A run of batched entries -> the buffers of its Arrow columns, in one walk (a pure codec).

   Each entry's (uncompressed) batch payload is n times [u32 size][SingleMessageMetadata][payload].
   decode(bodies, counts, firsts, lasts, prefixes, publish_us) walks every record of every entry
   once, without the GIL, and returns the columns of the records [first, last) of each entry that
   are not compacted out:

     (rows, values, value_offsets, keys, key_offsets, key_validity, key_nulls, ids, id_offsets,
      publish, events, event_validity, event_nulls, props)

   as bytes objects Arrow wraps without a copy (offsets int32, times int64 microseconds,
   validity bitmaps LSB first or None when nothing is null; props is None when no kept record has
   properties, else (row_offsets, keys, key_offsets, values, value_offsets)). A message id is the
   entry's prefix + batch_index (field 4) + batch_size (field 6), as a consumer serializes it.

   It returns None ("fall back") for anything it does not vouch for, so that the Python decoder
   answers with its rows or its precise error: a size or length past its bounds, an unknown field
   or wire type, a varint over nine bytes, a missing payload_size, key or KeyValue field, bytes
   after the last record, invalid UTF-8 in a key or property, an event time that overflows in
   microseconds, 2 GiB of values. It never raises for bad data: only for arguments of the wrong
   type (a caller's bug). Built with the limited API (one .abi3.so for CPython >= 3.11) by
   scripts/build_native.py; SOURCE_SHA is this file's sha256, so a stale build is detected. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef SOURCE_SHA
#define SOURCE_SHA "unknown"
#endif

#define EVENT_MAX (INT64_MAX / 1000) /* event_time in ms that still fits in microseconds */

typedef struct {
    const uint8_t *value;
    const uint8_t *key; /* NULL: no key (absent or empty: an empty key reads as none) */
    int64_t event;      /* ms, 0: none */
    uint32_t value_len, key_len;
    uint32_t entry, index; /* entry of the run, batch index in it */
} Row;

typedef struct {
    const uint8_t *key, *value;
    uint32_t key_len, value_len, row;
} Prop;

typedef struct {
    Row *rows;
    Py_ssize_t nrows;
    Prop *props;
    Py_ssize_t nprops, cap_props;
    int64_t value_bytes, key_bytes, id_bytes, prop_key_bytes, prop_value_bytes;
    Py_ssize_t key_nulls, event_nulls;
} Walk;

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
static int key_value(const uint8_t *p, const uint8_t *end, Prop *out) {
    int have_key = 0, have_value = 0;
    while (p < end) {
        uint8_t tag = *p++;
        if (tag == 0x0A && !have_key) {
            if (!span(&p, end, &out->key, &out->key_len) || !utf8_ok(out->key, out->key_len)) return 0;
            have_key = 1;
        } else if (tag == 0x12 && !have_value) {
            if (!span(&p, end, &out->value, &out->value_len) || !utf8_ok(out->value, out->value_len)) return 0;
            have_value = 1;
        } else {
            return 0;
        }
    }
    return have_key && have_value;
}

static int add_prop(Walk *w, const Prop *prop) {
    if (w->nprops == w->cap_props) {
        Py_ssize_t cap = w->cap_props ? 2 * w->cap_props : 256;
        Prop *grown = realloc(w->props, (size_t)cap * sizeof(Prop));
        if (!grown) return 0;
        w->props = grown;
        w->cap_props = cap;
    }
    w->props[w->nprops++] = *prop;
    return 1;
}

/* The records of one entry into w: 1, or 0 to fall back (-1: out of memory). */
static int walk_entry(Walk *w, uint32_t entry, const uint8_t *p, const uint8_t *end, uint64_t n,
                      uint64_t first, uint64_t last, int64_t prefix_len) {
    int64_t id_tail = 1 + varint_size(n); /* batch_size field */
    for (uint64_t i = 0; i < n; i++) {
        if (end - p < 4) return 0;
        uint32_t msize = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        p += 4;
        if (msize > (uint64_t)(end - p)) return 0;
        const uint8_t *mend = p + msize;
        const uint8_t *key = NULL;
        uint32_t key_len = 0;
        uint64_t size = 0, event = 0, v;
        int have_size = 0, compacted = 0;
        Py_ssize_t props_before = w->nprops;
        while (p < mend) {
            uint8_t tag = *p++;
            switch (tag) {
            case 0x0A: { /* properties */
                Prop prop;
                const uint8_t *body;
                uint32_t len;
                if (!span(&p, mend, &body, &len) || !key_value(body, body + len, &prop)) return 0;
                prop.row = (uint32_t)w->nrows;
                if (!add_prop(w, &prop)) return -1;
                break;
            }
            case 0x12: /* partition_key: the last one counts, every one must decode */
                if (!span(&p, mend, &key, &key_len) || !utf8_ok(key, key_len)) return 0;
                break;
            case 0x18: /* payload_size */
                if (!varint(&p, mend, &size)) return 0;
                have_size = 1;
                break;
            case 0x20: /* compacted_out */
                if (!varint(&p, mend, &v)) return 0;
                compacted = v != 0;
                break;
            case 0x28: /* event_time */
                if (!varint(&p, mend, &event)) return 0;
                break;
            case 0x30: /* partition_key_b64_encoded */
            case 0x40: /* sequence_id */
            case 0x48: /* null_value */
            case 0x50: /* null_partition_key */
                if (!varint(&p, mend, &v)) return 0;
                break;
            case 0x3A: { /* ordering_key */
                const uint8_t *body;
                uint32_t len;
                if (!span(&p, mend, &body, &len)) return 0;
                break;
            }
            default:
                return 0;
            }
        }
        if (!have_size || size > (uint64_t)(end - mend) || event > EVENT_MAX) return 0;
        p = mend + size;
        if (i < first || i >= last || compacted) {
            w->nprops = props_before;
            continue;
        }
        Row *r = &w->rows[w->nrows++];
        r->value = mend;
        r->value_len = (uint32_t)size;
        r->key = key_len ? key : NULL;
        r->key_len = key_len;
        r->event = (int64_t)event;
        r->entry = entry;
        r->index = (uint32_t)i;
        w->value_bytes += (int64_t)size;
        w->key_bytes += key_len;
        w->key_nulls += key_len == 0;
        w->event_nulls += event == 0;
        w->id_bytes += prefix_len + 1 + varint_size(i) + id_tail;
        for (Py_ssize_t j = props_before; j < w->nprops; j++) {
            w->prop_key_bytes += w->props[j].key_len;
            w->prop_value_bytes += w->props[j].value_len;
        }
    }
    return p == end;
}

static PyObject *new_bytes(Py_ssize_t n, uint8_t **data) {
    PyObject *b = PyBytes_FromStringAndSize(NULL, n);
    if (b) *data = (uint8_t *)PyBytes_AsString(b);
    return b;
}

/* A validity bitmap (LSB first) of rows whose flag is set. */
static void set_bit(uint8_t *bits, Py_ssize_t i) { bits[i >> 3] |= (uint8_t)(1u << (i & 7)); }

#define LIMIT_32 ((int64_t)INT32_MAX)

static PyObject *decode(PyObject *self, PyObject *args) {
    PyObject *bodies, *counts, *firsts, *lasts, *prefixes, *publish;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!", &PyList_Type, &bodies, &PyList_Type, &counts, &PyList_Type,
                          &firsts, &PyList_Type, &lasts, &PyList_Type, &prefixes, &PyList_Type, &publish))
        return NULL;
    Py_ssize_t k = PyList_Size(bodies);
    if (PyList_Size(counts) != k || PyList_Size(firsts) != k || PyList_Size(lasts) != k ||
        PyList_Size(prefixes) != k || PyList_Size(publish) != k) {
        PyErr_SetString(PyExc_ValueError, "decode: the six lists must have one item per entry");
        return NULL;
    }
    if (k == 0 || k > UINT32_MAX) Py_RETURN_NONE;

    PyObject *result = NULL;
    Py_buffer *views = calloc((size_t)k, sizeof(Py_buffer));
    uint64_t *meta = calloc((size_t)k * 3, sizeof(uint64_t)); /* n, first, last of each entry */
    int64_t *publish_us = calloc((size_t)k, sizeof(int64_t));
    /* the prefixes' bytes, read without the GIL (bytes are immutable; the list holds them) */
    const char **prefix_data = calloc((size_t)k, sizeof(char *));
    Py_ssize_t *prefix_len = calloc((size_t)k, sizeof(Py_ssize_t));
    Py_ssize_t held = 0;
    Walk w = {0};
    PyObject *out[14] = {0};
    if (!views || !meta || !publish_us || !prefix_data || !prefix_len) {
        PyErr_NoMemory();
        goto done;
    }
    uint64_t records = 0;
    for (Py_ssize_t e = 0; e < k; e++) {
        long long n = PyLong_AsLongLong(PyList_GetItem(counts, e));
        long long first = PyLong_AsLongLong(PyList_GetItem(firsts, e));
        long long last = PyLong_AsLongLong(PyList_GetItem(lasts, e));
        long long pub = PyLong_AsLongLong(PyList_GetItem(publish, e));
        PyObject *prefix = PyList_GetItem(prefixes, e);
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) goto done;
            PyErr_Clear(); /* a value past 64 bits: the Python decoder's answer */
            goto fall_back;
        }
        if (!PyBytes_Check(prefix)) {
            PyErr_SetString(PyExc_TypeError, "decode: a message-id prefix must be bytes");
            goto done;
        }
        if (n <= 0 || n > UINT32_MAX || first < 0 || last < 0) goto fall_back;
        prefix_data[e] = PyBytes_AsString(prefix);
        prefix_len[e] = PyBytes_Size(prefix);
        meta[3 * e] = (uint64_t)n;
        meta[3 * e + 1] = (uint64_t)first;
        meta[3 * e + 2] = (uint64_t)last;
        publish_us[e] = pub;
        records += (uint64_t)n;
        if (PyObject_GetBuffer(PyList_GetItem(bodies, e), &views[e], PyBUF_SIMPLE) < 0) goto done;
        held++;
    }
    if (records > (uint64_t)INT32_MAX) goto fall_back;
    w.rows = malloc((size_t)records * sizeof(Row));
    if (!w.rows) {
        PyErr_NoMemory();
        goto done;
    }
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t e = 0; e < k && ok == 1; e++) {
        const uint8_t *p = views[e].buf;
        ok = walk_entry(&w, (uint32_t)e, p, p + views[e].len, meta[3 * e], meta[3 * e + 1], meta[3 * e + 2],
                        prefix_len[e]);
    }
    Py_END_ALLOW_THREADS
    if (ok < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (!ok || w.value_bytes > LIMIT_32 || w.key_bytes > LIMIT_32 || w.id_bytes > LIMIT_32 ||
        w.prop_key_bytes > LIMIT_32 || w.prop_value_bytes > LIMIT_32)
        goto fall_back;

    Py_ssize_t rows = w.nrows;
    uint8_t *values, *value_offsets, *keys, *key_offsets, *key_valid = NULL, *ids, *id_offsets, *pub, *events,
        *event_valid = NULL;
    Py_ssize_t bitmap = (rows + 7) / 8;
    out[1] = new_bytes((Py_ssize_t)w.value_bytes, &values);
    out[2] = new_bytes(4 * (rows + 1), &value_offsets);
    out[3] = new_bytes((Py_ssize_t)w.key_bytes, &keys);
    out[4] = new_bytes(4 * (rows + 1), &key_offsets);
    out[7] = new_bytes((Py_ssize_t)w.id_bytes, &ids);
    out[8] = new_bytes(4 * (rows + 1), &id_offsets);
    out[9] = new_bytes(8 * rows, &pub);
    out[10] = new_bytes(8 * rows, &events);
    for (int j = 1; j <= 10; j++)
        if (j != 5 && j != 6 && !out[j]) goto done;
    if (w.key_nulls && w.key_nulls < rows) {
        if (!(out[5] = new_bytes(bitmap, &key_valid))) goto done;
        memset(key_valid, 0, (size_t)bitmap);
    }
    if (w.event_nulls && w.event_nulls < rows) {
        if (!(out[11] = new_bytes(bitmap, &event_valid))) goto done;
        memset(event_valid, 0, (size_t)bitmap);
    }
    uint8_t *prop_rows = NULL, *prop_keys = NULL, *prop_key_offsets = NULL, *prop_values = NULL,
            *prop_value_offsets = NULL;
    PyObject *props[5] = {0};
    if (w.nprops) {
        props[0] = new_bytes(4 * (rows + 1), &prop_rows);
        props[1] = new_bytes((Py_ssize_t)w.prop_key_bytes, &prop_keys);
        props[2] = new_bytes(4 * (w.nprops + 1), &prop_key_offsets);
        props[3] = new_bytes((Py_ssize_t)w.prop_value_bytes, &prop_values);
        props[4] = new_bytes(4 * (w.nprops + 1), &prop_value_offsets);
        if (!props[0] || !props[1] || !props[2] || !props[3] || !props[4]) {
            for (int j = 0; j < 5; j++) Py_XDECREF(props[j]);
            goto done;
        }
        out[13] = PyTuple_Pack(5, props[0], props[1], props[2], props[3], props[4]);
        for (int j = 0; j < 5; j++) Py_DECREF(props[j]);
        if (!out[13]) goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    int32_t *vo = (int32_t *)value_offsets, *ko = (int32_t *)key_offsets, *io = (int32_t *)id_offsets;
    int64_t *pu = (int64_t *)pub, *ev = (int64_t *)events;
    int32_t vat = 0, kat = 0, iat = 0;
    for (Py_ssize_t i = 0; i < rows; i++) {
        const Row *r = &w.rows[i];
        vo[i] = vat;
        memcpy(values + vat, r->value, r->value_len);
        vat += (int32_t)r->value_len;
        ko[i] = kat;
        if (r->key) {
            memcpy(keys + kat, r->key, r->key_len);
            kat += (int32_t)r->key_len;
            if (key_valid) set_bit(key_valid, i);
        }
        io[i] = iat;
        uint8_t *o = ids + iat;
        memcpy(o, prefix_data[r->entry], (size_t)prefix_len[r->entry]);
        o += prefix_len[r->entry];
        *o++ = 0x20;
        o = put_varint(o, r->index);
        *o++ = 0x30;
        o = put_varint(o, meta[3 * r->entry]);
        iat = (int32_t)(o - ids);
        pu[i] = publish_us[r->entry];
        ev[i] = r->event * 1000;
        if (event_valid && r->event) set_bit(event_valid, i);
    }
    vo[rows] = vat;
    ko[rows] = kat;
    io[rows] = iat;
    if (w.nprops) {
        int32_t *pr = (int32_t *)prop_rows, *pko = (int32_t *)prop_key_offsets,
                *pvo = (int32_t *)prop_value_offsets;
        Py_ssize_t j = 0;
        int32_t pk = 0, pv = 0;
        for (Py_ssize_t i = 0; i < rows; i++) { /* props were added in row order */
            pr[i] = (int32_t)j;
            while (j < w.nprops && w.props[j].row == (uint32_t)i) {
                const Prop *q = &w.props[j];
                pko[j] = pk;
                memcpy(prop_keys + pk, q->key, q->key_len);
                pk += (int32_t)q->key_len;
                pvo[j] = pv;
                memcpy(prop_values + pv, q->value, q->value_len);
                pv += (int32_t)q->value_len;
                j++;
            }
        }
        pr[rows] = (int32_t)j;
        pko[j] = pk;
        pvo[j] = pv;
    }
    Py_END_ALLOW_THREADS
    out[0] = PyLong_FromSsize_t(rows);
    out[6] = PyLong_FromSsize_t(w.key_nulls);
    out[12] = PyLong_FromSsize_t(w.event_nulls);
    if (!out[0] || !out[6] || !out[12]) goto done;
    for (int j = 0; j < 14; j++) {
        if (!out[j]) {
            Py_INCREF(Py_None);
            out[j] = Py_None;
        }
    }
    result = PyTuple_New(14);
    if (result) {
        for (int j = 0; j < 14; j++) {
            PyTuple_SetItem(result, j, out[j]); /* steals the reference */
            out[j] = NULL;
        }
    }
    goto done;

fall_back:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    for (int j = 0; j < 14; j++) Py_XDECREF(out[j]);
    for (Py_ssize_t e = 0; e < held; e++) PyBuffer_Release(&views[e]);
    free(views);
    free(meta);
    free(publish_us);
    free(prefix_data);
    free(prefix_len);
    free(w.rows);
    free(w.props);
    return result;
}

static PyObject *source_sha(PyObject *self, PyObject *unused) { return PyUnicode_FromString(SOURCE_SHA); }

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(bodies, counts, firsts, lasts, prefixes, publish_us): a run of batched entries' column "
     "buffers, or None: decode them in Python."},
    {"source_sha", source_sha, METH_NOARGS, "sha256 of the C file this was built from."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_records", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native_records(void) { return PyModule_Create(&module); }
