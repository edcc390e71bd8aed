/* The fused step's products on GGUF Q4_K, Q5_K and Q6_K rows placed 8 at a time interleaved (Q4_K_X8, Q5_K_X8, Q6_K_X8;
 * BlockWeight.interleaved, hardware/blocks.py), with AVX512-VNNI: a row at a time (fused_kquants.c) a super-block's
 * unpacking and its scales cost more than its bytes take to arrive, 8 rows side by side they are shared by a
 * register's 8 rows. fused_blocks_matrix.c hands each group of 8 rows here (wl_kx8_dots); the input vectors are
 * quantised there (wl_quantize_q8k) and spread for these products (wl_kx8_spread, below).
 *
 * Layouts (hardware/blocks.py, K_X8_ORDER): the file's super-blocks of 8 rows, each field of the super-block (a 2-byte
 * d, a 4-byte group of q ...) followed by the same field of the 7 other rows (row r's copy at r field widths on): the
 * same bytes, moved. The q bytes go in groups of 4, the 8 groups of each 32 bytes in the order 0, 4, 1, 5, 2, 6, 3, 7,
 * so that a 64-byte register holds groups p (lanes 0..7, row = lane) and p + 4 (lanes 8..15) of 32 bytes: their
 * first and their last 16. The input vectors are spread to match (wl_kx8_spread: per block of 32 inputs, register p
 * holding their 4-byte groups p and p + 4 likewise).
 *   Q4_K_X8, 1152 bytes: the 8 d (fp16), the 8 dmin, the 12 bytes of scales and mins as 3 words (word k of row r at
 *     32 + 32 k + 4 r), then the 128 bytes of q, 32 c .. 32 c + 31 (weights 64 c ..: low nibbles 64 c + l, high
 *     ones 64 c + 32 + l) in the registers at 128 + 256 c + 64 p: low nibbles against block 2 c's register p of the
 *     spread input, high nibbles against block 2 c + 1's.
 *   Q5_K_X8, 1408 bytes: as Q4_K_X8 with the 32 bytes of fifth bits (qh) before the q (registers at 128 + 64 p, the
 *     q's at 384 + 256 c + 64 p): bits 2 c and 2 c + 1 of qh's byte l the fifth bits of q byte l's two nibbles.
 *   Q6_K_X8, 1680 bytes, in the order the product reads them (front to back; placed as the file has them, three
 *     places 256 to 1024 bytes apart at each step, it read ~9 GB/s on a Zen 4 EPYC, ~21 now): per half h,
 *     per register p, qh's chunk h's register (at 832 h + 192 p), then ql's chunks 2 h and 2 h + 1's (+ 64, + 128);
 *     after the half's 4 steps its 8 scales (sub-block s of row r at 832 h + 768 + 8 (s - 8 h) + r); the 8 d last
 *     (at 1664 + 2 r). ql's 32 bytes cc = 2 h + s hold the low 4
 *     bits of weights 128 h + 32 s + l (low nibbles) and 128 h + 64 + 32 s + l (high ones), qh's 32 bytes h their
 *     top 2 bits (bits 2 s, 2 s + 1 and 4 + 2 s, 5 + 2 s of byte l): the 4 registers of weights that one register
 *     pair of ql and qh makes are blocks 4 h + k (k = 0 .. 3) of 32 inputs, each register's two halves two sub-blocks
 *     of 16 with their two scales.
 * Arithmetic, per row and super-block: each sub-block's exact integer dot (unsigned q by signed 8-bit x) times its
 * scale, summed in int32 (a register's two halves added at the end); Q6_K's q - 32 by starting each sub-block's sum
 * at -32 sum x (the vector's table, wl_kx8_spread), Q4_K's mins as sum m_j (sum of x over sub-block j); then float:
 * d_w d_x times the dot, dmin_w d_x times the mins, added over the super-blocks, the mins taken out at the end.
 * Every vector gets the same operations in the same order whatever the number of vectors of a call. */
#include <stdint.h>
#include <string.h>

#include "fused.h"
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__)
#include <immintrin.h>
#define KX8 1
#endif

#ifdef KX8
static inline __m512i spread(const wl_q8_vec *v, int64_t block32, int p) {
    return _mm512_loadu_si512((const void *)(v->k.e + 256 * block32 + 64 * p));
}

/* the 8 rows' outputs of vectors t0 .. t0 + V - 1: acc - mins (+ bias) */
static inline void store_rows(float *y, int64_t ys, int64_t t0, int V, const __m256 *acc, const __m256 *mins,
                              const float *b8) {
    const __m256 bias = b8 != NULL ? _mm256_loadu_ps(b8) : _mm256_setzero_ps();
    for (int t = 0; t < V; t++) _mm256_storeu_ps(y + (t0 + t) * ys, _mm256_add_ps(_mm256_sub_ps(acc[t], mins[t]), bias));
}

/* a 16-lane int32 sum of two halves (lanes r and 8 + r both row r) as row r's 8 lanes */
static inline __m256i halves(__m512i s) { return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1)); }

/* Q4_K_X8 (five = 0) and Q5_K_X8 (five = 1) */
static inline __attribute__((always_inline)) void q4k_tile(const uint8_t *restrict g, const wl_q8_vec *v, int64_t t0,
                                                           const int V, int64_t nsb, float *y, int64_t ys,
                                                           const float *b8, const int five) {
    const int64_t bytes = five ? 1408 : 1152, q_at = five ? 384 : 128;
    const __m512i low = _mm512_set1_epi8(0x0f), six = _mm512_set1_epi32(0x3f3f3f3f), byte = _mm512_set1_epi32(0xff);
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    const __m512i four = _mm512_set1_epi32(0x0f0f0f0f), two = _mm512_set1_epi32(0x03030303);
    __m256 acc[4], mins[4];
    for (int t = 0; t < V; t++) acc[t] = mins[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nsb; b++) {
        const uint8_t *blk = g + bytes * b;
        if (t0 == 0) wl_x8_prefetch(blk, bytes);
        /* scales_mins (fused_kquants.c) for the 8 rows at once, row r in lanes r and 8 + r */
        const __m512i u0 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(blk + 32)));
        const __m512i u1 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(blk + 64)));
        const __m512i u2 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(blk + 96)));
        const __m512i sc[2] = {_mm512_and_si512(u0, six),
                               _mm512_or_si512(_mm512_and_si512(u2, four),
                                               _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), two), 4))};
        const __m256i m_lo = _mm512_castsi512_si256(_mm512_and_si512(u1, six));
        const __m256i m_hi = _mm512_castsi512_si256(_mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi32(u2, 4), four), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), two), 4)));
        /* the mins as int16, row r's m0, m1 | m2, m3 in its lanes 2 r, 2 r + 1 (m4 .. m7 likewise in mhi) */
        const __m512i mlo = _mm512_cvtepu8_epi16(m_lo), mhi = _mm512_cvtepu8_epi16(m_hi);
        __m512i tot[4];
        for (int t = 0; t < V; t++) tot[t] = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) { /* weights 64 c ..: sub-blocks 2 c (low nibbles) and 2 c + 1 (high) */
            __m512i w[8];
            for (int h = 0; h < 4; h++) {
                const __m512i raw = _mm512_loadu_si512((const void *)(blk + q_at + 256 * c + 64 * h));
                w[h] = _mm512_and_si512(raw, low);
                w[4 + h] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);
                if (five) { /* Q5_K: bits 2 c and 2 c + 1 of qh's byte, the fifth bits of the low and high nibble */
                    const __m512i qh = _mm512_loadu_si512((const void *)(blk + 128 + 64 * h));
                    const __m512i b0 = 2 * c <= 4 ? _mm512_slli_epi16(qh, 4 - 2 * c) : _mm512_srli_epi16(qh, 2 * c - 4);
                    const __m512i b1 = 2 * c + 1 <= 4 ? _mm512_slli_epi16(qh, 3 - 2 * c) : _mm512_srli_epi16(qh, 2 * c - 3);
                    w[h] = _mm512_or_si512(w[h], _mm512_and_si512(b0, bit4));
                    w[4 + h] = _mm512_or_si512(w[4 + h], _mm512_and_si512(b1, bit4));
                }
            }
            const __m512i s_lo = _mm512_and_si512(_mm512_srli_epi32(sc[c / 2], 16 * (c % 2)), byte);
            const __m512i s_hi = _mm512_and_si512(_mm512_srli_epi32(sc[c / 2], 16 * (c % 2) + 8), byte);
            for (int t = 0; t < V; t++) {
                const wl_q8_vec *vt = v + t0 + t;
                __m512i lo = _mm512_setzero_si512(), hi = lo;
                for (int h = 0; h < 4; h++) {
                    lo = _mm512_dpbusd_epi32(lo, w[h], spread(vt, 8 * b + 2 * c, h));
                    hi = _mm512_dpbusd_epi32(hi, w[4 + h], spread(vt, 8 * b + 2 * c + 1, h));
                }
                tot[t] = _mm512_add_epi32(tot[t], _mm512_add_epi32(_mm512_mullo_epi32(lo, s_lo), _mm512_mullo_epi32(hi, s_hi)));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)blk));
        const __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(blk + 16)));
        for (int t = 0; t < V; t++) {
            const wl_q8_vec *vt = v + t0 + t;
            const int16_t *bs = vt->k.bsum + 16 * b;
            int16_t pair[8]; /* sum x over sub-block j of 32: two 16-sums (|.| <= 4064) */
            for (int j = 0; j < 8; j++) pair[j] = (int16_t)(bs[2 * j] + bs[2 * j + 1]);
            long long p_lo, p_hi;
            memcpy(&p_lo, pair, 8);
            memcpy(&p_hi, pair + 4, 8);
            __m512i m = _mm512_add_epi32(_mm512_madd_epi16(mlo, _mm512_set1_epi64(p_lo)),
                                         _mm512_madd_epi16(mhi, _mm512_set1_epi64(p_hi)));
            m = _mm512_add_epi32(m, _mm512_shuffle_epi32(m, _MM_PERM_CDAB)); /* row r's sum in lane 2 r */
            const __m256 dx = _mm256_set1_ps(vt->k.d[b]);
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(halves(tot[t])), acc[t]);
            mins[t] = _mm256_fmadd_ps(_mm256_mul_ps(mw, dx), _mm256_cvtepi32_ps(_mm512_cvtepi64_epi32(m)), mins[t]);
        }
    }
    store_rows(y, ys, t0, V, acc, mins, b8);
}

static inline __attribute__((always_inline)) void q6k_tile(const uint8_t *restrict g, const wl_q8_vec *v, int64_t t0,
                                                           const int V, int64_t nsb, float *y, int64_t ys,
                                                           const float *b8) {
    const __m512i low = _mm512_set1_epi8(0x0f), top = _mm512_set1_epi8(0x30);
    __m256 acc[4], zero[4];
    for (int t = 0; t < V; t++) acc[t] = zero[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nsb; b++) {
        const uint8_t *blk = g + 1680 * b;
        if (t0 == 0) wl_x8_prefetch(blk, 1680);
        __m512i tot[4];
        for (int t = 0; t < V; t++) tot[t] = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) { /* weights 128 h ..: blocks of 32 8 b + 4 h + k, sub-blocks 8 h + 2 k (+ 1) */
            __m512i d[4][4]; /* per vector and k: the two sub-blocks' sums, from -32 sum x */
            for (int t = 0; t < V; t++)
                for (int k = 0; k < 4; k++)
                    d[t][k] = _mm512_loadu_si512((const void *)(v[t0 + t].k.m32 + 16 * (8 * b + 4 * h + k)));
            for (int p = 0; p < 4; p++) {
                const uint8_t *at = blk + 832 * h + 192 * p; /* qh's register, then ql's two */
                const __m512i qh = _mm512_loadu_si512((const void *)at);
                const __m512i l0 = _mm512_loadu_si512((const void *)(at + 64));
                const __m512i l1 = _mm512_loadu_si512((const void *)(at + 128));
                const __m512i w[4] = {
                    _mm512_or_si512(_mm512_and_si512(l0, low), _mm512_and_si512(_mm512_slli_epi16(qh, 4), top)),
                    _mm512_or_si512(_mm512_and_si512(l1, low), _mm512_and_si512(_mm512_slli_epi16(qh, 2), top)),
                    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), low), _mm512_and_si512(qh, top)),
                    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), low),
                                    _mm512_and_si512(_mm512_srli_epi16(qh, 2), top))};
                for (int t = 0; t < V; t++)
                    for (int k = 0; k < 4; k++)
                        d[t][k] = _mm512_dpbusd_epi32(d[t][k], w[k], spread(v + t0 + t, 8 * b + 4 * h + k, p));
            }
            for (int k = 0; k < 4; k++) { /* sub-blocks 8 h + 2 k and 8 h + 2 k + 1: the scales of the two halves */
                const __m512i s = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(blk + 832 * h + 768 + 16 * k)));
                for (int t = 0; t < V; t++) tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(d[t][k], s));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(blk + 1664)));
        for (int t = 0; t < V; t++) {
            const __m256 dx = _mm256_set1_ps(v[t0 + t].k.d[b]);
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(halves(tot[t])), acc[t]);
        }
    }
    store_rows(y, ys, t0, V, acc, zero, b8);
}

/* one copy per kind and vector count, as fused_blocks_x8.c's x8_group */
#define KX8_GROUP(name, tile)                                                                                        \
    static void name(const uint8_t *g, const wl_q8_vec *v, int64_t n, int64_t nsb, float *y, int64_t ys,            \
                     const float *b8) {                                                                              \
        int64_t t0 = 0;                                                                                              \
        for (; t0 + 4 <= n; t0 += 4) tile(g, v, t0, 4, nsb, y, ys, b8);                                              \
        if (n - t0 == 1) tile(g, v, t0, 1, nsb, y, ys, b8);                                                          \
        else if (n - t0 == 2) tile(g, v, t0, 2, nsb, y, ys, b8);                                                     \
        else if (n - t0 == 3) tile(g, v, t0, 3, nsb, y, ys, b8);                                                     \
    }
static inline __attribute__((always_inline)) void q4k(const uint8_t *g, const wl_q8_vec *v, int64_t t0, const int V,
                                                      int64_t nsb, float *y, int64_t ys, const float *b8) {
    q4k_tile(g, v, t0, V, nsb, y, ys, b8, 0);
}
static inline __attribute__((always_inline)) void q5k(const uint8_t *g, const wl_q8_vec *v, int64_t t0, const int V,
                                                      int64_t nsb, float *y, int64_t ys, const float *b8) {
    q4k_tile(g, v, t0, V, nsb, y, ys, b8, 1);
}
KX8_GROUP(kx8_q4_k, q4k)
KX8_GROUP(kx8_q5_k, q5k)
KX8_GROUP(kx8_q6_k, q6k_tile)
#undef KX8_GROUP
#endif

void wl_kx8_dots(int64_t kind, const uint8_t *group, const wl_q8_vec *v, int64_t n, int64_t nsb, float *y, int64_t ys,
                 const float *bias) {
#ifdef KX8
    if (kind == BK_Q4_K_X8)
        kx8_q4_k(group, v, n, nsb, y, ys, bias);
    else if (kind == BK_Q5_K_X8)
        kx8_q5_k(group, v, n, nsb, y, ys, bias);
    else if (kind == BK_Q6_K_X8)
        kx8_q6_k(group, v, n, nsb, y, ys, bias);
#else
    (void)kind, (void)group, (void)v, (void)n, (void)nsb, (void)y, (void)ys, (void)bias;
#endif
}

int64_t wl_kx8_spread(int8_t *e, int32_t *m32, const int8_t *q, const int16_t *bsum, int64_t n) {
#ifdef KX8
    for (int64_t b = 0; b < n / 32; b++) {
        const __m512i xb = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(q + 32 * b)));
        for (int p = 0; p < 4; p++) {
            const __m512i pick = _mm512_inserti64x4(_mm512_set1_epi32(p), _mm256_set1_epi32(p + 4), 1);
            _mm512_storeu_si512((void *)(e + 256 * b + 64 * p), _mm512_permutexvar_epi32(pick, xb));
        }
        for (int i = 0; i < 16; i++) m32[16 * b + i] = -32 * (int32_t)bsum[2 * b + i / 8];
    }
    return 1;
#else
    (void)e, (void)m32, (void)q, (void)bsum, (void)n;
    return 0;
#endif
}

int64_t wl_kx8_built(void) {
#ifdef KX8
    return 1;
#else
    return 0;
#endif
}
