/* GGUF's block formats of 32 as the fused step reads them (W_BLOCKS): their sizes, their rows dequantised (the
 * embedding's rows, tests), and the 8-bit quantisation of an input vector in blocks of 32 that a product on them
 * starts with (llama.cpp's Q8_0 and Q8_1: d = max|x| / 127 rounded to fp16, q = round(x 127 / max|x|) to even, and
 * for Q4_1/Q5_1 s = d sum q rounded to fp16). The products themselves are fused_blocks.c and fused_kquants.c.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fused.h"
#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

float wl_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (mant << 13); /* inf, NaN */
    } else if (exp != 0) {
        u = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        u = sign;
    } else { /* subnormal: value mant 2^-24 */
        float f = (float)mant * 5.9604644775390625e-8f;
        memcpy(&u, &f, 4);
        u |= sign;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* f rounded to the nearest fp16 value (ties to even), as float32; what storing it as fp16 and reading it back gives */
float wl_round_f16(float f) {
#ifdef __F16C__
    return _cvtsh_ss(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint32_t a = u & 0x7fffffffu;
    if (a >= 0x477ff000u) return a > 0x7f800000u ? f : (u >> 31 ? -INFINITY : INFINITY); /* overflows fp16 */
    if (a < 0x38800000u) { /* below fp16's smallest normal: a multiple of 2^-24 */
        const float q = rintf(fabsf(f) * 16777216.0f) * 5.9604644775390625e-8f;
        return u >> 31 ? -q : q;
    }
    const uint32_t keep = a + 0xfffu + ((a >> 13) & 1u); /* round the 13 bits fp16 drops */
    u = (u & 0x80000000u) | (keep & ~0x1fffu);
    memcpy(&f, &u, 4);
    return f;
#endif
}

int64_t wl_block_row_bytes(int64_t kind, int64_t n_in) {
    switch (kind) {
    case BK_F32: return 4 * n_in;
    case BK_Q4_0:
    case BK_Q4_0_X8: return n_in / 32 * 18;
    case BK_Q4_1:
    case BK_Q4_1_X8: return n_in / 32 * 20;
    case BK_Q5_0:
    case BK_Q5_0_X8: return n_in / 32 * 22;
    case BK_Q5_1: return n_in / 32 * 24;
    case BK_Q8_0:
    case BK_Q8_0_X8: return n_in / 32 * 34;
    case BK_Q4_K:
    case BK_Q5_K:
    case BK_Q6_K: return n_in % 256 ? -1 : n_in / 256 * wl_kquant_block_bytes(kind);
    case BK_Q4_K_X8:
    case BK_Q5_K_X8:
    case BK_Q6_K_X8: return n_in % 256 ? -1 : n_in / 256 * wl_kquant_block_bytes(kind - 100);
    default: return -1;
    }
}


/* Row `row` (n values) of block format `kind` as float32: the values the file's blocks stand for. */
void wl_block_dequantize_row(float *out, const uint8_t *row, int64_t kind, int64_t n) {
    if (kind == BK_F32) {
        memcpy(out, row, sizeof(float) * (size_t)n);
        return;
    }
    if (wl_is_kquant(kind)) {
        wl_kquant_dequantize_row(out, row, kind, n);
        return;
    }
    const int64_t bytes = wl_block_row_bytes(kind, 32);
    for (int64_t b = 0; b < n / 32; b++) {
        const uint8_t *blk = row + b * bytes, *qs = blk + bytes - 16;
        float *o = out + 32 * b;
        const float d = wl_f16_at(blk);
        if (kind == BK_Q8_0) {
            for (int j = 0; j < 32; j++) o[j] = d * (float)(int8_t)blk[2 + j];
            continue;
        }
        uint32_t fifth = 0;
        if (kind == BK_Q5_0 || kind == BK_Q5_1) memcpy(&fifth, blk + bytes - 20, 4);
        const int zero = kind == BK_Q4_0 ? 8 : kind == BK_Q5_0 ? 16 : 0;
        const float m = wl_with_min(kind) ? wl_f16_at(blk + 2) : 0.0f;
        for (int j = 0; j < 16; j++) {
            const int lo = (qs[j] & 0xf) | (int)((fifth >> j) & 1) << 4;
            const int hi = (qs[j] >> 4) | (int)((fifth >> (j + 16)) & 1) << 4;
            o[j] = wl_with_min(kind) ? d * (float)lo + m : d * (float)(lo - zero);
            o[j + 16] = wl_with_min(kind) ? d * (float)hi + m : d * (float)(hi - zero);
        }
    }
}

void wl_block_table_row(float *out, const uint8_t *table, int64_t kind, int64_t n, int64_t index) {
    const int64_t bytes = wl_block_row_bytes(kind, n);
    if (!wl_is_x8(kind)) {
        wl_block_dequantize_row(out, table + index * bytes, kind, n);
        return;
    }
    if (wl_is_kx8(kind)) { /* the fields of hardware/blocks.py's _k_fields, row r's copy of field f (w bytes) at
                            * r w bytes past the 8 copies of the fields before it (fused_kquants_x8.c) */
        const int64_t base = kind - 100, sb = wl_kquant_block_bytes(base), r = index % 8;
        static const int order[8] = {0, 4, 1, 5, 2, 6, 3, 7};
        int64_t at[80], width[80], nf = 0;
        if (base != BK_Q6_K) {
            const int64_t head[5][2] = {{0, 2}, {2, 2}, {4, 4}, {8, 4}, {12, 4}};
            for (int i = 0; i < 5; i++) at[nf] = head[i][0], width[nf++] = head[i][1];
        }
        if (base != BK_Q6_K) { /* Q5_K: qh, then qs */
            for (int64_t c = 0; c < (base == BK_Q4_K ? 4 : 5); c++)
                for (int j = 0; j < 8; j++) at[nf] = 16 + 32 * c + 4 * order[j], width[nf++] = 4;
        } else { /* per half h and register p: qh's chunk h, ql's chunks 2 h and 2 h + 1; the half's scales; d */
            for (int h = 0; h < 2; h++) {
                for (int p = 0; p < 4; p++)
                    for (int c = 0; c < 3; c++) {
                        const int64_t chunk = c == 0 ? 128 + 32 * h : 64 * h + 32 * (c - 1);
                        at[nf] = chunk + 4 * p, width[nf++] = 4;
                        at[nf] = chunk + 4 * (p + 4), width[nf++] = 4;
                    }
                for (int s = 8 * h; s < 8 * h + 8; s++) at[nf] = 192 + s, width[nf++] = 1;
            }
            at[nf] = 208, width[nf++] = 2;
        }
        const uint8_t *group = table + index / 8 * 8 * bytes;
        uint8_t blk[210]; /* the largest super-block, Q6_K's */
        for (int64_t b = 0; b < n / 256; b++) {
            const uint8_t *g = group + 8 * sb * b;
            for (int64_t f = 0, x = 0; f < nf; x += 8 * width[f], f++)
                memcpy(blk + at[f], g + x + r * width[f], (size_t)width[f]);
            wl_kquant_dequantize_row(out + 256 * b, blk, base, 256);
        }
        return;
    }
    /* per block of the group: the 8 rows' heads (each 2-byte field of row r at 16 f + 2 r), then chunks of 32 bytes
     * (row r's q bytes 4 c .. 4 c + 3 at 32 c + 4 r); the row's own block put back together, then read */
    const int64_t base = kind - 100, bs = wl_block_row_bytes(base, 32), head = base == BK_Q4_1 ? 4 : base == BK_Q5_0 ? 6 : 2;
    const uint8_t *group = table + index / 8 * 8 * bytes;
    const int64_t r = index % 8;
    uint8_t blk[34];
    for (int64_t b = 0; b < n / 32; b++) {
        const uint8_t *g = group + 8 * bs * b;
        for (int64_t f = 0; f < (base == BK_Q5_0 ? 1 : head / 2); f++) memcpy(blk + 2 * f, g + 16 * f + 2 * r, 2);
        if (base == BK_Q5_0) { /* the row's fifth bits out of the group's masks (fused_blocks_x8.c, Q5_0_X8) */
            uint32_t qh = 0;
            for (int part = 0; part < 2; part++)
                for (int c = 0; c < 4; c++) {
                    uint64_t mask;
                    memcpy(&mask, g + 16 + 8 * (2 * (c / 2) + part), 8);
                    qh |= (uint32_t)((mask >> (4 * (r + 8 * (c % 2)))) & 0xf) << (16 * part + 4 * c);
                }
            memcpy(blk + 2, &qh, 4);
        }
        for (int64_t c = 0; c < (bs - head) / 4; c++) memcpy(blk + head + 4 * c, g + 8 * head + 32 * c + 4 * r, 4);
        wl_block_dequantize_row(out + 32 * b, blk, base, 32);
    }
}

#if defined(__AVX2__)
/* One block of 32 as the scalar loop below quantises it, in AVX2: the same amax (NaN ignored: max_ps keeps its
 * second operand), the same products, rounded to nearest even as lrintf, NaN as 0. */
static inline float q8_block_avx2(int8_t *restrict q, int32_t *restrict total, const float *restrict xb) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 x[4], m = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) x[k] = _mm256_loadu_ps(xb + 8 * k), m = _mm256_max_ps(_mm256_andnot_ps(sign, x[k]), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    const float amax = _mm_cvtss_f32(h), id = amax > 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i i[4];
    for (int k = 0; k < 4; k++) {
        const __m256 v = _mm256_mul_ps(x[k], vid);
        i[k] = _mm256_and_si256(_mm256_cvtps_epi32(v), _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_ORD_Q)));
    }
    const __m256i all = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(all), _mm256_extracti128_si256(all, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
    *total = _mm_cvtsi128_si32(t);
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
    _mm256_storeu_si256((__m256i *)(void *)q,
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    return amax;
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* 16 blocks of 32 as q8_block_avx2 and the loop below quantise them, 16 at a time in AVX-512 (the blocks' maxima,
 * divisions, sums and half-precision roundings side by side): the same bytes and floats, in a quarter of the time
 * (the step quantises each product's input on one thread, between products). */
static inline __m512 round_f16x16(__m512 v) { /* wl_round_f16 on 16 floats */
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

static void q8_blocks16_avx512(int8_t *restrict q, float *restrict d, float *restrict s, int32_t *restrict sum,
                               const float *restrict x) {
    float am[16];
    for (int k = 0; k < 16; k++) { /* NaN ignored: max_ps keeps its second operand */
        const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(x + 32 * k)), b = _mm512_abs_ps(_mm512_loadu_ps(x + 32 * k + 16));
        am[k] = _mm512_reduce_max_ps(_mm512_max_ps(b, _mm512_max_ps(a, _mm512_setzero_ps())));
    }
    const __m512 amax = _mm512_loadu_ps(am);
    const __mmask16 pos = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_GT_OQ);
    float id[16];
    _mm512_storeu_ps(id, _mm512_maskz_div_ps(pos, _mm512_set1_ps(127.0f), amax));
    int32_t t[16];
    for (int k = 0; k < 16; k++) {
        __m512i i[2];
        for (int h = 0; h < 2; h++) {
            const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + 32 * k + 16 * h), _mm512_set1_ps(id[k]));
            i[h] = _mm512_maskz_cvtps_epi32(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v); /* to nearest even, NaN 0 */
            _mm_storeu_si128((__m128i *)(void *)(q + 32 * k + 16 * h), _mm512_cvtsepi32_epi8(i[h]));
        }
        t[k] = _mm512_reduce_add_epi32(_mm512_add_epi32(i[0], i[1]));
    }
    const __m512 db = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
    const __m512 ts = _mm512_cvtepi32_ps(_mm512_loadu_si512((const void *)t));
    _mm512_storeu_ps(d, round_f16x16(db));
    _mm512_storeu_ps(s, round_f16x16(_mm512_mul_ps(db, ts)));
    memcpy(sum, t, sizeof t);
}
#endif

void wl_quantize_q8(int8_t *restrict q, float *restrict d, float *restrict s, int32_t *restrict sum,
                    const float *restrict x, int64_t n) {
    int64_t b = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    for (; b + 16 <= n / 32; b += 16) q8_blocks16_avx512(q + 32 * b, d + b, s + b, sum + b, x + 32 * b);
#endif
    for (; b < n / 32; b++) {
        const float *xb = x + 32 * b;
#if defined(__AVX2__)
        int32_t t;
        const float db = q8_block_avx2(q + 32 * b, &t, xb) / 127.0f;
        d[b] = wl_round_f16(db);
        s[b] = wl_round_f16(db * (float)t);
        sum[b] = t;
#else
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        const float db = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int32_t total = 0;
        for (int j = 0; j < 32; j++) {
            const int32_t v = (int32_t)lrintf(xb[j] * id); /* to nearest even, as the vector rounding */
            q[32 * b + j] = (int8_t)v;
            total += v;
        }
        d[b] = wl_round_f16(db);
        s[b] = wl_round_f16(db * (float)total);
        sum[b] = total;
#endif
    }
}
