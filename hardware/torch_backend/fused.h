/* What the fused step's C files share (compiled together into one library by fused_library.py).
 *
 * fused_pool.c      the worker threads that split a step's products between cores, and the read probe
 * fused_linear.c    the matrix products (int8 rows with 8-bit activations, float32) and the quantisation
 * fused_packed.c    the int8 product on packed weights (small models: no reduction across lanes)
 * fused_block_formats.c  GGUF's blocks of 32: sizes, values, and the 8-bit quantisation of the products' inputs
 * fused_blocks.c    the products on GGUF block-quantised weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) as the file stores them
 * fused_blocks_matrix.c  a matrix of such rows: its segments, its vectors quantised, its rows shared between threads
 * fused_kquants.c   the same for GGUF's K-quant super-blocks of 256 (Q4_K, Q5_K, Q6_K)
 * fused_blocks_x8.c, fused_kquants_x8.c  the same on 8 rows interleaved (Q4_0, Q4_1, Q5_0, Q8_0; Q4_K, Q5_K, Q6_K)
 * fused_attention.c one KV head's attention for the queries of n tokens
 * fused_math.c      the vectorised exp (softmax, SiLU), and each logits row's argmax and logsumexp
 * fused_step.c      the step itself: embedding, norms, rotary, the KV cache, the order of the layers
 */
#ifndef WAFERLINE_FUSED_H
#define WAFERLINE_FUSED_H
#include <stdint.h>
#include <string.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

enum { KV_F32 = 0, KV_BF16 = 1 }; /* the KV cache's (and the embedding's) element formats */

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Weight formats: float32 (in, out); int8 rows (out, in); int8 packed for the VNNI product that needs no reduction
 * (fused_packed.c says how), which fused.py makes for models small enough to hold a second copy. */
enum { W_F32 = 0, W_INT8 = 1, W_INT8_PACKED = 2, W_BLOCKS = 3 };
/* waferline_int8_features(): how this build runs int8 products (the packed layout is vectorised with VNNI only) */
enum { WL_INT8_VNNI = 1, WL_INT8_AVX2 = 2 };
int64_t waferline_int8_features(void);
/* GGUF block formats (ggml's type numbers) a W_BLOCKS matrix's segments, or the embedding (EMB_BLOCKS + kind), hold */
enum { BK_F32 = 0, BK_Q4_0 = 2, BK_Q4_1 = 3, BK_Q5_0 = 6, BK_Q5_1 = 7, BK_Q8_0 = 8, BK_Q4_K = 12, BK_Q5_K = 13, BK_Q6_K = 14 };
/* Q4_0, Q4_1, Q5_0 and Q8_0 with 8 rows interleaved (fused_blocks_x8.c says how): the file's bytes rearranged at
 * load where the product on them is built (waferline_blocks_x8()), never in a file */
enum { BK_Q4_0_X8 = 102, BK_Q4_1_X8 = 103, BK_Q5_0_X8 = 106, BK_Q8_0_X8 = 108 };
/* Q4_K, Q5_K and Q6_K with 8 rows interleaved (fused_kquants_x8.c says how), likewise */
enum { BK_Q4_K_X8 = 112, BK_Q5_K_X8 = 113, BK_Q6_K_X8 = 114 };
/* waferline_blocks_x8()'s bits: the 4- and 5-bit X8 products (AVX2), Q8_0_X8's and the K-quants' (AVX512-VNNI) */
enum { WL_X8_FOUR_BIT = 1, WL_X8_Q8_0 = 2, WL_X8_KQUANT = 4 };
enum { EMB_BLOCKS = 16 };
enum { WL_MAX_VECTORS = 16 }; /* vectors one wl_linear call takes (the step's tokens at once) */
/* Bytes ahead that the 8-row products' first tile of a group asks the memory for, a block's lines at a time
 * (wl_x8_prefetch: fused_blocks_x8.c, fused_kquants_x8.c): the hardware's prefetch alone left a one-token step's
 * products waiting on DRAM (~11 GB/s of ~16). A SmolLM2 Q4_0 one-token step, 4 alternated runs of each: 97-113
 * tok/s without, 108-121 at 4096 (2048 and 8192 in between); the earlier prefetch of the whole next group at once,
 * from block_rows, had slowed them. 0: none. */
#ifndef X8_PREFETCH
#define X8_PREFETCH 4096
#endif
/* Whether the products prefetch at all (1 unless waferline_set_prefetch turned it off, fused_blocks_matrix.c): on
 * an AMD EPYC (Zen 4) the hardware's prefetch alone was the faster, the software's cost SmolLM2 steps 5-13% (the
 * step chooses at run time: hardware/torch_backend/prefetch.py). */
extern int wl_prefetch_on;
static inline void wl_x8_prefetch(const uint8_t *block, int64_t bytes) {
    if (!X8_PREFETCH || !wl_prefetch_on) return;
    for (int64_t line = 0; line < bytes; line += 64) __builtin_prefetch(block + X8_PREFETCH + line, 0, 3);
}
enum { WL_CHUNK_BYTES = 32768 }; /* weight bytes per chunk of a product handed to a thread (whole blocks of rows) */

/* -- fused_pool.c ---------------------------------------------------------------------------------------------------
 * wl_parallel runs fn(ctx, begin, end) over [0, n_items) cut into chunks of `grain` items, on up to `threads` threads
 * (the caller's and threads - 1 workers), and returns when every chunk is done. Chunks are claimed one at a time, so
 * a worker that the OS has preempted costs no waiting: the others take its share. Which thread runs which chunk is
 * not fixed, so fn must compute each item the same way wherever it runs (every caller here splits by output rows,
 * which keeps every result bit for bit what one thread computes). Called from one thread at a time per process; a
 * second caller meanwhile runs its work alone. */
typedef void (*wl_task)(const void *ctx, int64_t begin, int64_t end);
void wl_parallel(int64_t threads, wl_task fn, const void *ctx, int64_t n_items, int64_t grain);
enum { WL_MAX_THREADS = 64 };

/* -- fused_linear.c ------------------------------------------------------------------------------------------------ */
/* A linear weight as placed: int8 rows (out, in) with per-row float scales and int32 row sums, the same int8 weights
 * packed (rowsum unused), or float32 (in, out). */
typedef struct {
    const void *w;
    const float *scale;
    const int32_t *rowsum;
    const float *bias;
    int64_t n_in, n_out, fmt;
} wl_matrix;

/* y[t] = W x[t] (+ b) for n vectors (x rows `xs` floats apart, y rows `ys` apart), every weight read once for all n
 * and each output row by one thread; n <= WL_MAX_VECTORS. xq: WL_MAX_VECTORS * n_in bytes (n_in rounded up to a
 * multiple of 4) and sx: n floats, of scratch (int8). */
void wl_linear(float *y, int64_t ys, const float *x, int64_t xs, int64_t n, const wl_matrix *m, uint8_t *xq,
               float *sx, int64_t threads);
/* the symmetric 8-bit scale of x: s = max |x[i]| / 127, and *inv = 1 / s (0 for an all-zero x); returns s */
float wl_quant_scale(const float *x, int64_t n, float *inv);
/* q[i] = round(x[i] * inv) + offset as bytes; returns the sum of the rounded values */
int32_t wl_quantize_bytes(uint8_t *q, const float *x, int64_t n, float inv, int32_t offset);

/* -- fused_packed.c ------------------------------------------------------------------------------------------------ */
void wl_linear_packed(float *y, int64_t ys, const float *x, int64_t xs, int64_t n, const wl_matrix *m, uint8_t *xq,
                      float *sx, int64_t threads); /* wl_linear for W_INT8_PACKED */

/* -- fused_blocks.c ------------------------------------------------------------------------------------------------
 * W_BLOCKS: m->w is the rows' bytes as the GGUF file stores them, m->scale (cast) the int64 segment table (count,
 * then per segment its BK_* format and rows); xq: n * wl_blocks_scratch_bytes(n_in) bytes of scratch. */
void wl_linear_blocks(float *y, int64_t ys, const float *x, int64_t xs, int64_t n, const wl_matrix *m, uint8_t *xq,
                      int64_t threads);
int64_t wl_blocks_scratch_bytes(int64_t n_in);
int wl_blocks_valid(const int64_t *table, int64_t n_in, int64_t n_out); /* 1: a table the product can read */

/* -- fused_block_formats.c ------------------------------------------------------------------------------------------
 * The block formats' sizes and values, and an input vector's 8-bit quantisation in blocks of 32 (llama.cpp's Q8_0 /
 * Q8_1): q, and per block d and s = d sum q rounded to fp16 and sum q. */
int64_t wl_block_row_bytes(int64_t kind, int64_t n_in); /* -1: a format the products do not read */
void wl_block_dequantize_row(float *out, const uint8_t *row, int64_t kind, int64_t n);
/* row `index` (n values) of a table of block format `kind` (an X8 format included: the row read from its group) */
void wl_block_table_row(float *out, const uint8_t *table, int64_t kind, int64_t n, int64_t index);
void wl_quantize_q8(int8_t *q, float *d, float *s, int32_t *sum, const float *x, int64_t n);
float wl_f16_to_f32(uint16_t h);
float wl_round_f16(float f); /* f rounded to the nearest fp16 value (ties to even), as float32 */
static inline float wl_f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
#ifdef __F16C__
    return _cvtsh_ss(h);
#else
    return wl_f16_to_f32(h);
#endif
}
static inline int wl_is_kquant(int64_t kind) { return kind == BK_Q4_K || kind == BK_Q5_K || kind == BK_Q6_K; }
static inline int wl_with_min(int64_t kind) { return kind == BK_Q4_1 || kind == BK_Q5_1; }
static inline int wl_is_kx8(int64_t kind) { return kind == BK_Q4_K_X8 || kind == BK_Q5_K_X8 || kind == BK_Q6_K_X8; }
static inline int wl_is_x8(int64_t kind) {
    return kind == BK_Q4_0_X8 || kind == BK_Q4_1_X8 || kind == BK_Q5_0_X8 || kind == BK_Q8_0_X8 || wl_is_kx8(kind);
}

/* -- fused_kquants.c ------------------------------------------------------------------------------------------------
 * An input vector quantised for K-quant products (llama.cpp's Q8_K): per 256 values q, the float scale d and the
 * sums of each 16 q; for the X8 layouts q spread (e) and -32 times the 16-sums (m32), by wl_kx8_spread (else NULL).
 * wl_kquant_dots: out[t] = row . v[t] for n vectors, a row of n_in / 256 super-blocks of kind. */
typedef struct {
    const int8_t *q;
    const float *d;
    const int16_t *bsum;
    const int8_t *e;
    const int32_t *m32;
} wl_q8k_vec;
int64_t wl_kquant_block_bytes(int64_t kind); /* bytes of one super-block; -1: not a K-quant */
void wl_kquant_dequantize_row(float *out, const uint8_t *row, int64_t kind, int64_t n);
void wl_quantize_q8k(int8_t *q, float *d, int16_t *bsum, const float *x, int64_t n);
void wl_kquant_dots(int64_t kind, const uint8_t *row, const wl_q8k_vec *v, int64_t n, int64_t n_in, float *out);

/* -- fused_blocks.c, fused_blocks_x8.c: products on blocks of 32 ----------------------------------------------- */
/* An input vector quantised in blocks of 32: q (n_in bytes), and per block d, s = d sum q (fp16-rounded) and sum q;
 * and, for K-quant rows, per 256 (k) */
typedef struct {
    const int8_t *q;
    const int8_t *p; /* q reordered for 4-bit weights, 4 blocks (128 inputs) at a time: the 4 blocks' first 16
                      * inputs side by side, then their last 16 (where the low and then the high nibbles of 4 blocks'
                      * bytes land); NULL when the matrix has no 4-bit rows */
    const int8_t *e; /* q spread for the AVX512-VNNI X8 products (wl_x8_spread), NULL where no X8 rows are read */
    const float *d, *s;
    const int32_t *sum;
    wl_q8k_vec k;
} wl_q8_vec;
/* 8 rows of an X8 layout (a group: nb blocks) by n vectors: y[t * ys + r] = row r . v[t] (+ bias[r] where bias is
 * not NULL); does nothing where the build has no X8 product (waferline_blocks_x8() is 0, and such a table is
 * refused) */
/* fused_blocks.c: whether rows of `kind` (blocks of 32, or float) are taken two at a time, their dots with n vectors
 * (dots[r][t], r < R, R = 2 only where wl_rows32_pairs; x: the float vectors, xs apart, for float rows), and q
 * reordered for the 4-bit rows (the vectors' p) */
int wl_rows32_pairs(int64_t kind);
void wl_rows32_dots(int64_t kind, const uint8_t *row, int64_t bytes, int R, const wl_q8_vec *v, const float *x,
                    int64_t xs, int64_t n, int64_t n_in, float dots[2][WL_MAX_VECTORS]);
void wl_reorder_q4(int8_t *p, const int8_t *q, int64_t nb);
void wl_x8_dots(int64_t kind, const uint8_t *group, const wl_q8_vec *v, int64_t n, int64_t nb, float *y, int64_t ys,
                const float *bias);
/* e (8 n bytes) = q (n bytes) spread for the AVX512-VNNI X8 products: per block of 32 four registers of 64 bytes,
 * register h holding q's 4-byte group 2 h in lanes 0..7 and group 2 h + 1 in lanes 8..15; whether this build reads
 * it (else it writes nothing and returns 0) */
int64_t wl_x8_spread(int8_t *e, const int8_t *q, int64_t n);
/* Whether the AVX512-VNNI X8 products of blocks of 32 use 256-bit registers on the quantised vector (1) rather than
 * 512-bit ones on its spread form (0); waferline_set_x8_narrow sets it (1, 0, -1 to leave it; returns the setting
 * before, -1 where the build has no 512-bit path). A setting of the process, as wl_prefetch_on. */
extern int wl_x8_narrow;
int64_t waferline_set_x8_narrow(int64_t on);
/* Whether the product of a segment of this kind reads the input's spread form (wl_x8_spread): the X8 layouts of
 * blocks of 32, but for Q4_0, Q4_1 and Q8_0 when narrow; the K-quants' read their own (wl_kx8_spread) */
int wl_x8_reads_spread(int64_t kind);
/* fused_kquants_x8.c: as wl_x8_dots for Q4_K_X8 / Q5_K_X8 / Q6_K_X8 groups of nsb super-blocks (the vectors' k.e set), and
 * whether this build has that product (AVX512-VNNI) */
void wl_kx8_dots(int64_t kind, const uint8_t *group, const wl_q8_vec *v, int64_t n, int64_t nsb, float *y, int64_t ys,
                 const float *bias);
int64_t wl_kx8_built(void);
/* e (8 n bytes) = q (n bytes) spread for those products: per block of 32 four registers of 64 bytes, register p
 * holding q's 4-byte group p in lanes 0..7 and group p + 4 in lanes 8..15; m32 (2 n bytes) = -32 times each 16-sum,
 * per block of 32 the first sum's 8 times, then the second's; whether this build reads them (else 0, nothing written) */
int64_t wl_kx8_spread(int8_t *e, int32_t *m32, const int8_t *q, const int16_t *bsum, int64_t n);
int64_t waferline_blocks_x8(void); /* which X8 layouts this build multiplies (WL_X8_* bits; the loader asks it) */

/* -- fused_attention.c --------------------------------------------------------------------------------------------- */
/* Attention takes a KV head's positions in chunks of this many (a multiple of 16), each with its own softmax maximum,
 * merged in order: the chunks of one token's attention may run on different threads and give the same floats. */
enum { WL_ATTN_CHUNK = 64 };
/* floats of one query's part of a chunk (its D sums, then m and l; a multiple of 16, so that aligned sums stay so),
 * and of the chunks' parts of n tokens' G queries over positions < L */
#define WL_ATTN_PART(D) (((D) + 2 + 15) / 16 * 16)
#define WL_ATTN_PARTS(L, n, G, D) (((L) + WL_ATTN_CHUNK - 1) / WL_ATTN_CHUNK * (n) * (G) * WL_ATTN_PART(D))
enum { WL_ATTN_QT = 16384 }; /* floats of transposed queries the vector scores take (more: the scalar loop) */
const float *wl_attend_queries(float *qt, const float *q, int64_t qs, int64_t n, int64_t G, int64_t D);
void wl_attend_chunk(float *part, const float *qt, const float *q, int64_t qs, int64_t n, const void *kv, int64_t fmt,
                     int64_t kb, int64_t vb, int64_t L0, int64_t G, int64_t D, int64_t c0, float *sc, float *row);
void wl_attend_merge(float *out, int64_t os, const float *part, int64_t n, int64_t G, int64_t D, int64_t L0,
                     int64_t fmt);
void wl_attend_group(float *out, int64_t os, const float *q, int64_t qs, int64_t n, const void *kv, int64_t fmt,
                     int64_t kb, int64_t vb, int64_t L0, int64_t G, int64_t D, float *part, float *sc, float *row);

/* -- fused_math.c -------------------------------------------------------------------------------------------------- */
float wl_exp_shifted(float *v, int64_t n, float sub); /* v[i] = e^(v[i] - sub); returns their sum */
void wl_silu_mul(float *h, int64_t n);                /* h[i] = silu(h[i]) * h[n + i] */
/* per row: argmax, its value, logsumexp */
int64_t waferline_row_stats(const float *rows, int64_t n, int64_t vocab, int64_t *top, float *top_value, float *lse,
                            const int64_t *until_miss, int64_t n_until);

#endif
