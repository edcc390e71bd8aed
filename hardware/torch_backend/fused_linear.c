/* The fused step's matrix products, split between threads by output rows, and its vectorised exp.
 *
 * int8 weights are rows (out, in) with one float32 scale per row. A product quantises its input vector to 8 bits
 * too (one scale per vector, symmetric; stored as x + 128 so that AVX512-VNNI's unsigned-by-signed dot product
 * applies, with the weight row's sum taking the offset back out), then accumulates exactly in int32: one instruction
 * per 64 multiply-adds where the CPU has VNNI; with AVX2 alone (most AMD Zen and Intel client CPUs) 32 a step with
 * the input re-centred to signed bytes (centered_dot_avx2); a plain loop that computes the same integers elsewhere.
 * Sixteen rows are taken at a time, each read from start to end before the next (a model that does not fit in cache
 * streams from memory in address order, which the hardware prefetchers follow; reading the 16 rows side by side ran
 * at half the speed), and one transpose-and-add tree turns their 16 partial sums into 16 outputs.
 *
 * Packed int8 weights (W_INT8_PACKED) have their own product: fused_packed.c; GGUF blocks (W_BLOCKS) theirs:
 * fused_blocks.c.
 *
 * float32 weights are stored transposed (in, out), as the torch backend keeps them; each thread takes a range of
 * outputs and walks the weight rows across it.
 *
 * Every output is computed by one thread with the same arithmetic in the same order whatever the thread count and
 * however many vectors share the call, so n tokens in one call give the logits of n one-token calls bit for bit.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fused.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define WAFERLINE_VNNI 1
#elif defined(__AVX2__)
#define WAFERLINE_AVX2_INT8 1
#endif

/* What this build's int8 products run on (fused.py reads it: the packed layout only pays with VNNI). */
int64_t waferline_int8_features(void) {
#ifdef WAFERLINE_VNNI
    return WL_INT8_VNNI;
#elif defined(WAFERLINE_AVX2_INT8)
    return WL_INT8_AVX2;
#else
    return 0;
#endif
}


float wl_quant_scale(const float *restrict x, int64_t n, float *restrict inv) {
    float amax = 0.0f;
#pragma omp simd reduction(max : amax)
    for (int64_t i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    *inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    return amax / 127.0f;
}

/* q[i] = round(x[i] * inv) + offset as bytes (|round(x[i] * inv)| <= 127); returns the sum of the rounded values.
 * Rounding to nearest even, as lrintf in the default mode and the vector conversion both do. */
int32_t wl_quantize_bytes(uint8_t *restrict q, const float *restrict x, int64_t n, float inv, int32_t offset) {
    int64_t i = 0;
    int32_t total = 0;
#ifdef __AVX512F__
    __m512i acc = _mm512_setzero_si512();
    for (; i + 16 <= n; i += 16) {
        const __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(inv)));
        acc = _mm512_add_epi32(acc, r);
        _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtepi32_epi8(_mm512_add_epi32(r, _mm512_set1_epi32(offset))));
    }
    total = _mm512_reduce_add_epi32(acc);
#endif
    for (; i < n; i++) {
        const int32_t r = (int32_t)lrintf(x[i] * inv);
        q[i] = (uint8_t)(r + offset);
        total += r;
    }
    return total;
}

/* x (n floats) -> xq = round(x / s) + 128 as bytes, s = max|x| / 127; returns s (0 for an all-zero x). */
static float quantize_u8(uint8_t *restrict xq, const float *restrict x, int64_t n) {
    float inv;
    const float s = wl_quant_scale(x, n, &inv);
    wl_quantize_bytes(xq, x, n, inv, 128);
    return s;
}

/* sum_i xq[i] * row[i] in exact int32 arithmetic. */
static inline int32_t dot_u8s8(const uint8_t *restrict xq, const int8_t *restrict row, int64_t n) {
    int64_t i = 0;
    int32_t acc = 0;
#ifdef WAFERLINE_VNNI
    __m512i v = _mm512_setzero_si512();
    for (; i + 64 <= n; i += 64) v = _mm512_dpbusd_epi32(v, _mm512_loadu_si512(xq + i), _mm512_loadu_si512(row + i));
    acc = _mm512_reduce_add_epi32(v);
#endif
#pragma omp simd reduction(+ : acc)
    for (int64_t j = i; j < n; j++) acc += (int32_t)xq[j] * (int32_t)row[j];
    return acc;
}

#ifdef WAFERLINE_AVX2_INT8
/* sum_i (xq[i] - 128) * row[i] in exact int32 arithmetic with AVX2, 32 products an instruction: the input as signed
 * bytes (xq ^ 0x80 = xq - 128, at most 127 in size), the weight's sign moved onto it, so that maddubs multiplies
 * |w| (at most 128, unsigned) by a signed byte; a pair's sum is at most 2 * 128 * 127 = 32512, inside int16, so
 * nothing saturates, and madd with ones widens the pairs to int32. The same integer as dot_u8s8 - 128 * rowsum. */
static inline __m256i avx2_pairs(__m256i acc, __m256i x, __m256i w) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w)); /* int16, exact */
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
}

static inline int32_t centered_dot_avx2(const uint8_t *restrict xq, const int8_t *restrict row, int64_t n) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m256i x0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(xq + i)), flip);
        const __m256i x1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(xq + i + 32)), flip);
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(row + i));
        const __m256i w1 = _mm256_loadu_si256((const __m256i *)(row + i + 32));
        a0 = avx2_pairs(a0, x0, w0);
        a1 = avx2_pairs(a1, x1, w1);
    }
    for (; i + 32 <= n; i += 32) {
        const __m256i x0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(xq + i)), flip);
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(row + i));
        a0 = avx2_pairs(a0, x0, w0);
    }
    a0 = _mm256_add_epi32(a0, a1);
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a0), _mm256_extracti128_si256(a0, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    int32_t total = _mm_cvtsi128_si32(s);
    for (; i < n; i++) total += ((int32_t)xq[i] - 128) * (int32_t)row[i];
    return total;
}

/* centered_dot_avx2 for 4 rows `stride` bytes apart at once: each input vector loaded once for the 4 (the integers,
 * and so every output, are the one-row product's). */
static inline void centered_dot4_avx2(const uint8_t *restrict xq, const int8_t *restrict row, int64_t stride,
                                      int64_t n, int32_t *restrict out) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i x = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(xq + i)), flip);
        a0 = avx2_pairs(a0, x, _mm256_loadu_si256((const __m256i *)(row + i)));
        a1 = avx2_pairs(a1, x, _mm256_loadu_si256((const __m256i *)(row + stride + i)));
        a2 = avx2_pairs(a2, x, _mm256_loadu_si256((const __m256i *)(row + 2 * stride + i)));
        a3 = avx2_pairs(a3, x, _mm256_loadu_si256((const __m256i *)(row + 3 * stride + i)));
    }
    /* lane r of the 128-bit sum: row r's total (exact: integer additions in any order) */
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
    _mm_storeu_si128((__m128i *)(void *)out, _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
    for (; i < n; i++)
        for (int r = 0; r < 4; r++) out[r] += ((int32_t)xq[i] - 128) * (int32_t)row[r * stride + i];
}
#endif

#ifdef WAFERLINE_VNNI
/* Lane r of the result: the sum of a[r]'s 16 lanes (a transpose-and-add tree: ~3 instructions per row where one
 * horizontal sum takes ~10). */
static inline __m512i reduce16(const __m512i *a) {
    __m512i b[8], c[4];
    for (int i = 0; i < 8; i++)
        b[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]),
                                _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; i++) /* per 128-bit lane: the lane's partial sums of rows 4i..4i+3 */
        c[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(b[2 * i], b[2 * i + 1]),
                                _mm512_unpackhi_epi64(b[2 * i], b[2 * i + 1]));
    const __m512i p0 = _mm512_add_epi32(_mm512_shuffle_i32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                        _mm512_shuffle_i32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i p1 = _mm512_add_epi32(_mm512_shuffle_i32x4(c[2], c[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                        _mm512_shuffle_i32x4(c[2], c[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(p0, p1, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(p0, p1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Row `row`'s partial sums against xq as 16 int32 lanes (two chains of dot products, for the CPU's latency). */
static inline __m512i row_dot16(const uint8_t *restrict xq, const int8_t *restrict row, int64_t n_in) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0;
    int64_t i = 0;
    for (; i + 128 <= n_in; i += 128) {
        a0 = _mm512_dpbusd_epi32(a0, _mm512_loadu_si512(xq + i), _mm512_loadu_si512(row + i));
        a1 = _mm512_dpbusd_epi32(a1, _mm512_loadu_si512(xq + i + 64), _mm512_loadu_si512(row + i + 64));
    }
    for (; i < n_in; i += 64) {
        const __mmask64 m = n_in - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n_in - i)) - 1);
        a0 = _mm512_dpbusd_epi32(a0, _mm512_maskz_loadu_epi8(m, xq + i), _mm512_maskz_loadu_epi8(m, row + i));
    }
    return _mm512_add_epi32(a0, a1);
}
#endif

typedef struct {
    float *y;
    int64_t ys, n;
    const float *x; /* float32 products */
    int64_t xs;
    const uint8_t *xq; /* int8 products: the quantised vectors, n_in bytes apart, and their scales */
    const float *sx;
    const wl_matrix *m;
} linear_ctx;

#ifdef WAFERLINE_VNNI
/* Rows o..o+3 against NT (1..4) vectors from t0 on: 4 NT dot products that share their loads (4 weight and NT input
 * vectors per 4 NT multiply-adds, where one product at a time needs 2 loads per multiply-add), reduced together, then
 * y = ((dot - 128 rowsum) * sx) * scale (+ bias) per value, as int8_rows computes it. */
static inline __attribute__((always_inline)) void int8_tile(const linear_ctx *c, int64_t o, int64_t t0, const int NT) {
    const wl_matrix *m = c->m;
    const int64_t n_in = m->n_in;
    const int8_t *w = (const int8_t *)m->w + o * n_in;
    const uint8_t *x = c->xq + t0 * n_in;
    __m512i acc[16]; /* acc[4 t + r]: row o + r against vector t0 + t; unused ones stay 0 */
    for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_si512();
    for (int64_t i = 0; i < n_in; i += 64) {
        const __mmask64 mk = n_in - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n_in - i)) - 1);
        __m512i wv[4];
        for (int r = 0; r < 4; r++) wv[r] = _mm512_maskz_loadu_epi8(mk, w + r * n_in + i);
        for (int t = 0; t < NT; t++) {
            const __m512i xv = _mm512_maskz_loadu_epi8(mk, x + t * n_in + i);
            for (int r = 0; r < 4; r++) acc[4 * t + r] = _mm512_dpbusd_epi32(acc[4 * t + r], xv, wv[r]);
        }
    }
    /* lane 4 t + r of the sums: the 4 rows of vector t side by side, so that each vector's 4 outputs are 4 lanes */
    const __m512i lane_row = _mm512_set_epi32(3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0);
    const __m512i rowsum = _mm512_castsi128_si512(_mm_loadu_si128((const void *)(m->rowsum + o)));
    const __m512i off = _mm512_slli_epi32(_mm512_permutexvar_epi32(lane_row, rowsum), 7); /* 128 rowsum */
    const __m512i dot = _mm512_sub_epi32(reduce16(acc), off);
    const __m512 so = _mm512_permutexvar_ps(lane_row, _mm512_castps128_ps512(_mm_loadu_ps(m->scale + o)));
    __m512 sx = _mm512_setzero_ps();
    for (int t = 0; t < NT; t++)
        sx = _mm512_mask_mov_ps(sx, (__mmask16)(0xfu << (4 * t)), _mm512_set1_ps(c->sx[t0 + t]));
    __m512 yv = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dot), sx), so);
    if (m->bias) {
        const __m512 bias = _mm512_castps128_ps512(_mm_loadu_ps(m->bias + o));
        yv = _mm512_add_ps(yv, _mm512_permutexvar_ps(lane_row, bias));
    }
    float *y = c->y + t0 * c->ys + o; /* vector t's 4 outputs are the t-th 128 bits */
    _mm_storeu_ps(y, _mm512_castps512_ps128(yv));
    if (NT > 1) _mm_storeu_ps(y + c->ys, _mm512_extractf32x4_ps(yv, 1));
    if (NT > 2) _mm_storeu_ps(y + 2 * c->ys, _mm512_extractf32x4_ps(yv, 2));
    if (NT > 3) _mm_storeu_ps(y + 3 * c->ys, _mm512_extractf32x4_ps(yv, 3));
}
#endif

/* Rows [begin, end) of an int8 product for all n vectors (begin is a multiple of 16 but for the last chunk). */
static void int8_rows(const void *ctx_, int64_t begin, int64_t end) {
    const linear_ctx *c = (const linear_ctx *)ctx_;
    const wl_matrix *m = c->m;
    const int8_t *q = (const int8_t *)m->w;
    const int64_t n_in = m->n_in;
    int64_t o = begin;
#ifdef WAFERLINE_VNNI
    for (; o + 16 <= end; o += 16) {
        const __m512i off = _mm512_mullo_epi32(_mm512_loadu_si512(m->rowsum + o), _mm512_set1_epi32(128));
        const __m512 so = _mm512_loadu_ps(m->scale + o);
        /* the first vector reads the 16 rows from memory in address order; the others find them in L1 or L2 */
        __m512i acc[16];
        for (int r = 0; r < 16; r++) acc[r] = row_dot16(c->xq, q + (o + r) * n_in, n_in);
        const __m512i dot = _mm512_sub_epi32(reduce16(acc), off);
        __m512 yv = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(c->sx[0])), so);
        if (m->bias) yv = _mm512_add_ps(yv, _mm512_loadu_ps(m->bias + o));
        _mm512_storeu_ps(c->y + o, yv);
        for (int64_t r = 0; r < 16; r += 4) {
            int64_t t0 = 1;
            for (; t0 + 4 <= c->n; t0 += 4) int8_tile(c, o + r, t0, 4);
            switch (c->n - t0) {
            case 3: int8_tile(c, o + r, t0, 3); break;
            case 2: int8_tile(c, o + r, t0, 2); break;
            case 1: int8_tile(c, o + r, t0, 1); break;
            default: break;
            }
        }
    }
#endif
#ifdef WAFERLINE_AVX2_INT8
    for (; o + 4 <= end; o += 4) { /* 4 rows a step; a chunk's begin is a multiple of 16, so threads do not matter */
        for (int64_t t = 0; t < c->n; t++) {
            int32_t dot[4];
            centered_dot4_avx2(c->xq + t * n_in, q + o * n_in, n_in, n_in, dot);
            for (int r = 0; r < 4; r++) {
                float yv = (float)dot[r] * c->sx[t] * m->scale[o + r];
                if (m->bias) yv += m->bias[o + r];
                c->y[t * c->ys + o + r] = yv;
            }
        }
    }
#endif
    for (; o < end; o++) {
        const int8_t *row = q + o * n_in;
        const int32_t off = 128 * m->rowsum[o];
        for (int64_t t = 0; t < c->n; t++) {
#ifdef WAFERLINE_AVX2_INT8
            const int32_t dot = centered_dot_avx2(c->xq + t * n_in, row, n_in);
            (void)off;
#else
            const int32_t dot = dot_u8s8(c->xq + t * n_in, row, n_in) - off;
#endif
            float yv = (float)dot * c->sx[t] * m->scale[o];
            if (m->bias) yv += m->bias[o];
            c->y[t * c->ys + o] = yv;
        }
    }
}

/* float32 products. A thread takes a range of outputs and walks the weight rows 4 at a time, reading each row's part
 * of the range in address order (which the hardware prefetchers follow: blocks of outputs kept in registers while
 * reading across rows ran at ~2/3 of the speed in the fused step), and adds the 4 products to its sums, which stay
 * in L1: every output is fma(x_n, w_n, ... fma(x_0, w_0, 0)), in input order, whatever the range and the number of
 * vectors. With several vectors the range is cut into tiles of F32_TILE outputs so that all their sums fit in L1. */
enum { F32_TILE = 256 };

static void f32_range(const linear_ctx *c, int64_t o0, int64_t o1) {
    const wl_matrix *m = c->m;
    const float *wt = (const float *)m->w;
    const int64_t n_in = m->n_in, n_out = m->n_out, n = c->n;
    for (int64_t t = 0; t < n; t++) memset(c->y + t * c->ys + o0, 0, sizeof(float) * (size_t)(o1 - o0));
    for (int64_t i = 0; i < n_in; i += 4) {
        const int64_t k = n_in - i < 4 ? n_in - i : 4; /* rows this pass adds */
        const float *r0 = wt + i * n_out, *r1 = r0 + n_out, *r2 = r1 + n_out, *r3 = r2 + n_out;
        for (int64_t t = 0; t < n; t++) {
            const float *xt = c->x + t * c->xs + i;
            float *yt = c->y + t * c->ys;
            if (k == 4) {
                const float x0 = xt[0], x1 = xt[1], x2 = xt[2], x3 = xt[3];
                int64_t o = o0;
#ifdef __AVX512F__
                const __m512 v0 = _mm512_set1_ps(x0), v1 = _mm512_set1_ps(x1), v2 = _mm512_set1_ps(x2);
                const __m512 v3 = _mm512_set1_ps(x3);
                for (; o + 16 <= o1; o += 16) {
                    __m512 a = _mm512_loadu_ps(yt + o);
                    a = _mm512_fmadd_ps(v0, _mm512_loadu_ps(r0 + o), a);
                    a = _mm512_fmadd_ps(v1, _mm512_loadu_ps(r1 + o), a);
                    a = _mm512_fmadd_ps(v2, _mm512_loadu_ps(r2 + o), a);
                    _mm512_storeu_ps(yt + o, _mm512_fmadd_ps(v3, _mm512_loadu_ps(r3 + o), a));
                }
#endif
#pragma omp simd
                for (int64_t j = o; j < o1; j++)
                    yt[j] = fmaf(x3, r3[j], fmaf(x2, r2[j], fmaf(x1, r1[j], fmaf(x0, r0[j], yt[j]))));
            } else {
                for (int64_t r = 0; r < k; r++) {
                    const float xr = xt[r], *row = r0 + r * n_out;
#pragma omp simd
                    for (int64_t j = o0; j < o1; j++) yt[j] = fmaf(xr, row[j], yt[j]);
                }
            }
        }
    }
    if (m->bias)
        for (int64_t t = 0; t < n; t++) {
            float *yt = c->y + t * c->ys;
#pragma omp simd
            for (int64_t j = o0; j < o1; j++) yt[j] += m->bias[j];
        }
}

/* Outputs [begin, end) of a float32 product (W transposed, (in, out)) for all n vectors. */
static void f32_cols(const void *ctx_, int64_t begin, int64_t end) {
    const linear_ctx *c = (const linear_ctx *)ctx_;
    const int64_t tile = c->n == 1 ? end - begin : F32_TILE;
    for (int64_t o0 = begin; o0 < end; o0 += tile) f32_range(c, o0, o0 + tile < end ? o0 + tile : end);
}

void wl_linear(float *y, int64_t ys, const float *x, int64_t xs, int64_t n, const wl_matrix *m, uint8_t *xq,
               float *sx, int64_t threads) {
    if (m->fmt == W_INT8_PACKED) {
        wl_linear_packed(y, ys, x, xs, n, m, xq, sx, threads);
        return;
    }
    if (m->fmt == W_BLOCKS) {
        wl_linear_blocks(y, ys, x, xs, n, m, xq, threads);
        return;
    }
    const linear_ctx ctx = {.y = y, .ys = ys, .n = n, .x = x, .xs = xs, .xq = xq, .sx = sx, .m = m};
    if (m->fmt == W_INT8) {
        for (int64_t t = 0; t < n; t++) sx[t] = quantize_u8(xq + t * m->n_in, x + t * xs, m->n_in);
        const int64_t rows = (WL_CHUNK_BYTES / m->n_in + 15) / 16 * 16; /* whole blocks of 16 rows per chunk */
        wl_parallel(threads, int8_rows, &ctx, m->n_out, rows);
    } else {
        /* a few chunks per thread, each at least a tile wide (one vector: a wide range reads longer runs of a row) */
        int64_t cols = n == 1 ? m->n_out / (4 * (threads > 1 ? threads : 1)) : F32_TILE;
        cols = cols < F32_TILE ? F32_TILE : (cols + 63) / 64 * 64;
        wl_parallel(threads, f32_cols, &ctx, m->n_out, cols);
    }
}
