/* The fused step's attention (fused.h: wl_attend_group): the queries of n tokens against one KV head's cached keys
 * and values, each block of 16 keys and 16 value rows read once for all of them. The positions are taken in chunks
 * of WL_ATTN_CHUNK (wl_attend_chunk: per query the chunk's largest score, its sum of exponentials and its weighted sum
 * of values), merged in order afterwards (wl_attend_merge), so that a one-token step can share one head's chunks
 * between threads (fused_step.c): 3 KV heads on 2 threads otherwise leave one waiting a third of the time.
 *
 * Numerics: float32; every query's scores, chunks and merge are the same operations in the same order whether it
 * comes alone (a one-token step) or with others (a k-token step), and whichever thread ran each chunk, so all of them
 * give the same floats. The scores of the vector paths are fused multiply-adds, and so is the scalar loop that stands
 * in for them where a step's queries do not fit their buffer (so the two round alike); the value sums of the vector
 * paths too, the scalar ones (head widths that are not a multiple of 16, for every step alike) a multiply and an add
 * (-ffp-contract=off).
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
#include "fused_attention_direct.h"

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

/* The n G queries (query t G + j: token t's head j; token t's q: G x D at q + t * qs) transposed in groups of 8 for
 * the vector scores (qt[(g D + i) 8 + r]: element i of query 8 g + r), so that their broadcasts are one pointer plus a
 * constant; returns qt, or NULL where they take more than WL_ATTN_QT floats (the scalar loop then stands in) or
 * where one token's queries are read in place (ATTN_STRIDED: head widths 64 and 128 with AVX-512). */
const float *wl_attend_queries(float *restrict qt, const float *restrict q, int64_t qs, int64_t n, int64_t G,
                               int64_t D) {
#ifdef ATTN_VEC
    const int64_t nqt = n * G;
#ifdef ATTN_STRIDED
    if (ATTN_STRIDED(n, D)) return NULL; /* wl_attend_chunk reads them where they are */
#endif
    if ((nqt + 7) / 8 * 8 * D > WL_ATTN_QT) return NULL;
    for (int64_t qi = 0; qi < nqt; qi++) {
        const float *src = q + (qi / G) * qs + (qi % G) * D;
        float *dst = qt + (qi / 8) * D * 8 + qi % 8;
        for (int64_t i = 0; i < D; i++) dst[i * 8] = src[i];
    }
    return qt;
#else
    (void)qt, (void)q, (void)qs, (void)n, (void)G, (void)D;
    return NULL;
#endif
}

/* The chunk [c0, c0 + WL_ATTN_CHUNK) of one KV head's cached positions against the queries of n tokens' G heads (token
 * t's q: G x D at q + t * qs; it sees the positions < L0 + t): for each query (t, j) that sees some of them, at part +
 * (t G + j) WL_ATTN_PART(D), the sum of e^(score - m) times their value rows (D floats; for a bfloat16 cache read as
 * pairs, per 32 elements the 16 even ones, then the 16 odd ones), then m, the largest of its scores there, and l, the
 * sum of e^(score - m) over them. Keys at kb, values at vb (element offsets of position 0); qt: the queries as
 * wl_attend_queries gives them. Each block of 16 keys and of 16 value rows is read (and converted from bfloat16) once
 * for all the queries, and every query's numbers are the same arithmetic in the same order as for that query alone.
 * sc: n G WL_ATTN_CHUNK floats of scratch; row: 16 D. */
void wl_attend_chunk(float *restrict part, const float *restrict qt, const float *restrict q, int64_t qs, int64_t n,
                     const void *kv, int64_t fmt, int64_t kb, int64_t vb, int64_t L0, int64_t G, int64_t D,
                     int64_t c0, float *restrict sc, float *restrict row) {
    enum { C = WL_ATTN_CHUNK };
    const float scale = 1.0f / sqrtf((float)D);
    const int64_t L = L0 + n - 1, c1 = c0 + C < L ? c0 + C : L, P = WL_ATTN_PART(D);
    if (c1 <= c0) return;
#ifndef ATTN_VEC
    (void)qt; /* the scalar build scores every query by the loop below */
#endif
    /* q.k for 16 positions at a time: the block of keys is transposed into `row` (D x 16 floats), so that each
     * query's 16 scores come from D vector multiply-adds instead of 16 dot products with horizontal sums. */
#ifdef ATTN_DIRECT
    const int direct = ATTN_DIRECT(n, fmt, D, G, qt); /* keys transposed in registers, values in one pass */
#endif
    for (int64_t t0 = c0; t0 < c1; t0 += 16) {
        const int64_t nb = c1 - t0 < 16 ? c1 - t0 : 16;
#ifdef ATTN_DIRECT
        if (direct) {
            direct_scores(q, qt, n, G, D, (const uint16_t *)kv + kb + t0 * D, nb, sc + (t0 - c0), scale);
            continue;
        }
#endif
        key_block(row, kv, fmt, kb + t0 * D, nb, D);
#ifdef ATTN_VEC
#ifdef ATTN_STRIDED
        const int strided = ATTN_STRIDED(n, D); /* one token's queries read where they are */
#else
        const int strided = 0;
#endif
        if (strided || qt != NULL) {
            const int64_t nqt = n * G;
            for (int64_t g0 = 0; g0 < nqt; g0 += 8) { /* 8 queries at a time: all of them score every block */
                float *dst[8];
                int64_t cnt[8];
                const int nq = nqt - g0 < 8 ? (int)(nqt - g0) : 8;
                for (int r = 0; r < nq; r++) {
                    const int64_t left = L0 + (g0 + r) / G - t0; /* positions of the block this query sees */
                    dst[r] = sc + (g0 + r) * C + (t0 - c0);
                    cnt[r] = left < 0 ? 0 : (left < nb ? left : nb);
                }
#ifdef ATTN_STRIDED
                if (strided)
                    block_scores_strided(q + g0 * D, D, dst, cnt, nq, row, scale);
                else
#endif
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
                float *s = sc + (t * G + j) * C + (t0 - c0);
                for (int64_t tt = 0; tt < nbt; tt++) s[tt] = acc[tt] * scale;
            }
        }
    }
    for (int64_t t = 0; t < n; t++) { /* each query's exponentials in place of its scores; m and l */
        const int64_t nt = L0 + t - c0 < c1 - c0 ? L0 + t - c0 : c1 - c0;
        if (nt <= 0) continue;
        for (int64_t j = 0; j < G; j++) {
            float *s = sc + (t * G + j) * C, *pq = part + (t * G + j) * P;
            pq[D] = max_of(s, nt);
            pq[D + 1] = wl_exp_shifted(s, nt, pq[D]);
#ifdef ATTN_VEC
            if (D % 16 != 0) /* else the vector sums start from zero at the chunk's first value rows */
#endif
                memset(pq, 0, sizeof(float) * (size_t)D);
        }
    }
#ifdef ATTN_VEC
    const int pairs = ATTN_BF16_PAIRS(fmt, D); /* bfloat16 rows read as pairs, the sums kept split */
#else
    const int pairs = 0;
#endif
#ifdef ATTN_DIRECT
    if (direct) {
        direct_values(part, sc, n, G, D, (const uint16_t *)kv + vb + c0 * D, L0, c0, c1);
        return;
    }
#endif
    for (int64_t p0 = c0; p0 < c1; p0 += 16) { /* 16 value rows at a time, each query's sums kept across them */
        const int64_t nb = c1 - p0 < 16 ? c1 - p0 : 16;
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
                        o[r] = part + (t * G + j + r) * P;
                        for (int64_t p = 0; p < np; p++) wt[p * 4 + r] = sc[(t * G + j + r) * C + p0 - c0 + p];
                    }
                    if (pairs) {
                        const uint16_t *vh = (const uint16_t *)kv + vb + p0 * D;
                        switch (no) {
                        case 1: add_weighted_bf16_n(o, wt, 1, vh, np, D, p0 == c0); break;
                        case 2: add_weighted_bf16_n(o, wt, 2, vh, np, D, p0 == c0); break;
                        case 3: add_weighted_bf16_n(o, wt, 3, vh, np, D, p0 == c0); break;
                        default: add_weighted_bf16_n(o, wt, 4, vh, np, D, p0 == c0); break;
                        }
                        continue;
                    }
                    switch (no) {
                    case 1: add_weighted_rows_n(o, wt, 1, v, np, D, p0 == c0); break;
                    case 2: add_weighted_rows_n(o, wt, 2, v, np, D, p0 == c0); break;
                    case 3: add_weighted_rows_n(o, wt, 3, v, np, D, p0 == c0); break;
                    default: add_weighted_rows_n(o, wt, 4, v, np, D, p0 == c0); break;
                    }
                }
#endif
            for (; j < G; j++)
                add_weighted_rows(part + (t * G + j) * P, sc + (t * G + j) * C + p0 - c0, v, np, D);
        }
    }
}

/* The attention outputs (token t's head j at out + t * os + j * D) from the chunks' parts (wl_attend_chunk; chunk k's
 * at part + k n G WL_ATTN_PART(D)): per query, its chunks merged in order, the sums so far and each chunk's scaled by
 * e^(their m - the larger m), then divided by the sum of exponentials. A query's merge is the same arithmetic
 * whichever tokens came with it; its factors' exponentials are taken together, up to FACTORS at a time. */
void wl_attend_merge(float *restrict out, int64_t os, const float *restrict part, int64_t n, int64_t G, int64_t D,
                     int64_t L0, int64_t fmt) {
    enum { FACTORS = 256 };
    const int64_t P = WL_ATTN_PART(D), per_chunk = n * G * P;
    float e[FACTORS];
    for (int64_t t = 0; t < n; t++) {
        const int64_t chunks = (L0 + t + WL_ATTN_CHUNK - 1) / WL_ATTN_CHUNK;
        for (int64_t j = 0; j < G; j++) {
            const float *first = part + (t * G + j) * P;
            float *o = out + t * os + j * D, m = first[D], l = first[D + 1];
            memcpy(o, first, sizeof(float) * (size_t)D);
            for (int64_t k0 = 1; k0 < chunks; k0 += FACTORS) {
                const int64_t k1 = chunks - k0 < FACTORS ? chunks : k0 + FACTORS;
                float mm = m; /* the smaller m less the larger, chunk by chunk: the factor of the side that is smaller */
                for (int64_t k = k0; k < k1; k++) {
                    const float pm = first[k * per_chunk + D];
                    e[k - k0] = pm < mm ? pm - mm : mm - pm;
                    mm = pm < mm ? mm : pm;
                }
                wl_exp_shifted(e, k1 - k0, 0.0f);
                for (int64_t k = k0; k < k1; k++) {
                    const float *pk = first + k * per_chunk, d = e[k - k0];
                    const float a = pk[D] < m ? 1.0f : d, b = pk[D] < m ? d : 1.0f;
                    l = l * a + pk[D + 1] * b;
#pragma omp simd
                    for (int64_t i = 0; i < D; i++) o[i] = o[i] * a + pk[i] * b;
                    m = pk[D] < m ? m : pk[D];
                }
            }
            const float inv = 1.0f / l;
#pragma omp simd
            for (int64_t i = 0; i < D; i++) o[i] *= inv;
#ifdef ATTN_VEC
            if (ATTN_BF16_PAIRS(fmt, D)) unsplit_row(o, D);
#else
            (void)fmt;
#endif
        }
    }
}

/* Attention of n tokens' G query heads (token t's q: G x D at q + t * qs, its output at out + t * os) over one KV
 * head's cached positions (keys at kb, values at vb): token t sees the first L0 + t positions. The positions are taken
 * in chunks of WL_ATTN_CHUNK (wl_attend_chunk), which are then merged (wl_attend_merge), so a token's result is the
 * same floats however its chunks were shared out. part: WL_ATTN_PARTS(L0 + n - 1, n, G, D) floats of scratch; sc:
 * n G WL_ATTN_CHUNK; row: 16 D. */
void wl_attend_group(float *restrict out, int64_t os, const float *restrict q, int64_t qs, int64_t n, const void *kv,
                     int64_t fmt, int64_t kb, int64_t vb, int64_t L0, int64_t G, int64_t D, float *restrict part,
                     float *restrict sc, float *restrict row) {
    const int64_t L = L0 + n - 1;
    float qbuf[WL_ATTN_QT];
    const float *qt = wl_attend_queries(qbuf, q, qs, n, G, D);
    for (int64_t c0 = 0, k = 0; c0 < L; c0 += WL_ATTN_CHUNK, k++)
        wl_attend_chunk(part + k * n * G * WL_ATTN_PART(D), qt, q, qs, n, kv, fmt, kb, vb, L0, G, D, c0, sc, row);
    wl_attend_merge(out, os, part, n, G, D, L0, fmt);
}
