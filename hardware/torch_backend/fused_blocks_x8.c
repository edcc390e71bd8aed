/* The fused step's products on GGUF Q4_0, Q4_1, Q5_0 and Q8_0 rows placed 8 at a time interleaved
 * (BlockWeight.interleaved, hardware/blocks.py), where a row at a time leaves the product bound by its arithmetic
 * rather than by memory: the 4- and 5-bit layouts wherever there is AVX2 (AVX2's multiply-add pairs, or with
 * AVX512-VNNI two chunks a multiply-add), Q8_0's with AVX512-VNNI. fused_blocks_matrix.c hands each group of 8 rows
 * here (wl_x8_dots); the input vectors are quantised there (wl_quantize_q8). */
#include <stdint.h>
#include <string.h>

#include "fused.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__)
#define BLOCKS_512 1 /* as fused_blocks.c: with AVX512-VNNI a block's two chunk pairs take one multiply-add each */
#endif

#if defined(__AVX2__) && defined(__F16C__)
#define BLOCKS_X8 1
/* Q4_0_X8 / Q4_1_X8: 8 rows of Q4_0 or Q4_1 interleaved, per block of 32 inputs 144 (160) bytes: the 8 rows' d
 * (fp16, row r at 2 r), Q4_1 their m, then 4 chunks of 32 bytes, chunk c holding bytes 4 c .. 4 c + 3 of each row's
 * 16 bytes of q (row r at 4 r): the same bytes as 8 rows of the file, moved. In a chunk's low nibbles lane r holds
 * row r's weights 4 c .. 4 c + 3, in its high ones 16 + 4 c ..: one unsigned-by-signed multiply-add against those 4
 * inputs broadcast serves all 8 rows.
 * Q5_0_X8: 8 rows of Q5_0 interleaved, per block of 32 inputs 176 bytes: the 8 rows' d, their 256 fifth bits as four
 * 64-bit byte masks (at 16 + 8 m), then the q chunks as Q4_0_X8's. Mask m = 2 h + part selects the bytes of the
 * register of chunks 2 h and 2 h + 1 (AVX-512's w[m] below; part 0 the low nibbles, 1 the high ones) whose weight has
 * its fifth bit set: bit 4 L + k is lane L's byte k (row L of chunk 2 h, row L - 8 of chunk 2 h + 1), taken from bit
 * 4 c + k (+ 16 for the high nibbles) of the row's fifth bits when the weights are placed (blocks.py's
 * Q5_0_X8_FIFTH). The selected bytes get 0x10, so q is 0..31: one masked add a register (AVX2: each chunk's 32 bits
 * of a mask spread to bytes, then or-ed in).
 * A block's 8 multiply-adds are summed in int16, Q4_0's and Q4_1's all 8 (16 products of 15 by 127 a lane: 30,480),
 * Q5_0's four at a time (8 products of 31 by 127: 31,496), then widened to int32, exactly; Q4_0's 8 sum x (Q5_0's 16) taken out; then d_w
 * (8 lanes) d_x times it into 8 row lanes, block after block; Q4_1's m_w s_x per block after all the dots, in block
 * order. Every vector's sums are made in the same order however many vectors a call takes, so n vectors give what one
 * at a time gives, bit for bit.
 * With AVX512-VNNI a block's chunks go two to a register (lanes 0..7 chunk c, 8..15 chunk c + 1), each register's
 * inputs picked from the block's 8 groups of 4 by one permutation, and its multiply-adds summed in int32 (exact), the
 * register's two halves added at the end: the same integers as AVX2's, so the same outputs bit for bit; or, where
 * wl_x8_narrow is set (AMD's CPUs by default: x8_width.py), Q4_0's, Q4_1's and Q8_0's on 256-bit registers, each
 * chunk against its 4 inputs broadcast (x8_idot256): the same integers again.
 * Q8_0_X8 (AVX512-VNNI only): 8 rows of Q8_0 interleaved, per block of 32 inputs 272 bytes: the 8 rows' d, then 8
 * chunks of 32 bytes, chunk c holding bytes 4 c .. 4 c + 3 of each row's 32 signed q. The multiply-add takes unsigned
 * weights, so they go in as q + 128 (a sign flip) and 128 sum x comes back out, exactly. */
/* 32 bits of a Q5_0_X8 mask as the register's bytes: 0x10 where bit j of m is set, else 0 */
static inline __m256i x8_mask_bytes(const uint8_t *at) {
    int32_t m;
    memcpy(&m, at, 4);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                            3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(m), spread), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, bit), _mm256_set1_epi8(0x10));
}

/* One block of a group: its 8 rows' d as floats and its weights as bytes 0..15 (0..31), chunk c's low nibbles in
 * w[2 c], its high ones in w[2 c + 1]. */
static inline __attribute__((always_inline)) __m256 x8_unpack(int64_t kind, const uint8_t *blk, __m256i w[8]) {
    const __m256i low = _mm256_set1_epi8(0x0f);
    const int64_t head = kind == BK_Q4_0_X8 ? 16 : kind == BK_Q4_1_X8 ? 32 : 48;
    for (int c = 0; c < 4; c++) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(const void *)(blk + head + 32 * c));
        w[2 * c] = _mm256_and_si256(raw, low);
        w[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
    }
    if (kind == BK_Q5_0_X8) /* chunk c's 32 bits: mask 2 (c / 2) + part, its low or high half as c is even or odd */
        for (int c = 0; c < 4; c++) {
            const uint8_t *m = blk + 16 + 16 * (c / 2) + 4 * (c % 2);
            w[2 * c] = _mm256_or_si256(w[2 * c], x8_mask_bytes(m));
            w[2 * c + 1] = _mm256_or_si256(w[2 * c + 1], x8_mask_bytes(m + 8));
        }
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)blk));
}

static inline __m256i x8_bcast(const int8_t *x) { /* 4 inputs broadcast to every lane, from memory */
    int32_t v;
    memcpy(&v, x, 4);
    return _mm256_set1_epi32(v);
}

/* The 8 rows' integer dots with one vector's block of 32 q (x): w[2 c] meets inputs 4 c .., w[2 c + 1] 16 + 4 c ..;
 * the int16 sums of Q5_0 (split) in two halves of four multiply-adds. */
static inline __attribute__((always_inline)) __m256i x8_idot(const __m256i w[8], const int8_t *x, int split) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s0 = _mm256_maddubs_epi16(w[0], x8_bcast(x));
    s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(w[1], x8_bcast(x + 16)));
    s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(w[2], x8_bcast(x + 4)));
    s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(w[3], x8_bcast(x + 20)));
    __m256i s1 = _mm256_maddubs_epi16(w[4], x8_bcast(x + 8));
    s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(w[5], x8_bcast(x + 24)));
    s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(w[6], x8_bcast(x + 12)));
    s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(w[7], x8_bcast(x + 28)));
    if (!split) return _mm256_madd_epi16(_mm256_add_epi16(s0, s1), ones);
    return _mm256_add_epi32(_mm256_madd_epi16(s0, ones), _mm256_madd_epi16(s1, ones));
}

#ifdef BLOCKS_512
/* With AVX512-VNNI, one block of a group as 4 registers, chunks 0 and 1 in one and chunks 2 and 3 in the other: w[0]
 * their low nibbles (lanes 0..7: row r's weights 0..3, lanes 8..15: 4..7), w[1] their high ones (16..19, 20..23),
 * w[2] and w[3] those of chunks 2 and 3 (8..11, 12..15; 24..27, 28..31). */
static inline __attribute__((always_inline)) __m256 x8_unpack512(int64_t kind, const uint8_t *blk, __m512i w[4]) {
    if (kind == BK_Q8_0_X8) { /* chunks 2 h and 2 h + 1 in w[h], as unsigned bytes w + 128 (a sign flip) */
        for (int h = 0; h < 4; h++)
            w[h] = _mm512_xor_si512(_mm512_loadu_si512((const void *)(blk + 16 + 64 * h)), _mm512_set1_epi8((char)0x80));
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)blk));
    }
    const __m512i low = _mm512_set1_epi8(0x0f);
    const int64_t head = kind == BK_Q4_0_X8 ? 16 : kind == BK_Q4_1_X8 ? 32 : 48;
    for (int h = 0; h < 2; h++) {
        const __m512i raw = _mm512_loadu_si512((const void *)(blk + head + 64 * h));
        w[2 * h] = _mm512_and_si512(raw, low);
        w[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);
    }
    if (kind == BK_Q5_0_X8) { /* the fifth bits: 16 added to the bytes each mask selects */
        const __m512i sixteen = _mm512_set1_epi8(0x10);
        for (int m = 0; m < 4; m++) {
            uint64_t mask;
            memcpy(&mask, blk + 16 + 8 * m, 8);
            w[m] = _mm512_mask_add_epi8(w[m], (__mmask64)mask, w[m], sixteen);
        }
    }
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)blk));
}

/* The 8 rows' integer dots with one vector's block of 32 q spread (e: wl_x8_spread's 4 registers, register h holding
 * x's 4-byte groups 2 h and 2 h + 1 over the two halves), exact int32 sums of the two halves */
static inline __attribute__((always_inline)) __m256i x8_idot512(int64_t kind, const __m512i w[4], const int8_t *e) {
    const int q8 = kind == BK_Q8_0_X8; /* w[h] holds inputs 8 h .. 8 h + 7 (4-bit: w[1] the high nibbles, 16 ..) */
    __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], _mm512_loadu_si512((const void *)e));
    s = _mm512_dpbusd_epi32(s, w[1], _mm512_loadu_si512((const void *)(e + (q8 ? 64 : 128))));
    s = _mm512_dpbusd_epi32(s, w[2], _mm512_loadu_si512((const void *)(e + (q8 ? 128 : 64))));
    s = _mm512_dpbusd_epi32(s, w[3], _mm512_loadu_si512((const void *)(e + 192)));
    return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

/* The same integers on 256-bit registers (AVX512-VNNI's 256-bit multiply-add, "narrow"): the block unpacked as
 * AVX2's 8 registers (x8_unpack; Q8_0_X8's 8 chunks as bytes w + 128), each multiplied with its 4 inputs broadcast
 * from the quantised vector (no spread form). Where 512-bit operations run as two halves (AMD's Zen 4) they cost
 * the ALUs the same, and the loads are 32 bytes rather than 64 (3 in 4 of a 144-byte Q4_0 block's 64-byte loads
 * cross a cache line, 1 in 4 of its 32-byte ones). On a Zen 4, a standalone loop over 170 MB of Q4_0 groups read them
 * at 23 GB/s wide and 28 narrow (a plain read: 26), and SmolLM2 Q4_0 / Q4_1 steps took 3-10% less time narrow
 * (docs/benchmarks-decode.md); Q5_0's narrow product (its fifth bits or-ed in, AVX2's way) was slower there, so
 * it stays wide. wl_x8_narrow chooses (x8_width.py); the same integers, so the same outputs bit for bit. */
static inline __attribute__((always_inline)) __m256i x8_idot256(int64_t kind, const __m256i w[8], const int8_t *x) {
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    if (kind == BK_Q8_0_X8) { /* chunk c: inputs 4 c .. 4 c + 3 */
        for (int c = 0; c < 8; c += 2) {
            s0 = _mm256_dpbusd_epi32(s0, w[c], x8_bcast(x + 4 * c));
            s1 = _mm256_dpbusd_epi32(s1, w[c + 1], x8_bcast(x + 4 * c + 4));
        }
    } else { /* w[2 c]: inputs 4 c .., w[2 c + 1]: 16 + 4 c .. */
        for (int c = 0; c < 4; c++) {
            s0 = _mm256_dpbusd_epi32(s0, w[2 * c], x8_bcast(x + 4 * c));
            s1 = _mm256_dpbusd_epi32(s1, w[2 * c + 1], x8_bcast(x + 16 + 4 * c));
        }
    }
    return _mm256_add_epi32(s0, s1);
}

static inline __attribute__((always_inline)) __m256 x8_unpack_q8(const uint8_t *blk, __m256i w[8]) {
    for (int c = 0; c < 8; c++)
        w[c] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(blk + 16 + 32 * c)),
                                _mm256_set1_epi8((char)0x80));
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)blk));
}
#endif

/* Vectors t0 .. t0 + V - 1 (V <= 4) against one group: each block's weights unpacked once for all V. Inlined with V
 * a constant 4 for whole tiles, so that the loop over the vectors unrolls. */
static inline __attribute__((always_inline)) void x8_tile(int64_t kind, const uint8_t *restrict g,
                                                          const wl_q8_vec *v, int64_t t0, const int64_t V, int64_t nb,
                                                          float *y, int64_t ys, const float *b8, const int narrow) {
    const int64_t bb = kind == BK_Q4_0_X8 ? 144 : kind == BK_Q4_1_X8 ? 160 : kind == BK_Q5_0_X8 ? 176 : 272;
    /* q's offset: sum x times it (Q8_0's is the sign flip's 128) */
    const int32_t zero = kind == BK_Q4_0_X8 ? 8 : kind == BK_Q5_0_X8 ? 16 : kind == BK_Q8_0_X8 ? 128 : 0;
#ifndef BLOCKS_512
    (void)narrow; /* AVX2 only: one width */
#endif
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        if (t0 == 0) wl_x8_prefetch(g + bb * b, bb); /* the first tile reads the group from memory */
#ifdef BLOCKS_512
        __m512i w[4];
        __m256i w8[8];
        const __m256 dw = !narrow ? x8_unpack512(kind, g + bb * b, w)
                          : kind == BK_Q8_0_X8 ? x8_unpack_q8(g + bb * b, w8) : x8_unpack(kind, g + bb * b, w8);
#else
        __m256i w[8];
        const __m256 dw = x8_unpack(kind, g + bb * b, w);
#endif
        for (int64_t t = 0; t < V; t++) {
            const wl_q8_vec *vt = v + t0 + t;
#ifdef BLOCKS_512
            __m256i dot = narrow ? x8_idot256(kind, w8, vt->q + 32 * b) : x8_idot512(kind, w, vt->e + 256 * b);
#else
            __m256i dot = x8_idot(w, vt->q + 32 * b, kind == BK_Q5_0_X8);
#endif
            if (zero) dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(zero * vt->sum[b]));
            const __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ss(vt->d + b));
            acc[t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(dot), acc[t]);
        }
    }
    if (kind == BK_Q4_1_X8) /* m_w s_x per block, after the dots, in block order */
        for (int64_t b = 0; b < nb; b++) {
            const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + bb * b + 16)));
            for (int64_t t = 0; t < V; t++)
                acc[t] = _mm256_fmadd_ps(m, _mm256_broadcast_ss(v[t0 + t].s + b), acc[t]);
        }
    const __m256 bias = b8 != NULL ? _mm256_loadu_ps(b8) : _mm256_setzero_ps();
    for (int64_t t = 0; t < V; t++) _mm256_storeu_ps(y + (t0 + t) * ys, _mm256_add_ps(acc[t], bias));
}

static inline __attribute__((always_inline)) void x8_group(int64_t kind, const uint8_t *g, const wl_q8_vec *v,
                                                           int64_t n, int64_t nb, float *y, int64_t ys,
                                                           const float *b8, const int narrow) {
    int64_t t0 = 0;
    for (; t0 + 4 <= n; t0 += 4) x8_tile(kind, g, v, t0, 4, nb, y, ys, b8, narrow);
    /* the rest with V a constant too (a one-token step's one vector above all): with V known only at run time the
     * accumulators lived on the stack, each block's multiply-add waiting on the last one's store (Q4_1 at one
     * vector 2.03 ns per row and block against 1.28 for Q4_0) */
    if (n - t0 == 1) x8_tile(kind, g, v, t0, 1, nb, y, ys, b8, narrow);
    else if (n - t0 == 2) x8_tile(kind, g, v, t0, 2, nb, y, ys, b8, narrow);
    else if (n - t0 == 3) x8_tile(kind, g, v, t0, 3, nb, y, ys, b8, narrow);
}

/* one copy per kind (and, with AVX512-VNNI, per width: wl_x8_narrow), so that each inlined tile knows its layout */
#ifdef BLOCKS_512
#define X8_EITHER(kind)                                                                                               \
    (wl_x8_narrow ? x8_group(kind, g, v, n, nb, y, ys, b8, 1) : x8_group(kind, g, v, n, nb, y, ys, b8, 0))
#else
#define X8_EITHER(kind) x8_group(kind, g, v, n, nb, y, ys, b8, 0)
#endif
static void x8_q4_0(const uint8_t *g, const wl_q8_vec *v, int64_t n, int64_t nb, float *y, int64_t ys,
                    const float *b8) {
    X8_EITHER(BK_Q4_0_X8);
}
static void x8_q4_1(const uint8_t *g, const wl_q8_vec *v, int64_t n, int64_t nb, float *y, int64_t ys,
                    const float *b8) {
    X8_EITHER(BK_Q4_1_X8);
}
static void x8_q5_0(const uint8_t *g, const wl_q8_vec *v, int64_t n, int64_t nb, float *y, int64_t ys,
                    const float *b8) {
    x8_group(BK_Q5_0_X8, g, v, n, nb, y, ys, b8, 0); /* always wide: narrow, it was slower (x8_width.py) */
}
#ifdef BLOCKS_512
static void x8_q8_0(const uint8_t *g, const wl_q8_vec *v, int64_t n, int64_t nb, float *y, int64_t ys,
                    const float *b8) {
    X8_EITHER(BK_Q8_0_X8);
}
#endif
#undef X8_EITHER
#endif

int wl_x8_narrow = 0; /* fused.h */

int wl_x8_reads_spread(int64_t kind) {
    if (!wl_is_x8(kind) || wl_is_kx8(kind)) return 0; /* the 8-row layouts of blocks of 32 only */
    return !wl_x8_narrow || kind == BK_Q5_0_X8; /* narrow: X8_EITHER's kinds read the quantised vector itself */
}

int64_t waferline_set_x8_narrow(int64_t on) {
#ifdef BLOCKS_512
    const int64_t before = wl_x8_narrow;
    if (on >= 0) wl_x8_narrow = on != 0;
    return before;
#else
    (void)on;
    return -1; /* no 512-bit path to choose against */
#endif
}

void wl_x8_dots(int64_t kind, const uint8_t *group, const wl_q8_vec *v, int64_t n, int64_t nb, float *y, int64_t ys,
                const float *bias) {
#ifdef BLOCKS_X8
    if (kind == BK_Q4_0_X8)
        x8_q4_0(group, v, n, nb, y, ys, bias);
    else if (kind == BK_Q4_1_X8)
        x8_q4_1(group, v, n, nb, y, ys, bias);
#ifdef BLOCKS_512
    else if (kind == BK_Q8_0_X8)
        x8_q8_0(group, v, n, nb, y, ys, bias);
#endif
    else
        x8_q5_0(group, v, n, nb, y, ys, bias);
#else
    (void)kind, (void)group, (void)v, (void)n, (void)nb, (void)y, (void)ys, (void)bias;
#endif
}

int64_t wl_x8_spread(int8_t *e, const int8_t *q, int64_t n) {
#ifdef BLOCKS_512
    for (int64_t b = 0; b < n / 32; b++) {
        const __m512i xb = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(q + 32 * b)));
        for (int h = 0; h < 4; h++) {
            const __m512i pick = _mm512_inserti64x4(_mm512_set1_epi32(2 * h), _mm256_set1_epi32(2 * h + 1), 1);
            _mm512_storeu_si512((void *)(e + 256 * b + 64 * h), _mm512_permutexvar_epi32(pick, xb));
        }
    }
    return 1;
#else
    (void)e, (void)q, (void)n;
    return 0;
#endif
}

/* For the loader: which X8 layouts this build multiplies (fused.h's WL_X8_* bits): Q4_0_X8 / Q4_1_X8 / Q5_0_X8 with
 * AVX2, Q8_0_X8, Q4_K_X8 and Q6_K_X8 with AVX512-VNNI too */
int64_t waferline_blocks_x8(void) {
#ifdef BLOCKS_512
    return WL_X8_FOUR_BIT | WL_X8_Q8_0 | (wl_kx8_built() ? WL_X8_KQUANT : 0);
#elif defined(BLOCKS_X8)
    return WL_X8_FOUR_BIT;
#else
    return 0;
#endif
}
