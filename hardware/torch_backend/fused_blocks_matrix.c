/* The fused step's products on a matrix of GGUF block formats (W_BLOCKS; fused_blocks.c says what the formats are):
 * its table of segments checked, each input vector quantised once as its rows' formats need (blocks of 32, Q8_K for
 * the K-quants, spread for the 8-row layouts), and its rows shared between threads in chunks, each row (two, or a
 * group of 8) handed to the product for its format: fused_blocks.c (blocks of 32), fused_blocks_x8.c and
 * fused_kquants_x8.c (8 rows interleaved), fused_kquants.c (K-quant rows). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "fused.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

typedef wl_q8_vec q8_vec; /* fused.h */

enum { MAX_SEGMENTS = 8 };
#ifndef PREFETCH_ROWS
#define PREFETCH_ROWS 8
#endif

int wl_prefetch_on = 1; /* fused.h */

/* Turn the products' software prefetch on (1) or off (0), or leave it (-1); returns the setting before. A setting
 * for the process, read as each block's lines are fetched: it changes no result, only which reads wait. */
int64_t waferline_set_prefetch(int64_t on) {
    const int64_t before = wl_prefetch_on;
    if (on >= 0) wl_prefetch_on = on != 0;
    return before;
}

typedef struct {
    float *y;
    int64_t ys, n, n_in;
    const float *x; /* the float vectors (BK_F32 rows), xs apart */
    int64_t xs;
    const q8_vec *v; /* per vector, its quantised form (spread, where the rows need it, for the calling thread) */
    const wl_matrix *m;
    uint64_t call;     /* this product's number among all products of blocks (a thread's own spread is for one) */
    int x8, kx8;       /* whether the vectors' spread forms are read */
    int64_t segs, kind[MAX_SEGMENTS], first[MAX_SEGMENTS + 1], offset[MAX_SEGMENTS], row_bytes[MAX_SEGMENTS];
} blocks_ctx;

static int64_t up16(int64_t n) { return (n + 15) / 16 * 16; }

/* The spread forms of the input vectors (wl_x8_spread, wl_kx8_spread) are 8 times the bytes of the quantised vector.
 * The calling thread spreads them into the step's scratch, where they stay in its own cache; every other thread that
 * takes a chunk spreads them again, once a product, into a buffer of its own, from the quantised vector (an eighth of
 * the bytes): read from the caller's scratch, they were 4.6 KB to 12 KB a product taken from the other core's cache,
 * and writing them there took the lines back from the threads that read them in the product before. */
static _Thread_local struct {
    uint64_t call;      /* the product whose vectors `vecs` points to (0: none) */
    const q8_vec *vecs; /* the caller's own (the product's), or a worker's: v, spread into buf */
    q8_vec v[WL_MAX_VECTORS];
    int8_t *buf;
    int64_t cap;
} own;
static _Atomic uint64_t calls;

static const q8_vec *thread_vectors(const blocks_ctx *c) {
    if (!c->x8 && !c->kx8) return c->v;
    if (own.call == c->call) return own.vecs;
    const int64_t n8 = 8 * up16(c->n_in), per = 2 * n8 + 2 * up16(c->n_in); /* e, the K-quants' e, m32 */
    if (per * c->n > own.cap) {
        int8_t *buf = aligned_alloc(64, (size_t)(per * c->n));
        if (buf == NULL) return c->v; /* the caller's spread forms: slower, the same numbers */
        free(own.buf);
        own.buf = buf, own.cap = per * c->n;
    }
    for (int64_t t = 0; t < c->n; t++) {
        own.v[t] = c->v[t];
        int8_t *e = own.buf + t * per;
        if (c->x8) wl_x8_spread(e, c->v[t].q, c->n_in), own.v[t].e = e;
        if (c->kx8) {
            int32_t *m32 = (int32_t *)(void *)(e + 2 * n8);
            wl_kx8_spread(e + n8, m32, c->v[t].k.q, c->v[t].k.bsum, c->n_in);
            own.v[t].k.e = e + n8, own.v[t].k.m32 = m32;
        }
    }
    own.call = c->call, own.vecs = own.v;
    return own.v;
}

static void block_rows(const void *ctx_, int64_t begin, int64_t end) {
    const blocks_ctx *c = (const blocks_ctx *)ctx_;
    const q8_vec *vecs = thread_vectors(c);
    const uint8_t *base = (const uint8_t *)c->m->w;
    int64_t s = 0;
    for (int64_t o = begin; o < end;) {
        while (o >= c->first[s + 1]) s++;
        const int64_t kind = c->kind[s], bytes = c->row_bytes[s];
        const uint8_t *row = base + c->offset[s] + (o - c->first[s]) * bytes;
        /* two rows at a time where both are of this segment and go in pairs (wl_rows32_pairs); 8 for the X8 layouts
         * (chunks of a multiple of 16 rows, segments of whole groups at multiples of 8: a group is never split) */
        const int R = wl_is_x8(kind) ? 8 : wl_rows32_pairs(kind) && o + 1 < end && o + 1 < c->first[s + 1] ? 2 : 1;
#if defined(__AVX2__)
        /* the hardware's prefetch alone left the products waiting on memory (a model of ~100 MB streams from
         * DRAM): fetch the rows PREFETCH_ROWS ahead while these compute */
        if (wl_prefetch_on && !wl_is_x8(kind) && o + R + PREFETCH_ROWS <= end) {
            const char *ahead = (const char *)row + PREFETCH_ROWS * bytes;
            for (int64_t i = 0; i < R * bytes; i += 64) _mm_prefetch(ahead + i, _MM_HINT_T0);
        }
#endif
        if (wl_is_x8(kind)) { /* written straight into y, 8 outputs a store */
            const float *b8 = c->m->bias ? c->m->bias + o : NULL;
            if (wl_is_kx8(kind))
                wl_kx8_dots(kind, row, vecs, c->n, c->n_in / 256, c->y + o, c->ys, b8);
            else
                wl_x8_dots(kind, row, vecs, c->n, c->n_in / 32, c->y + o, c->ys, b8);
            o += R;
            continue;
        }
        float dots[2][WL_MAX_VECTORS];
        if (wl_is_kquant(kind)) {
            wl_q8k_vec k[WL_MAX_VECTORS];
            for (int64_t t = 0; t < c->n; t++) k[t] = c->v[t].k;
            wl_kquant_dots(kind, row, k, c->n, c->n_in, dots[0]);
        } else {
            wl_rows32_dots(kind, row, bytes, R, c->v, c->x, c->xs, c->n, c->n_in, dots);
        }
        for (int r = 0; r < R; r++) {
            const float bias = c->m->bias ? c->m->bias[o + r] : 0.0f;
            for (int64_t t = 0; t < c->n; t++) c->y[t * c->ys + o + r] = dots[r][t] + bias;
        }
        o += R;
    }
}

int wl_blocks_valid(const int64_t *table, int64_t n_in, int64_t n_out) {
    if (table == NULL || table[0] < 1 || table[0] > MAX_SEGMENTS) return 0;
    int64_t rows = 0;
    for (int64_t i = 0; i < table[0]; i++) {
        const int64_t kind = table[1 + 2 * i], n = table[2 + 2 * i];
        if (n < 0 || (kind != BK_F32 && n_in % 32 != 0)) return 0;
        if (wl_block_row_bytes(kind, n_in) < 0) return 0;
        const int64_t x8 = kind == BK_Q8_0_X8 ? WL_X8_Q8_0 : wl_is_kx8(kind) ? WL_X8_KQUANT : WL_X8_FOUR_BIT;
        if (wl_is_x8(kind) && (!(waferline_blocks_x8() & x8) || rows % 8 != 0 || n % 8 != 0)) return 0; /* groups */
        rows += n;
    }
    return rows == n_out;
}

/* Per vector: q and p (n_in bytes each), d, s, sum (12 bytes per 32), then the K-quants' q (n_in), d (4 per 256)
 * and sums (2 per 16), then e (8 n_in: q spread for the X8 products), then the K-quants' q spread likewise (8 n_in)
 * and their 16-sums times -32 (2 n_in, wl_kx8_spread), each part starting at a multiple of 16 bytes */
int64_t wl_blocks_scratch_bytes(int64_t n_in) {
    return 21 * up16(n_in) + up16(n_in / 32 * 12) + up16(n_in / 256 * 4) + up16(n_in / 16 * 2) + 64;
}

void wl_linear_blocks(float *y, int64_t ys, const float *x, int64_t xs, int64_t n, const wl_matrix *m, uint8_t *xq,
                      int64_t threads) {
    const int64_t *table = (const int64_t *)(const void *)m->scale;
    blocks_ctx c = {.y = y, .ys = ys, .n = n, .n_in = m->n_in, .x = x, .xs = xs, .m = m, .segs = table[0]};
    int64_t row = 0, offset = 0, blocks32 = 0, four_bit = 0, kquants = 0, x8 = 0, kx8 = 0;
    for (int64_t i = 0; i < c.segs; i++) {
        c.kind[i] = table[1 + 2 * i];
        c.first[i] = row;
        c.offset[i] = offset;
        c.row_bytes[i] = wl_block_row_bytes(c.kind[i], m->n_in);
        row += table[2 + 2 * i];
        offset += table[2 + 2 * i] * c.row_bytes[i];
        kquants |= wl_is_kquant(c.kind[i]) || wl_is_kx8(c.kind[i]);
        kx8 |= wl_is_kx8(c.kind[i]);
        blocks32 |= c.kind[i] != BK_F32 && !wl_is_kquant(c.kind[i]) && !wl_is_kx8(c.kind[i]);
        four_bit |= c.kind[i] == BK_Q4_0 || c.kind[i] == BK_Q4_1;
        x8 |= wl_x8_reads_spread(c.kind[i]); /* narrow 8-row products read q itself: no spread */
    }
    c.first[c.segs] = row;
    q8_vec v[WL_MAX_VECTORS];
    const int64_t nb = m->n_in / 32, per = wl_blocks_scratch_bytes(m->n_in);
    for (int64_t t = 0; t < n && (blocks32 || kquants); t++) {
        uint8_t *at = xq + t * per;
        int8_t *q = (int8_t *)at, *p = (int8_t *)(at + up16(m->n_in)), *qk = (int8_t *)(at + 2 * up16(m->n_in));
        float *d = (float *)(void *)(at + 3 * up16(m->n_in)); /* xq and every part: multiples of 16 bytes */
        float *s = d + nb;
        int32_t *sum = (int32_t *)(void *)(s + nb);
        float *dk = (float *)(void *)((uint8_t *)d + up16(nb * 12));
        int16_t *bsum = (int16_t *)(void *)((uint8_t *)dk + up16(m->n_in / 256 * 4));
        int8_t *e = (int8_t *)(void *)((uint8_t *)bsum + up16(m->n_in / 16 * 2)), *ek = e + 8 * up16(m->n_in);
        v[t] = (q8_vec){.q = q, .p = NULL, .e = NULL, .d = d, .s = s, .sum = sum,
                        .k = {.q = qk, .d = dk, .bsum = bsum, .e = NULL, .m32 = NULL}};
        if (blocks32) {
            wl_quantize_q8(q, d, s, sum, x + t * xs, m->n_in);
            if (four_bit) wl_reorder_q4(p, q, nb), v[t].p = p;
            if (x8 && wl_x8_spread(e, q, m->n_in)) v[t].e = e;
        }
        if (kquants) wl_quantize_q8k(qk, dk, bsum, x + t * xs, m->n_in);
        int32_t *m32 = (int32_t *)(void *)(ek + 8 * up16(m->n_in));
        if (kx8 && wl_kx8_spread(ek, m32, qk, bsum, m->n_in)) v[t].k.e = ek, v[t].k.m32 = m32;
    }
    c.v = v;
    c.x8 = n > 0 && v[0].e != NULL, c.kx8 = n > 0 && v[0].k.e != NULL;
    c.call = atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed) + 1;
    if (c.x8 || c.kx8) own.call = c.call, own.vecs = v; /* this thread's chunks read the forms it has just spread */
    const int64_t bytes = c.row_bytes[0] > 0 ? c.row_bytes[0] : 1;
    wl_parallel(threads, block_rows, &c, m->n_out, (WL_CHUNK_BYTES / bytes + 15) / 16 * 16);
}

/* For tests and benchmarks: y (n x n_out, n_out apart) = W x for n vectors (n_in apart), W in block formats as the
 * step holds it. scratch: n * wl_blocks_scratch_bytes(n_in) bytes. Returns 1 (nothing done) for a bad table. */
int waferline_blocks_linear(float *y, const float *x, int64_t n, const void *w, const int64_t *table, int64_t n_in,
                            int64_t n_out, uint8_t *scratch, int64_t threads) {
    if (n < 1 || n > WL_MAX_VECTORS || !wl_blocks_valid(table, n_in, n_out)) return 1;
    const wl_matrix m = {.w = w, .scale = (const float *)(const void *)table, .rowsum = NULL, .bias = NULL,
                         .n_in = n_in, .n_out = n_out, .fmt = W_BLOCKS};
    wl_linear_blocks(y, n_out, x, n_in, n, &m, scratch, threads);
    return 0;
}

/* For tests: out (n x n_in) = rows `rows` of a one-format block matrix of n_rows rows, dequantised as the step reads
 * an embedding's. Returns 1 (nothing done) for a format it does not read or a row out of range. */
int waferline_blocks_rows(float *out, const void *w, int64_t kind, int64_t n_in, int64_t n_rows, const int64_t *rows,
                          int64_t n) {
    const int64_t bytes = wl_block_row_bytes(kind, n_in);
    if (bytes < 0 || (kind != BK_F32 && n_in % 32 != 0)) return 1;
    for (int64_t i = 0; i < n; i++)
        if (rows[i] < 0 || rows[i] >= n_rows) return 1;
    if (wl_is_x8(kind) && n_rows % 8 != 0) return 1;
    for (int64_t i = 0; i < n; i++) wl_block_table_row(out + i * n_in, (const uint8_t *)w, kind, n_in, rows[i]);
    return 0;
}
