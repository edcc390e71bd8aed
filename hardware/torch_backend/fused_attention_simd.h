/* The vector kernels of the fused step's attention (fused_attention.c includes this file, once): a 16 x 16
 * transpose, a block of scores for up to 8 queries, weighted value rows for up to 4 outputs (AVX-512, else AVX2),
 * and, with AVX-512 and a bfloat16 cache whose head width is a multiple of 32, keys and values read straight from
 * their bfloat16 rows (the same floats as converting them first). */
#ifndef WAFERLINE_FUSED_ATTENTION_SIMD_H
#define WAFERLINE_FUSED_ATTENTION_SIMD_H
#ifdef __AVX512F__
/* r[k] (16 floats each, k < 16) -> out[e * 16 + k] = r[k][e]: a 16 x 16 transpose in registers (unpack pairs, then
 * 64-bit pairs, then 128-bit lanes twice), which moves the same floats as the scalar copy. */
static inline __attribute__((always_inline)) void transpose16_regs(const __m512 *r, __m512 *o) {
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
        o[m] = _mm512_shuffle_f32x4(v0, w0, 0x88);
        o[4 + m] = _mm512_shuffle_f32x4(v1, w1, 0x88);
        o[8 + m] = _mm512_shuffle_f32x4(v0, w0, 0xdd);
        o[12 + m] = _mm512_shuffle_f32x4(v1, w1, 0xdd);
    }
}

static inline void transpose16(const __m512 *r, float *restrict out) {
    __m512 o[16];
    transpose16_regs(r, o);
    for (int e = 0; e < 16; e++) _mm512_storeu_ps(out + e * 16, o[e]);
}

/* The 16 bfloat16 rows of width D two blocks past `r` (the block after next) asked for into L1 while this one is used:
 * a decode step streams every weight between two visits of a layer's cache, so the cache comes from memory */
static inline void rows_ahead(const uint16_t *r, int64_t D) {
    for (int64_t i = 0; i < 16 * D * 2; i += 64) _mm_prefetch((const char *)(r + 32 * D) + i, _MM_HINT_T0);
}

/* Whether the bfloat16 kernels below take a cache of this format and head width */
#define ATTN_BF16_PAIRS(fmt, D) ((fmt) == KV_BF16 && (D) % 32 == 0)

/* The nb (<= 16) bfloat16 key rows at k, k + D, ... transposed into row[i * 16 + tt] as float32, zeros past nb:
 * each row's 32-bit pairs of elements (2 e, 2 e + 1) transposed as they are, then each pair split into its two
 * floats (the low half shifted up, the high half masked), half the transposes of converting the rows first. */
static inline void key_block_bf16(float *restrict row, const uint16_t *k, int64_t nb, int64_t D) {
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    rows_ahead(k, D);
    for (int64_t c = 0; c < D; c += 32) {
        __m512 r[16], t[16];
        for (int64_t tt = 0; tt < 16; tt++) r[tt] = tt < nb ? _mm512_loadu_ps((const void *)(k + tt * D + c)) : _mm512_setzero_ps();
        transpose16_regs(r, t); /* t[e], lane tt: elements c + 2 e and c + 2 e + 1 of row tt */
        for (int e = 0; e < 16; e++) {
            const __m512i pair = _mm512_castps_si512(t[e]);
            _mm512_storeu_ps(row + (c + 2 * e) * 16, _mm512_castsi512_ps(_mm512_slli_epi32(pair, 16)));
            _mm512_storeu_ps(row + (c + 2 * e + 1) * 16, _mm512_castsi512_ps(_mm512_and_si512(pair, high)));
        }
    }
}

/* add_weighted_rows_n (below) on bfloat16 value rows, each 32 elements read as 16 pairs: the outputs o[j] are kept
 * split, per 32 elements the 16 even ones and then the 16 odd ones (unsplit_row puts them back), so that a row's
 * pairs need no shuffle; per element the same multiply-adds in the same order. */
static inline __attribute__((always_inline)) void add_weighted_bf16_n(float *const *o, const float *restrict wt,
                                                                      const int NO, const uint16_t *v, int64_t np,
                                                                      int64_t D, int fresh) {
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    rows_ahead(v, D);
    for (int64_t c = 0; c < D; c += 32) {
        __m512 even[4], odd[4];
        for (int j = 0; j < NO; j++)
            even[j] = fresh ? _mm512_setzero_ps() : _mm512_loadu_ps(o[j] + c),
            odd[j] = fresh ? _mm512_setzero_ps() : _mm512_loadu_ps(o[j] + c + 16);
        for (int64_t p = 0; p < np; p++) {
            const __m512i pair = _mm512_loadu_si512((const void *)(v + p * D + c));
            const __m512 ve = _mm512_castsi512_ps(_mm512_slli_epi32(pair, 16));
            const __m512 vo = _mm512_castsi512_ps(_mm512_and_si512(pair, high));
            for (int j = 0; j < NO; j++) {
                const __m512 w = _mm512_set1_ps(wt[p * 4 + j]);
                even[j] = _mm512_fmadd_ps(w, ve, even[j]);
                odd[j] = _mm512_fmadd_ps(w, vo, odd[j]);
            }
        }
        for (int j = 0; j < NO; j++) _mm512_storeu_ps(o[j] + c, even[j]), _mm512_storeu_ps(o[j] + c + 16, odd[j]);
    }
}

/* o[0..D) from split (add_weighted_bf16_n) back to element order */
static inline void unsplit_row(float *o, int64_t D) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (int64_t c = 0; c < D; c += 32) {
        const __m512 even = _mm512_loadu_ps(o + c), odd = _mm512_loadu_ps(o + c + 16);
        _mm512_storeu_ps(o + c, _mm512_permutex2var_ps(even, lo, odd));
        _mm512_storeu_ps(o + c + 16, _mm512_permutex2var_ps(even, hi, odd));
    }
}
#endif

#ifdef __AVX512F__
/* NQ (<= 8) queries against a transposed block of 16 keys (row: D x 16): query j's 16 scores, times `scale`, the
 * first cnt[j] of them stored at dst[j]. Element i of query j is q[i IS + j JS], IS and JS constants where it is
 * inlined (block_scores: the queries transposed, IS 8 and JS 1; block_scores_s: in place), so that every broadcast
 * is one pointer plus a constant. The same multiplies and adds in the same order as one query at a time; taken
 * together, their NQ chains of additions overlap instead of each waiting for the one before. */
#define SCORE(j)                                                                                                      \
    if ((j) < NQ) a##j = _mm512_fmadd_ps(_mm512_set1_ps(q[i * IS + (j) * JS]), k, a##j)
static inline __attribute__((always_inline)) void block_scores_at(const float *restrict q, const int64_t IS,
                                                                  const int64_t JS, float *const *dst,
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

/* the queries transposed (qt[i * 8 + j]: element i of query j) */
static inline __attribute__((always_inline)) void block_scores(const float *restrict qt, float *const *dst,
                                                               const int64_t *cnt, const int NQ,
                                                               const float *restrict row, int64_t D, float scale) {
    block_scores_at(qt, 8, 1, dst, cnt, NQ, row, D, scale);
}

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

/* block_scores for one token's NQ (<= 8) queries DS floats apart (query j at q + j DS), DS a constant: read in place,
 * without the queries transposed first (the same arithmetic; per-query pointers instead spilled to vector registers
 * inside the loop, 5% slower). */
static inline __attribute__((always_inline)) void block_scores_s(const float *restrict q, const int64_t DS,
                                                                 float *const *dst, const int64_t *cnt, const int NQ,
                                                                 const float *restrict row, float scale) {
    block_scores_at(q, 1, DS, dst, cnt, NQ, row, DS, scale);
}

/* Whether one token's queries of head width D take block_scores_strided (else they are transposed first) */
#define ATTN_STRIDED(n, D) ((n) == 1 && ((D) == 64 || (D) == 128))

#define STRIDED_CASES(DS)                                                                                             \
    switch (nq) {                                                                                                     \
    case 1: block_scores_s(q, DS, dst, cnt, 1, row, scale); break;                                                    \
    case 2: block_scores_s(q, DS, dst, cnt, 2, row, scale); break;                                                    \
    case 3: block_scores_s(q, DS, dst, cnt, 3, row, scale); break;                                                    \
    case 4: block_scores_s(q, DS, dst, cnt, 4, row, scale); break;                                                    \
    case 5: block_scores_s(q, DS, dst, cnt, 5, row, scale); break;                                                    \
    case 6: block_scores_s(q, DS, dst, cnt, 6, row, scale); break;                                                    \
    case 7: block_scores_s(q, DS, dst, cnt, 7, row, scale); break;                                                    \
    case 8: block_scores_s(q, DS, dst, cnt, 8, row, scale); break;                                                    \
    default: break;                                                                                                   \
    }
static void block_scores_strided(const float *restrict q, int64_t D, float *const *dst, const int64_t *cnt, int nq,
                                 const float *restrict row, float scale) {
    if (D == 64) {
        STRIDED_CASES(64)
    } else {
        STRIDED_CASES(128)
    }
}
#undef STRIDED_CASES

/* NO (<= 4) outputs o[j][0..D) += sum over p < np of w[j][p] * v[p * D ..], D a multiple of 16: add_weighted_rows
 * for each, every value row read once for all of them and their chains of additions overlapping. wt holds the
 * weights transposed (wt[p * 4 + j]). `fresh`: the sums start from zero instead of o (as from a zeroed o; so for the
 * bfloat16 kernels above too). */
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
                                                                      int64_t np, int64_t D, int fresh) {
    for (int64_t i0 = 0; i0 < D; i0 += 32) {
        const int C = i0 + 32 <= D ? 2 : 1; /* 16-float chunks of each output taken at once */
        const __m512 z = _mm512_setzero_ps();
        __m512 a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
        if (NO > 0 && !fresh) a00 = _mm512_loadu_ps(o[0] + i0), a01 = C == 2 ? _mm512_loadu_ps(o[0] + i0 + 16) : z;
        if (NO > 1 && !fresh) a10 = _mm512_loadu_ps(o[1] + i0), a11 = C == 2 ? _mm512_loadu_ps(o[1] + i0 + 16) : z;
        if (NO > 2 && !fresh) a20 = _mm512_loadu_ps(o[2] + i0), a21 = C == 2 ? _mm512_loadu_ps(o[2] + i0 + 16) : z;
        if (NO > 3 && !fresh) a30 = _mm512_loadu_ps(o[3] + i0), a31 = C == 2 ? _mm512_loadu_ps(o[3] + i0 + 16) : z;
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
/* The bfloat16 kernels above for AVX2, head widths a multiple of 16: keys 8 positions' 8 pairs of elements at a time
 * (an 8 x 8 transpose of 32-bit units), each pair split into its two floats; outputs kept split per 16 elements (8
 * even, 8 odd), the value sums a multiply and an add as add_weighted_rows_n's below: the same floats as the scalar
 * conversion and sums. */
#define ATTN_BF16_PAIRS(fmt, D) ((fmt) == KV_BF16 && (D) % 16 == 0)

static inline void key_block_bf16(float *restrict row, const uint16_t *k, int64_t nb, int64_t D) {
    const __m256i high = _mm256_set1_epi32((int)0xffff0000u);
    for (int64_t c = 0; c < D; c += 16)
        for (int64_t h = 0; h < 16; h += 8) {
            __m256 r[8], t[8], s[8];
            for (int64_t i = 0; i < 8; i++)
                r[i] = h + i < nb ? _mm256_loadu_ps((const void *)(k + (h + i) * D + c)) : _mm256_setzero_ps();
            for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
            for (int i = 0; i < 8; i += 4) {
                s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
                s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
            }
            for (int e = 0; e < 8; e++) { /* pair e of the 8 positions: elements c + 2 e and c + 2 e + 1 */
                const __m256i pair = _mm256_castps_si256(_mm256_permute2f128_ps(s[e % 4], s[4 + e % 4], e < 4 ? 0x20 : 0x31));
                _mm256_storeu_ps(row + (c + 2 * e) * 16 + h, _mm256_castsi256_ps(_mm256_slli_epi32(pair, 16)));
                _mm256_storeu_ps(row + (c + 2 * e + 1) * 16 + h, _mm256_castsi256_ps(_mm256_and_si256(pair, high)));
            }
        }
}

static inline __attribute__((always_inline)) void add_weighted_bf16_n(float *const *o, const float *restrict wt,
                                                                      const int NO, const uint16_t *v, int64_t np,
                                                                      int64_t D, int fresh) {
    const __m256i high = _mm256_set1_epi32((int)0xffff0000u);
    for (int64_t c = 0; c < D; c += 16) {
        __m256 even[4], odd[4];
        for (int j = 0; j < NO; j++)
            even[j] = fresh ? _mm256_setzero_ps() : _mm256_loadu_ps(o[j] + c),
            odd[j] = fresh ? _mm256_setzero_ps() : _mm256_loadu_ps(o[j] + c + 8);
        for (int64_t p = 0; p < np; p++) {
            const __m256i pair = _mm256_loadu_si256((const __m256i *)(const void *)(v + p * D + c));
            const __m256 ve = _mm256_castsi256_ps(_mm256_slli_epi32(pair, 16));
            const __m256 vo = _mm256_castsi256_ps(_mm256_and_si256(pair, high));
            for (int j = 0; j < NO; j++) {
                const __m256 w = _mm256_set1_ps(wt[p * 4 + j]);
                even[j] = _mm256_add_ps(even[j], _mm256_mul_ps(w, ve));
                odd[j] = _mm256_add_ps(odd[j], _mm256_mul_ps(w, vo));
            }
        }
        for (int j = 0; j < NO; j++) _mm256_storeu_ps(o[j] + c, even[j]), _mm256_storeu_ps(o[j] + c + 8, odd[j]);
    }
}

static inline void unsplit_row(float *o, int64_t D) {
    for (int64_t c = 0; c < D; c += 16) {
        const __m256 even = _mm256_loadu_ps(o + c), odd = _mm256_loadu_ps(o + c + 8);
        const __m256 lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
        _mm256_storeu_ps(o + c, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(o + c + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
}

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
    if ((j) < NO && !fresh) a##j##0 = _mm256_loadu_ps(o[j] + i0), a##j##1 = _mm256_loadu_ps(o[j] + i0 + 8);
#define WSTORE(j)                                                                                                     \
    if ((j) < NO) _mm256_storeu_ps(o[j] + i0, a##j##0), _mm256_storeu_ps(o[j] + i0 + 8, a##j##1);
static inline __attribute__((always_inline)) void add_weighted_rows_n(float *const *o, const float *restrict wt,
                                                                      const int NO, const float *restrict v,
                                                                      int64_t np, int64_t D, int fresh) {
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

#endif
