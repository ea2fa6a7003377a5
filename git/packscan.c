/*
 * The pack scanner (see packscan.h): a byte-driven state machine over the
 * pack format of gitformat-pack(5), one zlib stream per object.
 */
#include "git/packscan.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Where inflated bytes go to be forgotten. */
#define SCRATCH_SIZE (64 * 1024)

/* A varint longer than this is not one git writes (sizes are < 2^64). */
#define VARINT_MAX_BYTES 10

enum {
    OBJ_COMMIT = 1,
    OBJ_TREE = 2,
    OBJ_BLOB = 3,
    OBJ_TAG = 4,
    OBJ_OFS_DELTA = 6,
    OBJ_REF_DELTA = 7,
};

typedef enum scan_state {
    ST_HEADER,  /* the 12-byte pack header */
    ST_OBJHDR,  /* an object's type and size */
    ST_OFS,     /* an offset delta's base offset */
    ST_REFBASE, /* a ref delta's base id */
    ST_DATA,    /* the object's zlib stream */
    ST_TRAILER, /* the trailing checksum */
    ST_DONE,
} scan_state;

struct rgit_packscan {
    scan_state state;
    size_t hashlen; /* 20 or 32 */
    uint64_t max_inflated, inflated;
    uint64_t pos;           /* bytes scanned */
    uint64_t trailer_start; /* offset of the trailer, once reached */
    int in_trailer;         /* trailer_start is known */
    unsigned char header[12];
    size_t got;        /* bytes of the current fixed-size field */
    uint32_t nobjects; /* from the header */
    uint32_t seen;     /* objects finished */
    uint64_t size;     /* the current object's declared size */
    uint64_t out;      /* what its stream inflated to so far */
    unsigned shift;    /* of the size varint */
    int type;
    z_stream z;
    int z_ready;
    unsigned char scratch[SCRATCH_SIZE];
};

int rgit_packscan_new(rgit_packscan **out, size_t oid_hexlen, uint64_t max_inflated)
{
    rgit_packscan *s;

    *out = NULL;
    if (oid_hexlen != 40 && oid_hexlen != 64)
        return -EINVAL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->hashlen = oid_hexlen / 2;
    s->max_inflated = max_inflated;
    if (inflateInit(&s->z) != Z_OK) {
        free(s);
        return -ENOMEM;
    }
    s->z_ready = 1;
    *out = s;
    return 0;
}

static int bad(rgit_packscan *s, rg_error *err, const char *what)
{
    return rg_error_set(err, RG_E_PROTOCOL, "malformed pack at byte %llu: %s",
                        (unsigned long long)s->pos, what);
}

static void next_object(rgit_packscan *s)
{
    s->seen++;
    s->got = 0;
    s->state = s->seen == s->nobjects ? ST_TRAILER : ST_OBJHDR;
}

/* One byte of a fixed-size or varint field; returns 0 or an error. */
static int header_byte(rgit_packscan *s, unsigned char c, rg_error *err)
{
    switch (s->state) {
    case ST_HEADER:
        s->header[s->got++] = c;
        if (s->got < sizeof(s->header))
            return 0;
        if (memcmp(s->header, "PACK", 4) != 0)
            return bad(s, err, "no PACK signature");
        if (!(s->header[7] == 2 || s->header[7] == 3) || s->header[4] || s->header[5] ||
            s->header[6])
            return bad(s, err, "unsupported pack version");
        s->nobjects = (uint32_t)s->header[8] << 24 | (uint32_t)s->header[9] << 16 |
                      (uint32_t)s->header[10] << 8 | s->header[11];
        s->seen = 0;
        s->got = 0;
        s->state = s->nobjects ? ST_OBJHDR : ST_TRAILER;
        return 0;
    case ST_OBJHDR:
        if (s->got == 0) {
            s->type = (c >> 4) & 7;
            s->size = c & 15;
            s->shift = 4;
            if (s->type == 0 || s->type == 5)
                return bad(s, err, "bad object type");
        } else {
            if (s->got >= VARINT_MAX_BYTES)
                return bad(s, err, "object size too long");
            s->size |= (uint64_t)(c & 0x7f) << s->shift;
            s->shift += 7;
        }
        s->got++;
        if (c & 0x80)
            return 0;
        s->got = 0;
        s->state = s->type == OBJ_OFS_DELTA   ? ST_OFS
                   : s->type == OBJ_REF_DELTA ? ST_REFBASE
                                              : ST_DATA;
        return 0;
    case ST_OFS:
        if (++s->got > VARINT_MAX_BYTES)
            return bad(s, err, "delta offset too long");
        if (!(c & 0x80)) {
            s->got = 0;
            s->state = ST_DATA;
        }
        return 0;
    case ST_REFBASE:
        if (++s->got == s->hashlen) {
            s->got = 0;
            s->state = ST_DATA;
        }
        return 0;
    case ST_TRAILER:
        if (++s->got == s->hashlen)
            s->state = ST_DONE;
        return 0;
    default:
        return 0;
    }
}

/* Inflate what of data[0..len) belongs to the current object's stream;
 * *used gets how many bytes it took. */
static int data_bytes(rgit_packscan *s, const char *data, size_t len, size_t *used, rg_error *err)
{
    int zr;

    s->z.next_in = (unsigned char *)(uintptr_t)data;
    s->z.avail_in = (uInt)(len > UINT32_MAX ? UINT32_MAX : len);
    /* Bounded: every turn either takes input or fills the scratch buffer,
     * and inflated bytes are capped. */
    do {
        s->z.next_out = s->scratch;
        s->z.avail_out = sizeof(s->scratch);
        zr = inflate(&s->z, Z_NO_FLUSH);
        s->out += sizeof(s->scratch) - s->z.avail_out;
        s->inflated += sizeof(s->scratch) - s->z.avail_out;
        if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
            return bad(s, err, "corrupt object data");
        if (s->out > s->size)
            return bad(s, err, "object larger than its header says");
        if (s->inflated > s->max_inflated)
            return rg_error_set(err, RG_E_TOO_BIG,
                                "pack inflates past %llu bytes: refused as a zlib bomb",
                                (unsigned long long)s->max_inflated);
    } while (zr == Z_OK && (s->z.avail_in > 0 || s->z.avail_out == 0));
    *used = (size_t)(s->z.next_in - (const unsigned char *)data);
    if (zr != Z_STREAM_END)
        return 0;
    if (s->out != s->size)
        return bad(s, err, "object smaller than its header says");
    s->out = 0;
    inflateReset(&s->z);
    next_object(s);
    return 0;
}

int rgit_packscan_feed(rgit_packscan *s, const char *data, size_t len, rg_error *err)
{
    size_t i = 0, used = 0;
    int rc;

    /* Bounded: each turn consumes at least one byte, or ends an object
     * (whose stream then consumed its last bytes), or ends the pack. */
    while (i < len && s->state != ST_DONE) {
        if (s->state == ST_DATA) {
            rc = data_bytes(s, data + i, len - i, &used, err);
            used = rc < 0 ? 0 : used;
        } else {
            rc = header_byte(s, (unsigned char)data[i], err);
            used = 1;
        }
        if (rc < 0)
            return rc;
        i += used;
        s->pos += used;
        if (s->state == ST_TRAILER && !s->in_trailer) {
            s->in_trailer = 1;
            s->trailer_start = s->pos;
        }
    }
    return s->state == ST_DONE;
}

uint64_t rgit_packscan_safe(const rgit_packscan *s)
{
    return s->in_trailer ? s->trailer_start : s->pos;
}

uint64_t rgit_packscan_end(const rgit_packscan *s)
{
    return s->state == ST_DONE ? s->pos : 0;
}

void rgit_packscan_free(rgit_packscan *s)
{
    if (s == NULL)
        return;
    if (s->z_ready)
        inflateEnd(&s->z);
    free(s);
}
