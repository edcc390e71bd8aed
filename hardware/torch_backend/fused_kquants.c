/* The fused step's products on GGUF's K-quant super-blocks (Q4_K, Q5_K, Q6_K), read as the file stores them.
 *
 * A super-block holds 256 weights (ggml's QK_K) in sub-blocks with scales of their own:
 *   Q4_K, 144 bytes: fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32, 128 bytes of 4-bit q;
 *        w = d sc_j q - dmin m_j. Within each 64 weights, byte l of their 32 holds weight l (low nibble) and 32 + l.
 *   Q5_K, 176 bytes: as Q4_K with 32 bytes of high bits before the 4-bit q (bit 2 c or 2 c + 1 of byte l: the fifth
 *        bit of weight l or 32 + l of the c-th 64).
 *   Q6_K, 210 bytes: 128 bytes of low 4 bits, 64 bytes of high 2 bits, 16 signed 8-bit scales (sub-blocks of 16),
 *        fp16 d; w = d sc_k (q - 32).
 * As llama.cpp does, the input vector is first quantised to 8 bits per 256 (its Q8_K: d = -max / 127 in float32
 * where max is the value of largest magnitude, q = round(x / d) to even capped at 127, and the sums of each 16 q);
 * each super-block's dot product is then exact in integers (unsigned 6-bit q by signed 8-bit x in pairs, times the
 * sub-block's scale, summed), Q6_K's 32 sum (sc_k sum_k x) and the mins' sum (m_j sum_j x) from the 16-sums, and the
 * float32 sum adds d_w d_x dot - dmin_w d_x mins per super-block. Every vector of a call gets the same operations
 * in the same order, so an output does not depend on how many vectors came with it.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fused.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block j (of 8) from the 12 packed bytes */
static inline void scale_min(int j, const uint8_t *q, int32_t *sc, int32_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* One super-block as the integer dot needs it: the 256 q as unsigned bytes (Q6_K's without the - 32), a scale per
 * sub-block of 16 (Q4_K/Q5_K: their scale of 32 twice), a min per 16 (0 for Q6_K), d and dmin. */
typedef struct {
    uint8_t q[256];
    int16_t sc[16], mn[16];
    float d, dmin;
} kblock;

static void kblock_unpack(kblock *k, int64_t kind, const uint8_t *b) {
    if (kind == BK_Q6_K) {
        const uint8_t *ql = b, *qh = b + 128;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32)
            for (int l = 0; l < 32; l++) {
                uint8_t *q = k->q + 128 * h;
                q[l] = (uint8_t)((ql[l] & 0xf) | ((qh[l] & 3) << 4));
                q[l + 32] = (uint8_t)((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4));
                q[l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                q[l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
            }
        for (int s = 0; s < 16; s++) k->sc[s] = (int8_t)b[192 + s], k->mn[s] = 0;
        k->d = wl_f16_at(b + 208);
        k->dmin = 0.0f;
        return;
    }
    const uint8_t *qs = b + (kind == BK_Q5_K ? 48 : 16), *qh = b + 16;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = qs[32 * c + l] & 0xf, hi = qs[32 * c + l] >> 4;
            if (kind == BK_Q5_K) lo |= ((qh[l] >> (2 * c)) & 1) << 4, hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
            k->q[64 * c + l] = (uint8_t)lo;
            k->q[64 * c + 32 + l] = (uint8_t)hi;
        }
    for (int j = 0; j < 8; j++) {
        int32_t sc, m;
        scale_min(j, b + 4, &sc, &m);
        k->sc[2 * j] = k->sc[2 * j + 1] = (int16_t)sc;
        k->mn[2 * j] = k->mn[2 * j + 1] = (int16_t)m;
    }
    k->d = wl_f16_at(b);
    k->dmin = wl_f16_at(b + 2);
}

int64_t wl_kquant_block_bytes(int64_t kind) {
    return kind == BK_Q4_K ? 144 : kind == BK_Q5_K ? 176 : kind == BK_Q6_K ? 210 : -1;
}

void wl_kquant_dequantize_row(float *out, const uint8_t *row, int64_t kind, int64_t n) {
    const int64_t bytes = wl_kquant_block_bytes(kind);
    kblock k;
    for (int64_t b = 0; b < n / 256; b++) {
        kblock_unpack(&k, kind, row + b * bytes);
        float *o = out + 256 * b;
        for (int i = 0; i < 256; i++) {
            const int s = i / 16;
            if (kind == BK_Q6_K)
                o[i] = k.d * (float)k.sc[s] * (float)((int)k.q[i] - 32);
            else /* llama.cpp's order: (d sc) q - (dmin m) */
                o[i] = (k.d * (float)k.sc[s]) * (float)k.q[i] - k.dmin * (float)k.mn[s];
        }
    }
}

#if defined(__AVX2__)
/* 32 floats times s, rounded to nearest even (the default rounding mode, as lrintf), capped at 127, as bytes in
 * order; *sum0 and *sum1 get the sums of the first and last 16 */
static inline void q8k_chunk(int8_t *restrict q, const float *restrict x, __m256 s, int16_t *sum0, int16_t *sum1) {
    __m256i v[4];
    for (int i = 0; i < 4; i++)
        v[i] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(s, _mm256_loadu_ps(x + 8 * i))), _mm256_set1_epi32(127));
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    _mm256_storeu_si256((__m256i *)(void *)q, _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    for (int h = 0; h < 2; h++) {
        const __m256i t = _mm256_add_epi32(v[2 * h], v[2 * h + 1]);
        __m128i u = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
        u = _mm_add_epi32(u, _mm_shuffle_epi32(u, 0x4e));
        u = _mm_add_epi32(u, _mm_shuffle_epi32(u, 0xb1));
        *(h ? sum1 : sum0) = (int16_t)_mm_cvtsi128_si32(u);
    }
}

/* The value of largest magnitude of x[0..256), the first one where several have it, as the scalar loop below finds
 * it (NaNs passed over); 0 where all are 0 */
static inline float q8k_max(const float *x) {
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 256; j += 8) m = _mm256_max_ps(_mm256_and_ps(abs, _mm256_loadu_ps(x + j)), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    const float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
    if (amax == 0.0f) return 0.0f;
    const __m256 a = _mm256_set1_ps(amax);
    for (int j = 0; j < 256; j += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(abs, _mm256_loadu_ps(x + j)), a, _CMP_EQ_OQ));
        if (hit) return x[j + __builtin_ctz((unsigned)hit)];
    }
    return 0.0f; /* not reached */
}
#endif

void wl_quantize_q8k(int8_t *restrict q, float *restrict d, int16_t *restrict bsum, const float *restrict x,
                     int64_t n) {
#if defined(__AVX2__)
    for (int64_t b = 0; b < n / 256; b++, x += 256, q += 256, bsum += 16) {
        const float max = q8k_max(x);
        if (max == 0.0f) {
            d[b] = 0.0f;
            memset(q, 0, 256);
            memset(bsum, 0, 32);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int c = 0; c < 8; c++) q8k_chunk(q + 32 * c, x + 32 * c, _mm256_set1_ps(iscale), bsum + 2 * c, bsum + 2 * c + 1);
        d[b] = 1.0f / iscale;
    }
#else
    for (int64_t b = 0; b < n / 256; b++, x += 256, q += 256, bsum += 16) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 256; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        if (amax == 0.0f) {
            d[b] = 0.0f;
            memset(q, 0, 256);
            memset(bsum, 0, 32);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < 256; j++) {
            const long v = lrintf(iscale * x[j]); /* to nearest even */
            q[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int s = 0; s < 16; s++) {
            int32_t total = 0;
            for (int j = 0; j < 16; j++) total += q[16 * s + j];
            bsum[s] = (int16_t)total;
        }
        d[b] = 1.0f / iscale;
    }
#endif
}

#if defined(__AVX2__)
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define K_DPWSSD(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))
#elif defined(__AVXVNNI__)
#define K_DPWSSD(acc, a, b) _mm256_dpwssd_avx_epi32((acc), (a), (b))
#else
#define K_DPWSSD(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#endif

static inline float hsum8(__m256 a) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 h2 = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
}

/* The 8 chunks of 32 q of a super-block, in registers, and per chunk its two sub-blocks' scales as 16 int16 */
typedef struct {
    __m256i q[8], sc[8], scales, mins;
    float d, dmin;
} kregs;

static inline __m256i nibbles(__m256i raw, int high) {
    const __m256i low = _mm256_set1_epi8(0x0f);
    return _mm256_and_si256(high ? _mm256_srli_epi16(raw, 4) : raw, low);
}

/* bits `shift` and shift + 1 of each byte of h, as 0..3 shifted to bits 4 and 5 (Q6_K) or bit `shift` to bit 4 */
static inline __m256i high_bits(__m256i h, int shift, int width) {
    const __m256i mask = _mm256_set1_epi8((char)(width == 2 ? 3 : 1));
    return _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(shift)), mask), 4);
}

/* Q4_K/Q5_K's 12 bytes of 6-bit scales and mins as 16 bytes: the 8 scales, then the 8 mins (scale_min for all j at
 * once, in 32-bit words: j < 4 the low 6 bits of bytes j and j + 4; j >= 4 a nibble of byte j + 4 with the top 2
 * bits of byte j - 4 or j) */
static inline __m128i scales_mins(const uint8_t *q) {
    uint32_t u[3];
    memcpy(u, q, 12);
    const uint32_t six = 0x3f3f3f3fu, four = 0x0f0f0f0fu, two = 0x03030303u;
    const uint32_t sc_hi = (u[2] & four) | ((u[0] >> 6) & two) << 4;
    const uint32_t m_hi = (u[2] >> 4 & four) | ((u[1] >> 6) & two) << 4;
    return _mm_setr_epi32((int)(u[0] & six), (int)sc_hi, (int)(u[1] & six), (int)m_hi);
}

static inline void kregs_load(kregs *k, int64_t kind, const uint8_t *b) {
    if (kind == BK_Q6_K) {
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)(b + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(b + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)(b + 128 + 32 * h));
            k->q[4 * h + 0] = _mm256_or_si256(nibbles(l0, 0), high_bits(hb, 0, 2));
            k->q[4 * h + 1] = _mm256_or_si256(nibbles(l1, 0), high_bits(hb, 2, 2));
            k->q[4 * h + 2] = _mm256_or_si256(nibbles(l0, 1), high_bits(hb, 4, 2));
            k->q[4 * h + 3] = _mm256_or_si256(nibbles(l1, 1), high_bits(hb, 6, 2));
        }
        k->scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(b + 192)));
        k->mins = _mm256_setzero_si256();
        k->d = wl_f16_at(b + 208);
        k->dmin = 0.0f;
    } else {
        const uint8_t *qs = b + (kind == BK_Q5_K ? 48 : 16);
        const __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)(b + 16));
        for (int c = 0; c < 4; c++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * c));
            k->q[2 * c] = nibbles(raw, 0);
            k->q[2 * c + 1] = nibbles(raw, 1);
            if (kind == BK_Q5_K) {
                k->q[2 * c] = _mm256_or_si256(k->q[2 * c], high_bits(hb, 2 * c, 1));
                k->q[2 * c + 1] = _mm256_or_si256(k->q[2 * c + 1], high_bits(hb, 2 * c + 1, 1));
            }
        }
        const __m128i sm = scales_mins(b + 4); /* each 6-bit value of 32 weights, twice: a value per 16 */
        const __m128i twice = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
        k->scales = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, twice));
        k->mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, _mm_add_epi8(twice, _mm_set1_epi8(8))));
        k->d = wl_f16_at(b);
        k->dmin = wl_f16_at(b + 2);
    }
    /* per chunk of 32 weights, the scales of its low and high 16 as 16 int16: scale s of 16 is int16 s of
     * k->scales (lane s / 8, element s % 8), chunk c's low 16 take s = 2 c, its high 16 s = 2 c + 1; each 128-bit
     * lane of the chunk's register picks its one int16 (one byte shuffle) from a copy of the right lane */
    const __m256i lo = _mm256_permute2x128_si256(k->scales, k->scales, 0x00);
    const __m256i hi = _mm256_permute2x128_si256(k->scales, k->scales, 0x11);
    for (int c = 0; c < 8; c++) {
        const int s0 = 2 * c, s1 = 2 * c + 1; /* scales of 16 in the chunk's low and high halves */
        const __m256i src = _mm256_blend_epi32(s0 < 8 ? lo : hi, s1 < 8 ? lo : hi, 0xf0);
        const char e0 = (char)(2 * (s0 % 8)), e1 = (char)(2 * (s1 % 8));
        const __m256i pick = _mm256_setr_epi8(e0, e0 + 1, e0, e0 + 1, e0, e0 + 1, e0, e0 + 1, e0, e0 + 1, e0, e0 + 1, e0,
                                              e0 + 1, e0, e0 + 1, e1, e1 + 1, e1, e1 + 1, e1, e1 + 1, e1, e1 + 1, e1,
                                              e1 + 1, e1, e1 + 1, e1, e1 + 1, e1, e1 + 1);
        k->sc[c] = _mm256_shuffle_epi8(src, pick);
    }
}

/* One vector's super-block b against the loaded k: adds into its two float accumulators */
static inline void kregs_dot(const kregs *k, int64_t kind, const wl_q8k_vec *v, int64_t b, __m256 *acc,
                             __m256 *mins) {
    const int8_t *x = v->q + 256 * b;
    __m256i even = _mm256_setzero_si256(), odd = even; /* two chains of multiply-adds, not one 8 long */
    for (int c = 0; c < 8; c += 2) { /* |q x pair| <= 2 63 127: no saturation */
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(x + 32 * c));
        const __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(x + 32 * c + 32));
        even = K_DPWSSD(even, _mm256_maddubs_epi16(k->q[c], x0), k->sc[c]);
        odd = K_DPWSSD(odd, _mm256_maddubs_epi16(k->q[c + 1], x1), k->sc[c + 1]);
    }
    __m256i dot = _mm256_add_epi32(even, odd); /* exact in int32: the same sum in any order */
    const __m256i bsum = _mm256_loadu_si256((const __m256i *)(const void *)(v->bsum + 16 * b));
    const float dx = v->d[b];
    if (kind == BK_Q6_K) /* sum sc (q - 32) x = sum sc q x - 32 sum sc (sum x) */
        dot = _mm256_sub_epi32(dot, _mm256_slli_epi32(_mm256_madd_epi16(bsum, k->scales), 5));
    else
        *mins = _mm256_fmadd_ps(_mm256_set1_ps(k->dmin * dx), _mm256_cvtepi32_ps(_mm256_madd_epi16(bsum, k->mins)),
                                *mins);
    *acc = _mm256_fmadd_ps(_mm256_set1_ps(k->d * dx), _mm256_cvtepi32_ps(dot), *acc);
}

static inline __attribute__((always_inline)) void kdots(int64_t kind, const uint8_t *restrict row,
                                                        const wl_q8k_vec *v, int64_t n, int64_t n_in,
                                                        float *restrict out) {
    const int64_t bytes = wl_kquant_block_bytes(kind);
    __m256 acc[WL_MAX_VECTORS], mins[WL_MAX_VECTORS];
    for (int64_t t = 0; t < n; t++) acc[t] = mins[t] = _mm256_setzero_ps();
    kregs k;
    for (int64_t b = 0; b < n_in / 256; b++) {
        kregs_load(&k, kind, row + b * bytes);
        for (int64_t t = 0; t < n; t++) kregs_dot(&k, kind, &v[t], b, &acc[t], &mins[t]);
    }
    for (int64_t t = 0; t < n; t++) out[t] = hsum8(acc[t]) - hsum8(mins[t]);
}

void wl_kquant_dots(int64_t kind, const uint8_t *restrict row, const wl_q8k_vec *v, int64_t n, int64_t n_in,
                    float *restrict out) {
    if (n == 1)
        kdots(kind, row, v, 1, n_in, out); /* the same code with the vector loop known to run once */
    else
        kdots(kind, row, v, n, n_in, out);
}
#else
void wl_kquant_dots(int64_t kind, const uint8_t *restrict row, const wl_q8k_vec *v, int64_t n, int64_t n_in,
                    float *restrict out) {
    const int64_t bytes = wl_kquant_block_bytes(kind);
    float acc[WL_MAX_VECTORS] = {0};
    kblock k;
    for (int64_t b = 0; b < n_in / 256; b++) {
        kblock_unpack(&k, kind, row + b * bytes);
        for (int64_t t = 0; t < n; t++) {
            const int8_t *x = v[t].q + 256 * b;
            const int16_t *bsum = v[t].bsum + 16 * b;
            int32_t dot = 0, mins = 0;
            for (int i = 0; i < 256; i++) dot += k.sc[i / 16] * (int32_t)k.q[i] * x[i];
            for (int s = 0; s < 16; s++) {
                if (kind == BK_Q6_K) dot -= 32 * k.sc[s] * bsum[s];
                mins += k.mn[s] * bsum[s];
            }
            acc[t] += k.d * v[t].d[b] * (float)dot - k.dmin * v[t].d[b] * (float)mins;
        }
    }
    for (int64_t t = 0; t < n; t++) out[t] = acc[t];
}
#endif
