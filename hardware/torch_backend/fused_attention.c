/* The fused step's attention (fused.h: wl_attend_group): the queries of n tokens against one KV head's cached keys
 * and values, each block of 16 keys and 16 value rows read once for all of them.
 *
 * Numerics: float32; every query's scores and sums are the same operations in the same order whether it comes alone
 * (a one-token step) or with others (a k-token step), so the two give the same floats. The scores and the value sums
 * of the vector paths are fused multiply-adds, and so is the scalar loop that stands in for the vector scores where
 * a step's queries do not fit their buffer (so the two round alike); the scalar value sums (head widths that are
 * not a multiple of 16, for every step alike) are a multiply and an add (-ffp-contract=off).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fused.h"
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#define ATTN_VEC 1 /* the vector scores and value sums below (AVX-512, else AVX2) */
#endif

/* The largest of v[0..n) (n >= 1); exact in any order. */
static float max_of(const float *restrict v, int64_t n) {
    float mx = v[0];
#pragma omp simd reduction(max : mx)
    for (int64_t i = 0; i < n; i++) mx = v[i] > mx ? v[i] : mx;
    return mx;
}

static inline const float *kv_row(const void *kv, int64_t fmt, int64_t at, int64_t D, float *restrict out) {
    if (fmt != KV_BF16) return (const float *)kv + at;
    const uint16_t *r = (const uint16_t *)kv + at;
#pragma omp simd
    for (int64_t i = 0; i < D; i++) out[i] = bf16_to_f32(r[i]);
    return out;
}

#ifdef __AVX512F__
/* r[k] (16 floats each, k < 16) -> out[e * 16 + k] = r[k][e]: a 16 x 16 transpose in registers (unpack pairs, then
 * 64-bit pairs, then 128-bit lanes twice), which moves the same floats as the scalar copy. */
static inline void transpose16(const __m512 *r, float *restrict out) {
    __m512 t[16], s[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) { /* s[4i + m], 128-bit lane l: element 4l + m of keys 4i..4i+3 */
        const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
        const __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
        s[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        s[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        s[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        s[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    for (int m = 0; m < 4; m++) {
        const __m512 v0 = _mm512_shuffle_f32x4(s[m], s[4 + m], 0x88), v1 = _mm512_shuffle_f32x4(s[m], s[4 + m], 0xdd);
        const __m512 w0 = _mm512_shuffle_f32x4(s[8 + m], s[12 + m], 0x88);
        const __m512 w1 = _mm512_shuffle_f32x4(s[8 + m], s[12 + m], 0xdd);
        _mm512_storeu_ps(out + m * 16, _mm512_shuffle_f32x4(v0, w0, 0x88));
        _mm512_storeu_ps(out + (4 + m) * 16, _mm512_shuffle_f32x4(v1, w1, 0x88));
        _mm512_storeu_ps(out + (8 + m) * 16, _mm512_shuffle_f32x4(v0, w0, 0xdd));
        _mm512_storeu_ps(out + (12 + m) * 16, _mm512_shuffle_f32x4(v1, w1, 0xdd));
    }
}
#endif

/* The nb (<= 16) cached rows at `at`, `at + D`, ... (keys) transposed into row[i * 16 + tt], zeros past nb. */
static void key_block(float *restrict row, const void *kv, int64_t fmt, int64_t at, int64_t nb, int64_t D) {
#ifdef __AVX512F__
    if (D % 16 == 0) {
        for (int64_t c = 0; c < D; c += 16) {
            __m512 r[16];
            for (int64_t tt = 0; tt < 16; tt++) {
                if (tt >= nb) {
                    r[tt] = _mm512_setzero_ps();
                } else if (fmt == KV_BF16) { /* bfloat16 -> float32: the bits shifted up, as bf16_to_f32 */
                    const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)kv + at + tt * D + c));
                    r[tt] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
                } else {
                    r[tt] = _mm512_loadu_ps((const float *)kv + at + tt * D + c);
                }
            }
            transpose16(r, row + c * 16);
        }
        return;
    }
#endif
    for (int64_t tt = 0; tt < nb; tt++) {
        if (fmt == KV_BF16) {
            const uint16_t *r = (const uint16_t *)kv + at + tt * D;
            for (int64_t i = 0; i < D; i++) row[i * 16 + tt] = bf16_to_f32(r[i]);
        } else {
            const float *r = (const float *)kv + at + tt * D;
            for (int64_t i = 0; i < D; i++) row[i * 16 + tt] = r[i];
        }
    }
    for (int64_t tt = nb; tt < 16; tt++)
        for (int64_t i = 0; i < D; i++) row[i * 16 + tt] = 0.0f;
}

/* o[0..D) += sum over p of w[p] * v[p * D ..], p = 0..np in order: per element the same additions in the same order
 * as one row at a time, 16 outputs held in registers across the rows instead of read and written for each. */
static inline void add_weighted_rows(float *restrict o, const float *restrict w, const float *restrict v, int64_t np,
                                     int64_t D) {
    int64_t i0 = 0;
    for (; i0 + 16 <= D; i0 += 16) {
        float acc[16];
        memcpy(acc, o + i0, sizeof acc);
        for (int64_t p = 0; p < np; p++) {
            const float wp = w[p], *vp = v + p * D + i0;
#pragma omp simd
            for (int64_t i = 0; i < 16; i++) acc[i] += wp * vp[i];
        }
        memcpy(o + i0, acc, sizeof acc);
    }
    for (int64_t p = 0; p < np && i0 < D; p++) {
        const float wp = w[p], *vp = v + p * D;
        for (int64_t i = i0; i < D; i++) o[i] += wp * vp[i];
    }
}

enum { QT_FLOATS = 16384 }; /* queries x head width the vector scores take (more: the scalar loop) */

#ifdef __AVX512F__
/* NQ (<= 8) queries against a transposed block of 16 keys (row: D x 16): query j's 16 scores, times `scale`, the
 * first cnt[j] of them stored at dst[j]. qt holds the queries transposed (qt[i * 8 + j]: element i of query j), so
 * that every broadcast is one pointer plus a constant. The same multiplies and adds in the same order as one query
 * at a time; taken together, their NQ chains of additions overlap instead of each waiting for the one before. */
#define SCORE(j)                                                                                                      \
    if ((j) < NQ) a##j = _mm512_fmadd_ps(_mm512_set1_ps(qt[i * 8 + (j)]), k, a##j)
static inline __attribute__((always_inline)) void block_scores(const float *restrict qt, float *const *dst,
                                                               const int64_t *cnt, const int NQ,
                                                               const float *restrict row, int64_t D, float scale) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int64_t i = 0; i < D; i++) {
        const __m512 k = _mm512_loadu_ps(row + i * 16);
        SCORE(0);
        SCORE(1);
        SCORE(2);
        SCORE(3);
        SCORE(4);
        SCORE(5);
        SCORE(6);
        SCORE(7);
    }
    const __m512 a[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    for (int j = 0; j < NQ; j++)
        _mm512_mask_storeu_ps(dst[j], (__mmask16)((1u << cnt[j]) - 1), _mm512_mul_ps(a[j], _mm512_set1_ps(scale)));
}
#undef SCORE

static void block_scores_n(const float *restrict qt, float *const *dst, const int64_t *cnt, int nq,
                           const float *restrict row, int64_t D, float scale) {
    switch (nq) {
    case 1: block_scores(qt, dst, cnt, 1, row, D, scale); break;
    case 2: block_scores(qt, dst, cnt, 2, row, D, scale); break;
    case 3: block_scores(qt, dst, cnt, 3, row, D, scale); break;
    case 4: block_scores(qt, dst, cnt, 4, row, D, scale); break;
    case 5: block_scores(qt, dst, cnt, 5, row, D, scale); break;
    case 6: block_scores(qt, dst, cnt, 6, row, D, scale); break;
    case 7: block_scores(qt, dst, cnt, 7, row, D, scale); break;
    case 8: block_scores(qt, dst, cnt, 8, row, D, scale); break;
    default: break;
    }
}

/* NO (<= 4) outputs o[j][0..D) += sum over p < np of w[j][p] * v[p * D ..], D a multiple of 16: add_weighted_rows
 * for each, every value row read once for all of them and their chains of additions overlapping. wt holds the
 * weights transposed (wt[p * 4 + j]). */
#define WROW(j)                                                                                                       \
    if ((j) < NO) {                                                                                                   \
        const __m512 wp = _mm512_set1_ps(wt[p * 4 + (j)]);                                                            \
        a##j##0 = _mm512_fmadd_ps(wp, v0, a##j##0);                                                      \
        if (C == 2) a##j##1 = _mm512_fmadd_ps(wp, v1, a##j##1);                                          \
    }
#define WSTORE(j)                                                                                                     \
    if ((j) < NO) {                                                                                                   \
        _mm512_storeu_ps(o[j] + i0, a##j##0);                                                                         \
        if (C == 2) _mm512_storeu_ps(o[j] + i0 + 16, a##j##1);                                                        \
    }
static inline __attribute__((always_inline)) void add_weighted_rows_n(float *const *o, const float *restrict wt,
                                                                      const int NO, const float *restrict v,
                                                                      int64_t np, int64_t D) {
    for (int64_t i0 = 0; i0 < D; i0 += 32) {
        const int C = i0 + 32 <= D ? 2 : 1; /* 16-float chunks of each output taken at once */
        const __m512 z = _mm512_setzero_ps();
        __m512 a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
        if (NO > 0) a00 = _mm512_loadu_ps(o[0] + i0), a01 = C == 2 ? _mm512_loadu_ps(o[0] + i0 + 16) : z;
        if (NO > 1) a10 = _mm512_loadu_ps(o[1] + i0), a11 = C == 2 ? _mm512_loadu_ps(o[1] + i0 + 16) : z;
        if (NO > 2) a20 = _mm512_loadu_ps(o[2] + i0), a21 = C == 2 ? _mm512_loadu_ps(o[2] + i0 + 16) : z;
        if (NO > 3) a30 = _mm512_loadu_ps(o[3] + i0), a31 = C == 2 ? _mm512_loadu_ps(o[3] + i0 + 16) : z;
        for (int64_t p = 0; p < np; p++) {
            const __m512 v0 = _mm512_loadu_ps(v + p * D + i0);
            const __m512 v1 = C == 2 ? _mm512_loadu_ps(v + p * D + i0 + 16) : v0;
            WROW(0)
            WROW(1)
            WROW(2)
            WROW(3)
        }
        /* stored variable by variable: an array of them, stored in a loop, became calls to memcpy */
        WSTORE(0)
        WSTORE(1)
        WSTORE(2)
        WSTORE(3)
    }
}
#undef WROW
#undef WSTORE
#elif defined(ATTN_VEC)
/* AVX2 forms of the two above, the same arithmetic as the scalar loops they stand in for on this build: NQ (<= 8)
 * queries' scores four at a time (each 16 scores in two registers, qt as above), and NO (<= 4) outputs' value sums
 * as a multiply and an add, as add_weighted_rows rounds them (AVX-512 builds fuse them; each build gives every step
 * the same floats). */
#define SCORE(j)                                                                                                      \
    if ((j) < NQ) {                                                                                                   \
        const __m256 qj = _mm256_set1_ps(qt[i * 8 + (j)]);                                                           \
        a##j##0 = _mm256_fmadd_ps(qj, k0, a##j##0);                                                                  \
        a##j##1 = _mm256_fmadd_ps(qj, k1, a##j##1);                                                                  \
    }
#define SSTORE(j)                                                                                                     \
    if ((j) < NQ) {                                                                                                   \
        float sc[16];                                                                                                 \
        _mm256_storeu_ps(sc, _mm256_mul_ps(a##j##0, sv));                                                             \
        _mm256_storeu_ps(sc + 8, _mm256_mul_ps(a##j##1, sv));                                                         \
        memcpy(dst[(j)], sc, sizeof(float) * (size_t)cnt[(j)]);                                                       \
    }
static inline __attribute__((always_inline)) void block_scores4(const float *restrict qt, float *const *dst,
                                                                const int64_t *cnt, const int NQ,
                                                                const float *restrict row, int64_t D, float scale) {
    const __m256 z = _mm256_setzero_ps(), sv = _mm256_set1_ps(scale);
    __m256 a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
    for (int64_t i = 0; i < D; i++) {
        const __m256 k0 = _mm256_loadu_ps(row + i * 16), k1 = _mm256_loadu_ps(row + i * 16 + 8);
        SCORE(0)
        SCORE(1)
        SCORE(2)
        SCORE(3)
    }
    SSTORE(0)
    SSTORE(1)
    SSTORE(2)
    SSTORE(3)
}
#undef SCORE
#undef SSTORE

static void block_scores_n(const float *restrict qt, float *const *dst, const int64_t *cnt, int nq,
                           const float *restrict row, int64_t D, float scale) {
    for (int h = 0; h < nq; h += 4) { /* queries h .. h + 3 of the 8: their qt entries are 8 apart, from h */
        switch (nq - h < 4 ? nq - h : 4) {
        case 1: block_scores4(qt + h, dst + h, cnt + h, 1, row, D, scale); break;
        case 2: block_scores4(qt + h, dst + h, cnt + h, 2, row, D, scale); break;
        case 3: block_scores4(qt + h, dst + h, cnt + h, 3, row, D, scale); break;
        default: block_scores4(qt + h, dst + h, cnt + h, 4, row, D, scale); break;
        }
    }
}

#define WROW(j)                                                                                                       \
    if ((j) < NO) {                                                                                                   \
        const __m256 wp = _mm256_set1_ps(wt[p * 4 + (j)]);                                                            \
        a##j##0 = _mm256_add_ps(a##j##0, _mm256_mul_ps(wp, v0));                                                      \
        a##j##1 = _mm256_add_ps(a##j##1, _mm256_mul_ps(wp, v1));                                                      \
    }
#define WLOAD(j)                                                                                                      \
    if ((j) < NO) a##j##0 = _mm256_loadu_ps(o[j] + i0), a##j##1 = _mm256_loadu_ps(o[j] + i0 + 8);
#define WSTORE(j)                                                                                                     \
    if ((j) < NO) _mm256_storeu_ps(o[j] + i0, a##j##0), _mm256_storeu_ps(o[j] + i0 + 8, a##j##1);
static inline __attribute__((always_inline)) void add_weighted_rows_n(float *const *o, const float *restrict wt,
                                                                      const int NO, const float *restrict v,
                                                                      int64_t np, int64_t D) {
    for (int64_t i0 = 0; i0 < D; i0 += 16) {
        const __m256 z = _mm256_setzero_ps();
        __m256 a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
        WLOAD(0)
        WLOAD(1)
        WLOAD(2)
        WLOAD(3)
        for (int64_t p = 0; p < np; p++) {
            const __m256 v0 = _mm256_loadu_ps(v + p * D + i0), v1 = _mm256_loadu_ps(v + p * D + i0 + 8);
            WROW(0)
            WROW(1)
            WROW(2)
            WROW(3)
        }
        WSTORE(0)
        WSTORE(1)
        WSTORE(2)
        WSTORE(3)
    }
}
#undef WROW
#undef WLOAD
#undef WSTORE
#endif

/* Attention of n tokens' G query heads (token t's q: G x D at q + t * qs, its output at out + t * os) over one KV
 * head's cached positions (keys at kb, values at vb): token t sees the first L0 + t positions. Each block of 16 keys
 * and of 16 value rows is read (and converted from bfloat16) once for all n tokens, and every query's scores and sums
 * are the same arithmetic in the same order as for that token alone. scores: n x G x (L0 + n - 1) floats of scratch;
 * row: 16 x D floats of scratch (a transposed block of keys, or a block of value rows). */
void wl_attend_group(float *restrict out, int64_t os, const float *restrict q, int64_t qs, int64_t n, const void *kv,
                         int64_t fmt, int64_t kb, int64_t vb, int64_t L0, int64_t G, int64_t D, float *restrict scores,
                         float *restrict row) {
    const float scale = 1.0f / sqrtf((float)D);
    const int64_t L = L0 + n - 1; /* positions the last token sees; scores rows are L apart */
#ifdef ATTN_VEC
    /* the n G queries (query t G + j: token t's head j), transposed in groups of 8 (qt[(g D + i) 8 + r]: element i of
     * query 8 g + r) so that the scores' broadcasts are one pointer plus a constant */
    const int64_t nqt = n * G;
    float qt[QT_FLOATS];
    const int use_qt = (nqt + 7) / 8 * 8 * D <= QT_FLOATS;
    if (use_qt)
        for (int64_t qi = 0; qi < (nqt + 7) / 8 * 8; qi++)
            for (int64_t i = 0; i < D; i++)
                qt[((qi / 8) * D + i) * 8 + qi % 8] = qi < nqt ? q[(qi / G) * qs + (qi % G) * D + i] : 0.0f;
#endif
    /* q.k for 16 positions at a time: the block of keys is transposed into `row` (D x 16 floats), so that each
     * query's 16 scores come from D vector multiply-adds instead of 16 dot products with horizontal sums. */
    for (int64_t t0 = 0; t0 < L; t0 += 16) {
        const int64_t nb = L - t0 < 16 ? L - t0 : 16;
        key_block(row, kv, fmt, kb + t0 * D, nb, D);
#ifdef ATTN_VEC
        if (use_qt) {
            for (int64_t g0 = 0; g0 < nqt; g0 += 8) { /* 8 queries at a time: all of them score every block */
                float *dst[8];
                int64_t cnt[8];
                const int nq = nqt - g0 < 8 ? (int)(nqt - g0) : 8;
                for (int r = 0; r < nq; r++) {
                    const int64_t left = L0 + (g0 + r) / G - t0; /* positions of the block this query sees */
                    dst[r] = scores + (g0 + r) * L + t0;
                    cnt[r] = left < 0 ? 0 : (left < nb ? left : nb);
                }
                block_scores_n(qt + g0 * D, dst, cnt, nq, row, D, scale);
            }
            continue;
        }
#endif
        for (int64_t t = 0; t < n; t++) {
            const int64_t Lt = L0 + t;
            if (t0 >= Lt) continue;
            const int64_t nbt = Lt - t0 < nb ? Lt - t0 : nb;
            for (int64_t j = 0; j < G; j++) {
                const float *qj = q + t * qs + j * D;
                float acc[16] = {0};
                for (int64_t i = 0; i < D; i++) {
                    const float qi = qj[i];
                    const float *kt = row + i * 16;
#pragma omp simd
                    for (int64_t tt = 0; tt < 16; tt++) acc[tt] = fmaf(qi, kt[tt], acc[tt]);
                }
                float *sc = scores + (t * G + j) * L + t0;
                for (int64_t tt = 0; tt < nbt; tt++) sc[tt] = acc[tt] * scale;
            }
        }
    }
    for (int64_t t = 0; t < n; t++) {
        const int64_t Lt = L0 + t;
        for (int64_t j = 0; j < G; j++) {
            float *sc = scores + (t * G + j) * L, mx, sum;
            mx = max_of(sc, Lt);
            sum = wl_exp_shifted(sc, Lt, mx);
            const float inv = 1.0f / sum;
#pragma omp simd
            for (int64_t p = 0; p < Lt; p++) sc[p] *= inv;
        }
        memset(out + t * os, 0, sizeof(float) * (size_t)(G * D));
    }
    for (int64_t p0 = 0; p0 < L; p0 += 16) { /* 16 value rows at a time, each token's sums kept across them */
        const int64_t nb = L - p0 < 16 ? L - p0 : 16;
        const float *v = (const float *)kv + vb + p0 * D;
        if (fmt == KV_BF16) {
            for (int64_t pp = 0; pp < nb; pp++) kv_row(kv, fmt, vb + (p0 + pp) * D, D, row + pp * D);
            v = row;
        }
        for (int64_t t = p0 < L0 ? 0 : p0 - L0 + 1; t < n; t++) { /* the tokens that see position p0 */
            const int64_t Lt = L0 + t, np = (Lt < p0 + nb ? Lt : p0 + nb) - p0;
            int64_t j = 0;
#ifdef ATTN_VEC
            if (D % 16 == 0)
                for (; j < G; j += 4) {
                    float *o[4], wt[16 * 4];
                    const int no = G - j < 4 ? (int)(G - j) : 4;
                    for (int r = 0; r < no; r++) {
                        o[r] = out + t * os + (j + r) * D;
                        for (int64_t p = 0; p < np; p++) wt[p * 4 + r] = scores[(t * G + j + r) * L + p0 + p];
                    }
                    switch (no) {
                    case 1: add_weighted_rows_n(o, wt, 1, v, np, D); break;
                    case 2: add_weighted_rows_n(o, wt, 2, v, np, D); break;
                    case 3: add_weighted_rows_n(o, wt, 3, v, np, D); break;
                    default: add_weighted_rows_n(o, wt, 4, v, np, D); break;
                    }
                }
#endif
            for (; j < G; j++) add_weighted_rows(out + t * os + j * D, scores + (t * G + j) * L + p0, v, np, D);
        }
    }
}

