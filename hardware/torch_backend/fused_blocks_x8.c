/* The fused step's products on GGUF Q4_0, Q4_1 and Q5_0 rows placed 8 at a time interleaved (BlockWeight.interleaved,
 * hardware/device.py): the layout for CPUs with AVX2 but not AVX-512, where a row at a time leaves the product bound
 * by its arithmetic rather than by memory. fused_blocks.c hands each group of 8 rows here (wl_x8_dots); the input
 * vectors are quantised there (wl_quantize_q8). */
#include <stdint.h>
#include <string.h>

#include "fused.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__)
#define BLOCKS_512 1 /* as fused_blocks.c: with AVX-512 the four-block groups of one row are the faster product */
#endif

#if defined(__AVX2__) && defined(__F16C__) && !defined(BLOCKS_512)
#define BLOCKS_X8 1
/* Q4_0_X8 / Q4_1_X8: 8 rows of Q4_0 or Q4_1 interleaved, per block of 32 inputs 144 (160) bytes: the 8 rows' d
 * (fp16, row r at 2 r), Q4_1 their m, then 4 chunks of 32 bytes, chunk c holding bytes 4 c .. 4 c + 3 of each row's
 * 16 bytes of q (row r at 4 r): the same bytes as 8 rows of the file, moved. In a chunk's low nibbles lane r holds
 * row r's weights 4 c .. 4 c + 3, in its high ones 16 + 4 c ..: one unsigned-by-signed multiply-add against those 4
 * inputs broadcast serves all 8 rows, the 8 of a block summed in int16 (at most 16 products of 15 by 127 a lane:
 * 30,480), then in int32, exactly; Q4_0's 8 sum x taken out; then d_w (8 lanes) d_x times it into 8 row lanes. */
static void x8_dots(int64_t kind, const uint8_t *restrict g, const wl_q8_vec *v, int64_t n, int64_t nb, float *out) {
    const int min = kind == BK_Q4_1_X8;
    const int64_t head = min ? 32 : 16, bb = head + 128;
    const __m256i low = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    for (int64_t t0 = 0; t0 < n; t0 += 4) {
        const int64_t V = n - t0 < 4 ? n - t0 : 4;
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = g + bb * b;
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)blk));
            __m256i w[8];
            for (int c = 0; c < 4; c++) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(const void *)(blk + head + 32 * c));
                w[2 * c] = _mm256_and_si256(raw, low);
                w[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
            }
            for (int64_t t = 0; t < V; t++) {
                const int8_t *x = v[t0 + t].q + 32 * b;
                int32_t xs[8];
                memcpy(xs, x, 16);
                memcpy(xs + 4, x + 16, 16);
                __m256i s = _mm256_maddubs_epi16(w[0], _mm256_set1_epi32(xs[0]));
                s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[1], _mm256_set1_epi32(xs[4])));
                for (int c = 1; c < 4; c++) {
                    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[2 * c], _mm256_set1_epi32(xs[c])));
                    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[2 * c + 1], _mm256_set1_epi32(xs[4 + c])));
                }
                __m256i dot = _mm256_madd_epi16(s, ones);
                if (!min) dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(8 * v[t0 + t].sum[b]));
                const __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ss(v[t0 + t].d + b));
                acc[t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(dot), acc[t]);
            }
        }
        if (min) /* m_w s_x per block, after the dots, in block order */
            for (int64_t b = 0; b < nb; b++) {
                const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + bb * b + 16)));
                for (int64_t t = 0; t < V; t++)
                    acc[t] = _mm256_fmadd_ps(m, _mm256_broadcast_ss(v[t0 + t].s + b), acc[t]);
            }
        for (int64_t t = 0; t < V; t++) {
            float lanes[8];
            _mm256_storeu_ps(lanes, acc[t]);
            for (int r = 0; r < 8; r++) out[r * WL_MAX_VECTORS + t0 + t] = lanes[r];
        }
    }
}
/* Q5_0_X8: 8 rows of Q5_0 interleaved, per block of 32 inputs 176 bytes: the 8 rows' d, the low 16 of their fifth
 * bits (row r's at 16 + 2 r: inputs 0..15), the high 16 (at 32 + 2 r: inputs 16..31), then the q chunks as Q4_0_X8's.
 * A chunk's bytes get their fifth bit as 0x10 (lane r, byte k of chunk c: bit 4 c + k of row r's low half for the low
 * nibble, of its high half for the high one), so q is 0..31; the products are summed in int16 four multiply-adds at
 * a time (8 products of 31 by 127 a lane: 31,496), each sum widened to int32, exactly; 16 sum x taken out. */
static inline __m256i x8_fifth(__m256i half, int c) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0, 0, 4, 4, 4, 4,
                                            8, 8, 8, 8, 12, 12, 12, 12);
    const __m256i bit = _mm256_set1_epi32(0x08040201);
    const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_srli_epi32(half, 4 * c), spread), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, bit), _mm256_set1_epi8(0x10));
}

static void x8_q5_dots(const uint8_t *restrict g, const wl_q8_vec *v, int64_t n, int64_t nb, float *out) {
    const int64_t bb = 48 + 128;
    const __m256i low = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    for (int64_t t0 = 0; t0 < n; t0 += 4) {
        const int64_t V = n - t0 < 4 ? n - t0 : 4;
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = g + bb * b;
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)blk));
            const __m256i lo = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(blk + 16)));
            const __m256i hi = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(blk + 32)));
            __m256i w[8];
            for (int c = 0; c < 4; c++) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 48 + 32 * c));
                w[2 * c] = _mm256_or_si256(_mm256_and_si256(raw, low), x8_fifth(lo, c));
                w[2 * c + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), low), x8_fifth(hi, c));
            }
            for (int64_t t = 0; t < V; t++) {
                const int8_t *x = v[t0 + t].q + 32 * b;
                int32_t xs[8];
                memcpy(xs, x, 16);
                memcpy(xs + 4, x + 16, 16);
                __m256i s0 = _mm256_maddubs_epi16(w[0], _mm256_set1_epi32(xs[0]));
                s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(w[1], _mm256_set1_epi32(xs[4])));
                s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(w[2], _mm256_set1_epi32(xs[1])));
                s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(w[3], _mm256_set1_epi32(xs[5])));
                __m256i s1 = _mm256_maddubs_epi16(w[4], _mm256_set1_epi32(xs[2]));
                s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(w[5], _mm256_set1_epi32(xs[6])));
                s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(w[6], _mm256_set1_epi32(xs[3])));
                s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(w[7], _mm256_set1_epi32(xs[7])));
                __m256i dot = _mm256_add_epi32(_mm256_madd_epi16(s0, ones), _mm256_madd_epi16(s1, ones));
                dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(16 * v[t0 + t].sum[b]));
                const __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ss(v[t0 + t].d + b));
                acc[t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(dot), acc[t]);
            }
        }
        for (int64_t t = 0; t < V; t++) {
            float lanes[8];
            _mm256_storeu_ps(lanes, acc[t]);
            for (int r = 0; r < 8; r++) out[r * WL_MAX_VECTORS + t0 + t] = lanes[r];
        }
    }
}
#endif

void wl_x8_dots(int64_t kind, const uint8_t *group, const wl_q8_vec *v, int64_t n, int64_t nb, float *out) {
#ifdef BLOCKS_X8
    if (kind == BK_Q5_0_X8)
        x8_q5_dots(group, v, n, nb, out);
    else
        x8_dots(kind, group, v, n, nb, out);
#else
    (void)kind, (void)group, (void)v, (void)n, (void)nb, (void)out;
#endif
}

/* For the loader: whether this build multiplies Q4_0_X8 / Q4_1_X8 / Q5_0_X8 rows (AVX2 without AVX-512: with AVX-512 the
 * four-block groups of one row are the faster product) */
int64_t waferline_blocks_x8(void) {
#ifdef BLOCKS_X8
    return 1;
#else
    return 0;
#endif
}
