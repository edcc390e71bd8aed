/* The fused step's products on GGUF block-quantised weights, read as the file stores them (W_BLOCKS): a row (or two)
 * of blocks of 32 against the input vectors; fused_blocks_matrix.c takes a whole matrix through them.
 *
 * A matrix in block formats is its rows' bytes, one row after another, and a table of segments (consecutive rows of
 * one format: a fused q/k/v may mix Q4_K and Q6_K): int64 count, then per segment its format (ggml's type number,
 * BK_*) and its rows. A row of n_in inputs is n_in / 32 blocks (Q4_0: fp16 d, 16 bytes of 4-bit q, w = d (q - 8);
 * Q4_1: fp16 d and m, 16 bytes of q, w = d q + m; Q5_0: fp16 d, 4 bytes of fifth bits, 16 bytes of q, w = d (q -
 * 16); Q5_1: fp16 d and m, the fifth bits, q, w = d q + m; Q8_0: fp16 d, 32 signed bytes, w = d q), n_in / 256
 * K-quant super-blocks (Q4_K, Q5_K, Q6_K: fused_kquants.c), or float32 values (BK_F32, a matrix of a quantised file
 * stored unquantised). Within a block of 32, byte j holds input j in its low nibble and input j + 16 in its high
 * one, and bit j of the fifth bits belongs to input j.
 *
 * As llama.cpp does, a product first quantises its input vector to 8 bits in blocks of 32 (Q8_0/Q8_1: d = max|x| /
 * 127 rounded to fp16, q = round(x 127 / max|x|), and for Q4_1/Q5_1 s = d sum q rounded to fp16; per 256 for the
 * K-quants), then takes each block's dot product exactly in integers (AVX512-VNNI's or AVX-VNNI's
 * unsigned-by-signed byte dot product on 32 bytes, AVX2's multiply-add pairs, or a plain loop) and adds d_w d_x dot
 * (+ m_w s_x) in float32. Every output is one row's dot product computed by one thread in one order, whatever the
 * thread count or the number of vectors.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fused.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define BLOCKS_DPBUSD(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#elif defined(__AVXVNNI__)
#define BLOCKS_DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#elif defined(__AVX2__)
#define BLOCKS_DPBUSD(acc, u, s) \
    _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1)))
#endif


typedef wl_q8_vec q8_vec; /* fused.h */

/* q (nb blocks of 32) -> p: per group of 4 blocks, [block j inputs 0..15 for j < 4] then [inputs 16..31 for j < 4] */
static void reorder_q4(int8_t *restrict p, const int8_t *restrict q, int64_t nb) {
    for (int64_t g = 0; g + 4 <= nb; g += 4)
        for (int j = 0; j < 4; j++) {
            memcpy(p + 32 * g + 16 * j, q + 32 * (g + j), 16);
            memcpy(p + 32 * g + 64 + 16 * j, q + 32 * (g + j) + 16, 16);
        }
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__)
#define BLOCKS_512 1
static inline int32_t load_u32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The first 4 * groups blocks of a 4-bit row (blocks `bytes` apart, their 16 bytes of q last) against v->p, four
 * blocks per step: their 64 bytes of q in one register (block j in 128-bit lane j), low nibbles against the 4
 * blocks' first 16 inputs and high nibbles against their last 16, exact int32 sums per lane; then each lane times
 * d_w d_x of its block, in float32 (Q4_0: 8 sum q_x subtracted in the block's first lane first; Q4_1: m_w s_x added
 * per block). Adds into *acc (8 lanes) and *extra; returns the blocks done. */
static int64_t q4_groups(__m256 *acc, float *extra, int with_min, const uint8_t *restrict row, int64_t bytes,
                         const q8_vec *v, int64_t groups) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    const __m512i lane_block = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m128i pick = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15); /* d's, then m's */
    __m512 a = _mm512_setzero_ps();
    __m128 mins = _mm_setzero_ps();
    const int64_t qoff = bytes - 16;
    for (int64_t g = 0; g < groups; g++) {
        const uint8_t *blk = row + 4 * g * bytes;
        __m512i raw = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)(blk + qoff)));
        raw = _mm512_inserti32x4(raw, _mm_loadu_si128((const __m128i *)(const void *)(blk + bytes + qoff)), 1);
        raw = _mm512_inserti32x4(raw, _mm_loadu_si128((const __m128i *)(const void *)(blk + 2 * bytes + qoff)), 2);
        raw = _mm512_inserti32x4(raw, _mm_loadu_si128((const __m128i *)(const void *)(blk + 3 * bytes + qoff)), 3);
        const int8_t *x = v->p + 128 * g;
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(raw, low),
                                          _mm512_loadu_si512((const void *)x));
        dot = _mm512_dpbusd_epi32(dot, _mm512_and_si512(_mm512_srli_epi16(raw, 4), low),
                                  _mm512_loadu_si512((const void *)(x + 64)));
        const __m128i heads = _mm_setr_epi32(load_u32(blk), load_u32(blk + bytes), load_u32(blk + 2 * bytes),
                                             load_u32(blk + 3 * bytes));
        const __m256 dm = _mm256_cvtph_ps(_mm_shuffle_epi8(heads, pick)); /* d0..d3 (then m0..m3 for Q4_1) */
        const __m128 dw = _mm256_castps256_ps128(dm), dx = _mm_loadu_ps(v->d + 4 * g);
        if (with_min) {
            mins = _mm_fmadd_ps(_mm256_extractf128_ps(dm, 1), _mm_loadu_ps(v->s + 4 * g), mins);
        } else { /* 8 sum q_x in lane 4 j of block j */
            const __m128i off = _mm_slli_epi32(_mm_loadu_si128((const __m128i *)(const void *)(v->sum + 4 * g)), 3);
            dot = _mm512_sub_epi32(dot, _mm512_maskz_permutexvar_epi32(0x1111, lane_block, _mm512_castsi128_si512(off)));
        }
        const __m512 scale = _mm512_permutexvar_ps(lane_block, _mm512_castps128_ps512(_mm_mul_ps(dw, dx)));
        a = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(dot), a);
    }
    *acc = _mm256_add_ps(*acc, _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1)));
    const __m128 h = _mm_add_ps(mins, _mm_movehl_ps(mins, mins));
    *extra += _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
    return 4 * groups;
}

/* The first 4 * groups blocks of a Q8_0 row against v->q, four blocks per step in two registers (two blocks each):
 * VNNI takes unsigned by signed bytes, so the weights go in as w + 128 (a sign flip) and 128 sum q_x per block
 * comes back out of the block's first lane, exactly; then each lane times d_w d_x of its block. */
static int64_t q8_groups(__m256 *acc, const uint8_t *restrict row, const q8_vec *v, int64_t groups) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i lo = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i hi = _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m128i pick = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 0, 1, 4, 5, 8, 9, 12, 13);
    __m512 a = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; g++) {
        const uint8_t *blk = row + 4 * g * 34;
        const int8_t *x = v->q + 128 * g;
        __m512i w0 = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(blk + 2)));
        w0 = _mm512_inserti64x4(w0, _mm256_loadu_si256((const __m256i *)(const void *)(blk + 36)), 1);
        __m512i w1 = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(blk + 70)));
        w1 = _mm512_inserti64x4(w1, _mm256_loadu_si256((const __m256i *)(const void *)(blk + 104)), 1);
        __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(w0, flip),
                                         _mm512_loadu_si512((const void *)x));
        __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(w1, flip),
                                         _mm512_loadu_si512((const void *)(x + 64)));
        const __m512i off = _mm512_castsi128_si512(
            _mm_slli_epi32(_mm_loadu_si128((const __m128i *)(const void *)(v->sum + 4 * g)), 7));
        d0 = _mm512_sub_epi32(d0, _mm512_maskz_permutexvar_epi32(0x0101, lo, off));
        d1 = _mm512_sub_epi32(d1, _mm512_maskz_permutexvar_epi32(0x0101, hi, off));
        const __m128i heads = _mm_setr_epi32(load_u32(blk), load_u32(blk + 34), load_u32(blk + 68),
                                             load_u32(blk + 102));
        const __m128 dw = _mm_cvtph_ps(_mm_shuffle_epi8(heads, pick));
        const __m512 s4 = _mm512_castps128_ps512(_mm_mul_ps(dw, _mm_loadu_ps(v->d + 4 * g)));
        a = _mm512_fmadd_ps(_mm512_permutexvar_ps(lo, s4), _mm512_cvtepi32_ps(d0), a);
        a = _mm512_fmadd_ps(_mm512_permutexvar_ps(hi, s4), _mm512_cvtepi32_ps(d1), a);
    }
    *acc = _mm256_add_ps(*acc, _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1)));
    return 4 * groups;
}
#endif

#ifdef BLOCKS_DPBUSD
/* One block of 32 loaded for the integer dot: w the unsigned bytes the dot multiplies (Q4_1, Q5_1: q; Q4_0, Q5_0,
 * Q8_0: |q - zero|), sign the signed weights whose signs x takes on (q - zero: Q4_0 8, Q5_0 16, Q8_0 0), dw the
 * block's scale. sum (q - zero) x is then sum |q - zero| (x with q - zero's sign), exactly: no correction after. */
typedef struct {
    __m256i w, sign;
    float dw;
} block32;

/* the 32 bits as bytes: 0x10 where a bit is set (the fifth bit of Q5_0/Q5_1's q), else 0 */
static inline __m256i fifth_bits(const uint8_t *p) {
    uint32_t bits;
    memcpy(&bits, p, 4);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_maskz_mov_epi8((__mmask32)bits, _mm256_set1_epi8(0x10));
#else
    /* byte j gets byte j / 8 of the bits, keeps its bit j % 8, and is compared with that bit */
    const __m256i which = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                           3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
    const __m256i spread = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), which), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(spread, bit), _mm256_set1_epi8(0x10));
#endif
}

static inline block32 block32_load(int64_t kind, const uint8_t *blk, int64_t bytes) {
    block32 k = {.dw = wl_f16_at(blk)};
    if (kind == BK_Q8_0) {
        k.sign = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2));
    } else {
        const __m128i raw = _mm_loadu_si128((const __m128i *)(const void *)(blk + bytes - 16));
        k.w = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
        if (kind == BK_Q5_0 || kind == BK_Q5_1) k.w = _mm256_or_si256(k.w, fifth_bits(blk + bytes - 20));
        if (wl_with_min(kind)) return k;
        k.sign = _mm256_sub_epi8(k.w, _mm256_set1_epi8(kind == BK_Q4_0 ? 8 : 16));
    }
    k.w = _mm256_sign_epi8(k.sign, k.sign); /* |q - zero| (Q8_0's -128 stays 0x80: 128 unsigned) */
    return k;
}

/* the block's exact integer dot with 32 bytes of x, in 8 int32 lanes */
static inline __m256i block32_int(const block32 *k, int64_t kind, __m256i xv) {
    if (!wl_with_min(kind)) xv = _mm256_sign_epi8(xv, k->sign);
    return BLOCKS_DPBUSD(_mm256_setzero_si256(), k->w, xv);
}

static inline float hsum8(__m256 a) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 h2 = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
}

/* R rows (of one format of blocks of 32) by V vectors: acc[r][t] += d_w d_x (w . x) per block, in one accumulator
 * per row and vector, the blocks in order; each block loaded and unpacked once for the V vectors, each vector's
 * block loaded once for the R rows. R and V are constants where it is inlined, so the R V accumulators stay in
 * registers. The order of every (row, vector)'s operations is the same whatever R and V, so a sum does not depend
 * on which rows or how many vectors came with it. */
static inline __attribute__((always_inline)) void tile(int64_t kind, const uint8_t *const *rows, int R,
                                                      const q8_vec *v, int V, int64_t nb, int64_t bytes,
                                                      float *out, int64_t out_stride) {
    __m256 acc[2][4];
    float e[2][4]; /* Q4_1's and Q5_1's m_w s_x */
    for (int r = 0; r < R; r++)
        for (int t = 0; t < V; t++) acc[r][t] = _mm256_setzero_ps(), e[r][t] = 0.0f;
    const int min = wl_with_min(kind);
    for (int64_t b = 0; b < nb; b++) {
        block32 k[2];
        float m[2] = {0.0f, 0.0f};
        for (int r = 0; r < R; r++) {
            k[r] = block32_load(kind, rows[r] + bytes * b, bytes);
            if (min) m[r] = wl_f16_at(rows[r] + bytes * b + 2);
        }
        for (int t = 0; t < V; t++) {
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(v[t].q + 32 * b));
            const __m256 dx = _mm256_broadcast_ss(v[t].d + b);
            for (int r = 0; r < R; r++) {
                const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(k[r].dw), dx);
                acc[r][t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(block32_int(&k[r], kind, xv)), acc[r][t]);
                if (min) e[r][t] += m[r] * v[t].s[b];
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < V; t++) out[r * out_stride + t] = hsum8(acc[r][t]) + e[r][t];
}

#define TILE_V 4
/* out[r * WL_MAX_VECTORS + t] = rows[r] . v[t] for R (1 or 2) rows of `kind` and n vectors, by tiles of R rows and
 * up to TILE_V vectors */
static void rows_dots(int64_t kind, const uint8_t *const *rows, int R, const q8_vec *v, int64_t n, int64_t n_in,
                      float *out) {
    const int64_t nb = n_in / 32, bytes = wl_block_row_bytes(kind, 32);
    for (int64_t t0 = 0; t0 < n; t0 += TILE_V) {
        const int64_t V = n - t0 < TILE_V ? n - t0 : TILE_V;
        float *o = out + t0;
#define TILE_CASE(r, vv) \
    case (r) * 8 + (vv): tile(kind, rows, (r), v + t0, (vv), nb, bytes, o, WL_MAX_VECTORS); break
        switch (R * 8 + V) {
            TILE_CASE(1, 1); TILE_CASE(1, 2); TILE_CASE(1, 3); TILE_CASE(1, 4);
            TILE_CASE(2, 1); TILE_CASE(2, 2); TILE_CASE(2, 3); TILE_CASE(2, 4);
        default: break;
        }
#undef TILE_CASE
    }
}
#endif

/* row . x for one row of `kind` (a format of blocks of 32, or float) against one quantised (or the float) vector,
 * where rows_dots does not take it: float rows, no AVX2, and with AVX-512 Q4_0, Q4_1 and Q8_0 (four blocks a step) */
static float row_dot(int64_t kind, const uint8_t *restrict row, const q8_vec *v, const float *restrict xf,
                     int64_t n_in) {
    const int64_t nb = n_in / 32;
    if (kind == BK_F32) {
        float acc = 0.0f;
        const float *w = (const float *)(const void *)row;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < n_in; i++) acc += w[i] * xf[i];
        return acc;
    }
    const int64_t bytes = wl_block_row_bytes(kind, 32);
#ifdef BLOCKS_DPBUSD
    __m256 acc = _mm256_setzero_ps();
    float extra = 0.0f; /* Q4_1's m_w s_x */
    int64_t b = 0;
#ifdef BLOCKS_512
    if (kind == BK_Q8_0)
        b = q8_groups(&acc, row, v, nb / 4);
    else if ((kind == BK_Q4_0 || kind == BK_Q4_1) && v->p != NULL)
        b = q4_groups(&acc, &extra, kind == BK_Q4_1, row, bytes, v, nb / 4);
#endif
    for (; b < nb; b++) {
        const block32 k = block32_load(kind, row + bytes * b, bytes);
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(v->q + 32 * b));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(k.dw * v->d[b]), _mm256_cvtepi32_ps(block32_int(&k, kind, xv)), acc);
        if (wl_with_min(kind)) extra += wl_f16_at(row + bytes * b + 2) * v->s[b];
    }
    return hsum8(acc) + extra;
#else
    float acc = 0.0f;
    const int zero = kind == BK_Q4_0 ? 8 : kind == BK_Q5_0 ? 16 : 0;
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *x = v->q + 32 * b;
        const uint8_t *blk = row + bytes * b;
        int32_t dot = 0;
        if (kind == BK_Q8_0) {
            for (int j = 0; j < 32; j++) dot += (int32_t)(int8_t)blk[2 + j] * x[j];
        } else {
            const uint8_t *qs = blk + bytes - 16;
            uint32_t fifth = 0;
            if (kind == BK_Q5_0 || kind == BK_Q5_1) memcpy(&fifth, blk + bytes - 20, 4);
            for (int j = 0; j < 16; j++)
                dot += ((qs[j] & 0xf) | (int32_t)((fifth >> j) & 1) << 4) * x[j] +
                       ((qs[j] >> 4) | (int32_t)((fifth >> (j + 16)) & 1) << 4) * x[j + 16];
            dot -= zero * v->sum[b];
        }
        acc += wl_f16_at(blk) * v->d[b] * (float)dot;
        if (wl_with_min(kind)) acc += wl_f16_at(blk + 2) * v->s[b];
    }
    return acc;
#endif
}

/* Whether a row of `kind` goes through rows_dots (in pairs of rows, for every vector count) */
static inline int tiled(int64_t kind) {
#ifndef BLOCKS_DPBUSD
    (void)kind;
    return 0;
#elif defined(BLOCKS_512)
    return kind != BK_F32 && !wl_is_kquant(kind) && kind != BK_Q4_0 && kind != BK_Q4_1 && kind != BK_Q8_0;
#else
    return kind != BK_F32 && !wl_is_kquant(kind);
#endif
}

/* For fused_blocks_matrix.c (fused.h): whether rows of `kind` are taken two at a time, and their dots with n vectors
 * (dots[r][t], r < R; R = 2 only where wl_rows32_pairs) */
int wl_rows32_pairs(int64_t kind) { return tiled(kind); }

void wl_rows32_dots(int64_t kind, const uint8_t *row, int64_t bytes, int R, const wl_q8_vec *v, const float *x,
                    int64_t xs, int64_t n, int64_t n_in, float dots[2][WL_MAX_VECTORS]) {
#ifdef BLOCKS_DPBUSD
    if (tiled(kind)) {
        const uint8_t *rows[2] = {row, row + bytes};
        rows_dots(kind, rows, R, v, n, n_in, dots[0]);
        return;
    }
#endif
    (void)bytes, (void)R;
    for (int64_t t = 0; t < n; t++) dots[0][t] = row_dot(kind, row, &v[t], x + t * xs, n_in);
}

void wl_reorder_q4(int8_t *restrict p, const int8_t *restrict q, int64_t nb) { reorder_q4(p, q, nb); }
