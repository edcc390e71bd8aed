/* The fused step's int8 product for small models (fused.py packs their weights):
 *
 * Packed int8 (W_INT8_PACKED, for models small enough to keep this second copy) holds the same weights as
 * blocks of 16 rows, each block as groups of 4 inputs, each group 16 rows x 4 bytes (one 64-byte vector), stored as
 * w + 128; the input is quantised to signed bytes (the same integers as above, without the offset). One VNNI
 * instruction then adds 4 products to each of 16 outputs at once, the input's 4 bytes broadcast, so a k-token step
 * reads each weight vector once for up to 8 tokens and needs no reduction across lanes: the sum it finds is
 * sum (w + 128) x = sum w x + 128 sum x, and the input's sum takes the offset out. The integers, and so every output,
 * are those of the row layout bit for bit.
 *
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fused.h"
#ifdef __AVX512F__
#include <immintrin.h>
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define WAFERLINE_VNNI 1
#endif

typedef struct {
    float *y;
    int64_t ys, n;
    const uint8_t *xq; /* the quantised vectors, interleaved (below), and their scales and sums */
    const float *sx;
    const int32_t *xsum;
    const wl_matrix *m;
    int64_t n4; /* n_in rounded up to 4 */
} packed_ctx;

/* Where the packed product reads its vectors: in blocks of 8 vectors, each block as groups of 4 inputs, each group
 * the 8 vectors' 4 bytes side by side (32 bytes), so that every broadcast of a tile is one pointer plus a constant. */
static inline int8_t *interleaved(uint8_t *xq, int64_t t, int64_t groups) {
    return (int8_t *)xq + (t / 8) * groups * 32 + (t % 8) * 4;
}

/* x (n floats) -> q = round(x / s) as signed bytes at group stride 32 from `q` (interleaved), zero up to n4 inputs;
 * *sum = the sum of the q; returns s (as the row layout's). */
static float quantize_s8(int8_t *restrict q, int32_t *restrict sum, const float *restrict x, int64_t n, int64_t n4) {
    float inv;
    const float s = wl_quant_scale(x, n, &inv);
    int32_t total = 0;
    for (int64_t i0 = 0; i0 < n4; i0 += 64) { /* 64 inputs (16 groups) at a time through a buffer */
        uint8_t buf[64] = {0};
        const int64_t len = n - i0 < 64 ? (n - i0 > 0 ? n - i0 : 0) : 64;
        total += wl_quantize_bytes(buf, x + i0, len, inv, 0);
        const int64_t len4 = n4 - i0 < 64 ? n4 - i0 : 64;
        for (int64_t g = 0; g < len4 / 4; g++) memcpy(q + (i0 / 4 + g) * 32, buf + 4 * g, 4);
    }
    *sum = total;
    return s;
}

static inline int32_t load_i32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

#ifdef WAFERLINE_VNNI
/* B (1 or 2) packed blocks of 16 rows from output o against vectors t0..t0+NT-1 (NT <= 8), over the input groups
 * in W ways: B NT W (<= 16) chains of multiply-adds, enough to hide the instruction's latency, with each broadcast
 * input shared by the B blocks and each weight vector by the NT vectors (loads, not multiply-adds, bound this loop
 * when one of them is not shared). Then y = ((acc - 128 xsum) * sx) * scale (+ bias), as the row layout computes
 * it; rows past n_out (the last block's padding) are not stored. The chains are named variables: chain j is block
 * (j / NT) % B, vector j % NT, groups g = j / (B NT) (mod W). */
#define PACKED_STEP(j, chains, gw)                                                                                    \
    if ((j) < (chains))                                                                                               \
    a##j = _mm512_dpbusd_epi32(                                                                                       \
        a##j, _mm512_loadu_si512(blk + (((j) / NT) % B) * bstride + ((gw) + (j) / (B * NT)) * 64),                   \
        _mm512_set1_epi32(load_i32(x + ((gw) + (j) / (B * NT)) * 32 + ((j) % NT) * 4)))
#define PACKED_STEPS(chains, gw)                                                                                      \
    do {                                                                                                              \
        PACKED_STEP(0, chains, gw);                                                                                   \
        PACKED_STEP(1, chains, gw);                                                                                   \
        PACKED_STEP(2, chains, gw);                                                                                   \
        PACKED_STEP(3, chains, gw);                                                                                   \
        PACKED_STEP(4, chains, gw);                                                                                   \
        PACKED_STEP(5, chains, gw);                                                                                   \
        PACKED_STEP(6, chains, gw);                                                                                   \
        PACKED_STEP(7, chains, gw);                                                                                   \
        PACKED_STEP(8, chains, gw);                                                                                   \
        PACKED_STEP(9, chains, gw);                                                                                   \
        PACKED_STEP(10, chains, gw);                                                                                  \
        PACKED_STEP(11, chains, gw);                                                                                  \
        PACKED_STEP(12, chains, gw);                                                                                  \
        PACKED_STEP(13, chains, gw);                                                                                  \
        PACKED_STEP(14, chains, gw);                                                                                  \
        PACKED_STEP(15, chains, gw);                                                                                  \
    } while (0)

static inline __attribute__((always_inline)) void packed_tile(const packed_ctx *c, int64_t o, int64_t t0, const int NT,
                                                              const int B, const int W) {
    const wl_matrix *m = c->m;
    const int64_t groups = c->n4 / 4, bstride = groups * 64;
    const uint8_t *blk = (const uint8_t *)m->w + (o / 16) * bstride;
    const uint8_t *x = (const uint8_t *)interleaved((uint8_t *)c->xq, t0, groups); /* t0 is a multiple of 8 */
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    __m512i a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
    int64_t g = 0;
    /* the next tile's weights are fetched while this one computes (a k-token step of a model in L3 is bound by both
     * reading and multiplying; the hardware's own prefetch left them apart: 5-10% of the step) */
    const int64_t next = o + 16 * B, fetched = m->n_out - next < 16 * B ? m->n_out - next : 16 * B;
    const int ahead_blocks = fetched > 0 ? (int)((fetched + 15) / 16) : 0;
    const uint8_t *ahead = blk + B * bstride;
    for (; g + W <= groups; g += W) {
        for (int b = 0; b < ahead_blocks; b++)
            for (int w = 0; w < W; w++) _mm_prefetch((const char *)(ahead + b * bstride + (g + w) * 64), _MM_HINT_T0);
        PACKED_STEPS(B * NT * W, g);
    }
    for (; g < groups; g++) PACKED_STEPS(B * NT, g); /* the groups left over: the first way's chains */
    const __m512i acc[16] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15};
    for (int b = 0; b < B; b++) {
        const int64_t ob = o + 16 * b, left = m->n_out - ob;
        const __mmask16 mk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        const __m512 so = _mm512_maskz_loadu_ps(mk, m->scale + ob);
        const __m512 bias = m->bias ? _mm512_maskz_loadu_ps(mk, m->bias + ob) : _mm512_setzero_ps();
        for (int t = 0; t < NT; t++) {
            __m512i a = acc[b * NT + t];
            for (int w = 1; w < W; w++) a = _mm512_add_epi32(a, acc[(w * B + b) * NT + t]);
            const __m512i dot = _mm512_sub_epi32(a, _mm512_set1_epi32(128 * c->xsum[t0 + t]));
            __m512 yv = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(c->sx[t0 + t])), so);
            if (m->bias) yv = _mm512_add_ps(yv, bias);
            _mm512_mask_storeu_ps(c->y + (t0 + t) * c->ys + ob, mk, yv);
        }
    }
}
#undef PACKED_STEPS
#undef PACKED_STEP

/* Vectors t0.. (NT of them, <= 8) against B blocks at o, in PACKED_W ways: enough chains (8 to 16) to hide the
 * multiply-add's latency. Each case a tile compiled for its NT, B and W. */
#define PACKED_W(NT, B) ((B) == 2 ? ((NT) == 1 ? 4 : (NT) <= 3 ? 2 : 1) : ((NT) == 1 ? 8 : (NT) <= 3 ? 4 : 2))
#define PACKED_TILE(NT)                                                                                               \
    (B == 2 ? packed_tile(c, o, t0, NT, 2, PACKED_W(NT, 2)) : packed_tile(c, o, t0, NT, 1, PACKED_W(NT, 1)))
static inline void packed_tiles(const packed_ctx *c, int64_t o, int64_t t0, int64_t nt, int B) {
    switch (nt) {
    case 1: PACKED_TILE(1); break;
    case 2: PACKED_TILE(2); break;
    case 3: PACKED_TILE(3); break;
    case 4: PACKED_TILE(4); break;
    case 5: PACKED_TILE(5); break;
    case 6: PACKED_TILE(6); break;
    case 7: PACKED_TILE(7); break;
    default: PACKED_TILE(8); break;
    }
}
#undef PACKED_TILE
#undef PACKED_W
#endif

/* Blocks of 16 rows [begin, end) of a packed int8 product for all n vectors (begin a multiple of 16). */
static void packed_rows(const void *ctx_, int64_t begin, int64_t end) {
    const packed_ctx *c = (const packed_ctx *)ctx_;
#ifdef WAFERLINE_VNNI
    for (int64_t o = begin; o < end;) {
        const int B = end - o > 16 ? 2 : 1; /* two blocks at a time, the last one alone */
        for (int64_t t0 = 0; t0 < c->n; t0 += 8) packed_tiles(c, o, t0, c->n - t0 < 8 ? c->n - t0 : 8, B);
        o += 16 * B;
    }
#else
    for (int64_t o = begin; o < end; o += 16) {
        const wl_matrix *m = c->m;
        const uint8_t *blk = (const uint8_t *)m->w + (o / 16) * (c->n4 / 4) * 64;
        const int64_t rows = m->n_out - o < 16 ? m->n_out - o : 16;
        for (int64_t t = 0; t < c->n; t++) {
            const int8_t *x = interleaved((uint8_t *)c->xq, t, c->n4 / 4);
            for (int64_t r = 0; r < rows; r++) {
                int32_t acc = 0;
                for (int64_t i = 0; i < c->n4; i++)
                    acc += (int32_t)blk[(i / 4) * 64 + r * 4 + i % 4] * x[(i / 4) * 32 + i % 4];
                float yv = (float)(acc - 128 * c->xsum[t]) * c->sx[t] * m->scale[o + r];
                if (m->bias) yv += m->bias[o + r];
                c->y[t * c->ys + o + r] = yv;
            }
        }
    }
#endif
}


void wl_linear_packed(float *y, int64_t ys, const float *x, int64_t xs, int64_t n, const wl_matrix *m, uint8_t *xq,
                      float *sx, int64_t threads) {
    int32_t xsum[WL_MAX_VECTORS];
    const int64_t n4 = (m->n_in + 3) / 4 * 4;
    for (int64_t t = 0; t < n; t++)
        sx[t] = quantize_s8(interleaved(xq, t, n4 / 4), xsum + t, x + t * xs, m->n_in, n4);
    const packed_ctx ctx = {.y = y, .ys = ys, .n = n, .xq = xq, .sx = sx, .xsum = xsum, .m = m, .n4 = n4};
    wl_parallel(threads, packed_rows, &ctx, m->n_out, (WL_CHUNK_BYTES / n4 + 31) / 32 * 32); /* pairs of blocks */
}
