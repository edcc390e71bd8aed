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
#include "fused_attention_simd.h"

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


/* The nb (<= 16) cached rows at `at`, `at + D`, ... (keys) transposed into row[i * 16 + tt], zeros past nb. */
static void key_block(float *restrict row, const void *kv, int64_t fmt, int64_t at, int64_t nb, int64_t D) {
#ifdef ATTN_VEC
    if (ATTN_BF16_PAIRS(fmt, D)) {
        key_block_bf16(row, (const uint16_t *)kv + at, nb, D);
        return;
    }
#endif
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
#ifdef ATTN_VEC
    const int pairs = ATTN_BF16_PAIRS(fmt, D); /* bfloat16 rows read as pairs, the outputs split until the end */
#else
    const int pairs = 0;
#endif
    for (int64_t p0 = 0; p0 < L; p0 += 16) { /* 16 value rows at a time, each token's sums kept across them */
        const int64_t nb = L - p0 < 16 ? L - p0 : 16;
        const float *v = (const float *)kv + vb + p0 * D;
        if (fmt == KV_BF16 && !pairs) {
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
                    if (pairs) {
                        const uint16_t *vh = (const uint16_t *)kv + vb + p0 * D;
                        switch (no) {
                        case 1: add_weighted_bf16_n(o, wt, 1, vh, np, D); break;
                        case 2: add_weighted_bf16_n(o, wt, 2, vh, np, D); break;
                        case 3: add_weighted_bf16_n(o, wt, 3, vh, np, D); break;
                        default: add_weighted_bf16_n(o, wt, 4, vh, np, D); break;
                        }
                        continue;
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
#ifdef ATTN_VEC
    if (pairs)
        for (int64_t t = 0; t < n; t++)
            for (int64_t j = 0; j < G; j++) unsplit_row(out + t * os + j * D, D);
#endif
}

