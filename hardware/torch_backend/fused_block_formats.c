/* GGUF's block formats of 32 as the fused step reads them (W_BLOCKS): their sizes, their rows dequantised (the
 * embedding's rows, tests), and the 8-bit quantisation of an input vector in blocks of 32 that a product on them
 * starts with (llama.cpp's Q8_0 and Q8_1: d = max|x| / 127 rounded to fp16, q = round(x 127 / max|x|) to even, and
 * for Q4_1/Q5_1 s = d sum q rounded to fp16). The products themselves are fused_blocks.c and fused_kquants.c.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fused.h"
#if defined(__F16C__)
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
    case BK_Q8_0: return n_in / 32 * 34;
    case BK_Q4_K:
    case BK_Q5_K:
    case BK_Q6_K: return n_in % 256 ? -1 : n_in / 256 * wl_kquant_block_bytes(kind);
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

void wl_quantize_q8(int8_t *restrict q, float *restrict d, float *restrict s, int32_t *restrict sum,
                    const float *restrict x, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        const float *xb = x + 32 * b;
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
    }
}
