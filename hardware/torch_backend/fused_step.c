/* One whole decode step of a Llama/Qwen2/Qwen3 decoder in plain C: the torch backend's fast path on the CPU.
 *
 * A ~5M-parameter model's step is ~4.9M multiply-adds, a fraction of a millisecond of arithmetic, but ~150 eager
 * torch calls cost ~0.5 ms of dispatch alone (docs/benchmarks-decode.md); a 0.5B model's step is bound by streaming
 * its weights from memory, which a kernel that reads them in address order does at close to the machine's read
 * speed. Here the step is one call: every vector op runs in a loop that the compiler vectorises (-O3 -march=native
 * -fopenmp-simd), the products and attention are split between `threads` threads (fused_pool.c), and nothing is
 * allocated.
 *
 * Numerics: activations, norms, rotary, softmax and accumulations in float32; the products as fused_linear.c and
 * fused_packed.c say (float32 weights, or int8 weights with 8-bit activations); attention in fused_attention.c. The KV cache is the torch backend's own tensor,
 * (layers, 2, kv_heads, max_tokens, head_dim) in float32 or bfloat16, so that prefill (torch) and decode (here)
 * share it. Compiled and loaded by fused_library.py; the layout of `dims` and `ptrs` is defined there, next to the code that
 * fills them.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fused.h"
#ifdef __AVX512F__
#include <immintrin.h>
#endif

/* Whether a short step (up to CHUNK_ITEMS_MAX_TOKENS tokens: decoding, a short draft's verification) asks for each
 * layer's cached keys and values before that layer's QKV product, so that they are in L2 by the time its attention
 * reads them (waferline_set_kv_prefetch). The weights stream through the caches every step and evict the cache's
 * rows, which the attention then read from memory as six short streams a layer (SmolLM2: 3 KV heads, keys and
 * values), each starting cold. On a Zen 4 EPYC, one process switching it per run of 32 steps (2026-12-07): one
 * thread at 1000 cached positions 1.05-1.10x, at 128 0.99-1.11x (within the noise); two threads 1.00-1.09x at 1000. */
static int kv_prefetch_on = 1;

int64_t waferline_set_kv_prefetch(int64_t on) { /* 1 on, 0 off, -1 as it is; returns the setting before */
    const int64_t before = kv_prefetch_on;
    if (on >= 0) kv_prefetch_on = on != 0;
    return before;
}

/* Ask for the first `positions` rows of a layer's 2 KVH stripes (each KV head's keys, then its values) into L2. */
static void prefetch_kv(const void *kv, int64_t kvfmt, int64_t layer_base, int64_t stripes, int64_t max_t,
                        int64_t D, int64_t positions) {
    const int64_t es = kvfmt == KV_BF16 ? 2 : 4, bytes = positions * D * es;
    for (int64_t st = 0; st < stripes; st++) {
        const char *base = (const char *)kv + (layer_base + st * max_t * D) * es;
        for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(base + b, 0, 2);
    }
}

/* The layout of `dims` and of the pointer table, each list written once: the enums below are made from them, and
 * waferline_layout names each entry, which fused_library.py checks against its DIMS, GLOBAL_PTRS and LAYER_PTRS when it loads
 * the library (an entry added on one side only is refused there, not read at the wrong index). */
#define WL_DIMS(X) X(D, DIM) X(D, LAYERS) X(D, HEADS) X(D, KV_HEADS) X(D, HEAD_DIM) X(D, INTER) X(D, VOCAB) \
    X(D, MAX_TOKENS) X(D, WFMT) X(D, KVFMT) X(D, EMBFMT)
/* Global pointers, then per layer PER_LAYER pointers. */
/* A matrix is three pointers: weights, per-row float scales (int8; for W_BLOCKS the segment table, fused_blocks.c),
 * per-row int32 sums of the int8 weights. */
#define WL_GLOBAL_PTRS(X) X(P, EMBED) X(P, NORM) X(P, HEAD_W) X(P, HEAD_S) X(P, HEAD_R) X(P, COS) X(P, SIN) \
    X(P, SCRATCH)
/* L_Q_NORM, L_K_NORM: NULL but for Qwen3 */
#define WL_LAYER_PTRS(X) X(L, ATTN_NORM) X(L, QKV_W) X(L, QKV_S) X(L, QKV_R) X(L, QKV_B) X(L, O_W) X(L, O_S) \
    X(L, O_R) X(L, MLP_NORM) X(L, GU_W) X(L, GU_S) X(L, GU_R) X(L, DOWN_W) X(L, DOWN_S) X(L, DOWN_R) X(L, Q_NORM) \
    X(L, K_NORM)
#define WL_ENUM(prefix, name) prefix##_##name,
#define WL_NAME(prefix, name) #name,
enum { WL_DIMS(WL_ENUM) D_COUNT };
enum { WL_GLOBAL_PTRS(WL_ENUM) GLOBAL_PTRS };
enum { WL_LAYER_PTRS(WL_ENUM) PER_LAYER };
enum { STEP_MAX_TOKENS = WL_MAX_VECTORS }; /* tokens one call of waferline_steps takes (speculative verification) */

static const char *const DIM_NAMES[] = {WL_DIMS(WL_NAME)};
static const char *const GLOBAL_NAMES[] = {WL_GLOBAL_PTRS(WL_NAME)};
static const char *const LAYER_NAMES[] = {WL_LAYER_PTRS(WL_NAME)};

/* The name of entry i of table 0 (dims), 1 (global pointers) or 2 (per-layer pointers), upper case as in the enums
 * without their prefix; NULL past the table's end. */
const char *waferline_layout(int64_t table, int64_t i) {
    const char *const *names = table == 0 ? DIM_NAMES : table == 1 ? GLOBAL_NAMES : table == 2 ? LAYER_NAMES : NULL;
    const int64_t n = table == 0 ? D_COUNT : table == 1 ? GLOBAL_PTRS : table == 2 ? PER_LAYER : 0;
    return names != NULL && i >= 0 && i < n ? names[i] : NULL;
}

static inline uint16_t f32_to_bf16(float f) { /* round to nearest even, as torch does; NaN stays NaN */
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* out may be x (a head normalised in place): each element is read before it is written, at the same index */
static void rms_norm(float *out, const float *x, const float *restrict w, int64_t n, float eps) {
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    const float inv = 1.0f / sqrtf(ss / (float)n + eps);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
}

/* Half-split (NeoX / Hugging Face) rotary embedding of one head in place. */
static void rotary(float *restrict v, const float *restrict cos_row, const float *restrict sin_row, int64_t half) {
    for (int64_t i = 0; i < half; i++) {
        const float a = v[i], b = v[i + half], c = cos_row[i], s = sin_row[i];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
    }
}

/* Row t of a cache head (D values from element offset `at`) as float32 in `out`, or a pointer to it in place. */
static inline void kv_put(void *base, int64_t fmt, int64_t i, float v) {
    if (fmt == KV_BF16)
        ((uint16_t *)base)[i] = f32_to_bf16(v);
    else
        ((float *)base)[i] = v;
}

enum { CHUNK_ITEMS_MAX_TOKENS = 4 };              /* steps of up to this many tokens share their heads' chunks */
enum { CHUNK_ITEM_QUERIES = 64, CHUNK_ITEM_D = 512 }; /* the most queries and widest heads of a chunk item's buffers */

/* Scratch floats the step needs for up to STEP_MAX_TOKENS tokens at once (fused.py allocates this many): per token
 * x, xb, tmp, qkv, att, hb and sx, then per KV head the parts of its chunks of attention (fused_attention.c), then per
 * attention item (a KV head and some of the tokens, which may run on any thread) a chunk's scores and a key block,
 * then per KV head the queries of up to CHUNK_ITEMS_MAX_TOKENS tokens transposed, then the quantised vectors (with, for
 * block formats, their per-block scales and sums). */
int64_t waferline_scratch_floats(const int64_t *dims) {
    const int64_t dim = dims[D_DIM], h = dims[D_HEADS], kvh = dims[D_KV_HEADS], hd = dims[D_HEAD_DIM];
    const int64_t qkv = (h + 2 * kvh) * hd, n = STEP_MAX_TOKENS;
    int64_t widest = h * hd > 2 * dims[D_INTER] ? h * hd : 2 * dims[D_INTER]; /* bytes of quantised input */
    if (dim > widest) widest = dim;
    widest = (widest + 3) / 4 * 4; /* the packed int8 product reads its vectors 4 bytes at a time */
    const int64_t per_token = 3 * dim + qkv + h * hd + 2 * dims[D_INTER] + 1 + 16; /* + 16: room to align the parts */
    const int64_t G = h / kvh, items = n + 4; /* pieces x tokens per piece (waferline_steps) is at most n + 3 */
    const int64_t floats =
        n * per_token + kvh * (WL_ATTN_PARTS(dims[D_MAX_TOKENS], n, G, hd) + items * G * WL_ATTN_CHUNK + n * 16 * hd +
                               (CHUNK_ITEMS_MAX_TOKENS * G + 7) / 8 * 8 * hd);
    return floats + (n * widest) / 4 + n * (wl_blocks_scratch_bytes(widest) - widest + 3) / 4 + 16;
}

int64_t waferline_step_max_tokens(void) { return STEP_MAX_TOKENS; }

/* One layer's attention for n tokens (wl_parallel): an item per KV head and piece of the tokens, or, for one token
 * on more than one thread, per KV head and chunk of its positions. */
typedef struct {
    float *att, *parts, *scb, *rows, *qts;
    const float *qkv;
    const void *kv;
    int64_t n, kvfmt, layer_base, max_t, pos, G, D, HD, qkv_n, KVH, parts_per_head, pieces, per_piece, chunks, qt_floats;
} attend_ctx;

/* Item i: KV head i / pieces, for the tokens of piece i % pieces (per_piece tokens each). A token's attention is the
 * same arithmetic whichever piece holds it (fused_attention.c), so the pieces change only how the work is shared. */
static void attend_heads(const void *ctx_, int64_t begin, int64_t end) {
    const attend_ctx *c = (const attend_ctx *)ctx_;
    for (int64_t i = begin; i < end; i++) {
        const int64_t g = i / c->pieces, t0 = i % c->pieces * c->per_piece;
        const int64_t nt = c->n - t0 < c->per_piece ? c->n - t0 : c->per_piece;
        wl_attend_group(c->att + t0 * c->HD + g * c->G * c->D, c->HD, c->qkv + t0 * c->qkv_n + g * c->G * c->D,
                        c->qkv_n, nt, c->kv, c->kvfmt, c->layer_base + g * c->max_t * c->D,
                        c->layer_base + (c->KVH + g) * c->max_t * c->D, c->pos + t0 + 1, c->G, c->D,
                        c->parts + g * c->parts_per_head + t0 * c->chunks * c->G * WL_ATTN_PART(c->D),
                        c->scb + i * c->per_piece * c->G * WL_ATTN_CHUNK, c->rows + i * 16 * c->D);
    }
}

/* Item i of the attention of a step of few tokens: KV head i / chunks, its positions' chunk i % chunks
 * (wl_attend_chunk), the chunk's part written where wl_attend_merge reads it; the items of a head may run on any
 * threads. Each head's queries were transposed once (qts; NULL where they do not fit: the scalar loop). */
static void attend_chunks(const void *ctx_, int64_t begin, int64_t end) {
    const attend_ctx *c = (const attend_ctx *)ctx_;
    float sc[CHUNK_ITEM_QUERIES * WL_ATTN_CHUNK] __attribute__((aligned(64)));
    float row[16 * CHUNK_ITEM_D] __attribute__((aligned(64)));
    for (int64_t i = begin; i < end; i++) {
        const int64_t g = i / c->chunks, k = i % c->chunks, kb = c->layer_base + g * c->max_t * c->D;
        wl_attend_chunk(c->parts + g * c->parts_per_head + k * c->n * c->G * WL_ATTN_PART(c->D),
                        c->qts != NULL ? c->qts + g * c->qt_floats : NULL, c->qkv + g * c->G * c->D, c->qkv_n, c->n,
                        c->kv, c->kvfmt, kb, kb + c->KVH * c->max_t * c->D, c->pos + 1, c->G, c->D,
                        k * WL_ATTN_CHUNK, sc, row);
    }
}

static wl_matrix matrix(void *const *p, int64_t w, const float *bias, int64_t n_in, int64_t n_out, int64_t fmt) {
    return (wl_matrix){.w = p[w], .scale = (const float *)p[w + 1], .rowsum = (const int32_t *)p[w + 2],
                       .bias = bias, .n_in = n_in, .n_out = n_out, .fmt = fmt};
}

/* Run tokens[0..n) at positions pos..pos+n-1 (the cache holds positions < pos), write their K/V, and write the
 * logits of the last n_logits of them (n_logits x vocab, 0 <= n_logits <= n) to `logits`: a prompt's chunk that
 * needs no logits skips the head (a 49,152-token vocabulary is a fifth of a small model's weights).
 * Token t attends to positions <= pos + t, as n one-token steps would, and
 * every weight is read once for all n. `kv` holds `max_t` positions per layer and head (a session's cache may be
 * shorter than the model's context). The products and attention run on `threads` threads; the result does not
 * depend on how many. */
int waferline_steps(const int64_t *dims, const float *eps_p, void *const *ptrs, void *kv, int64_t max_t,
                    const int64_t *tokens, int64_t n, int64_t pos, float *logits, int64_t n_logits, int64_t threads) {
    const int64_t dim = dims[D_DIM], n_layers = dims[D_LAYERS], H = dims[D_HEADS], KVH = dims[D_KV_HEADS];
    const int64_t D = dims[D_HEAD_DIM], inter = dims[D_INTER], vocab = dims[D_VOCAB];
    const int64_t wfmt = dims[D_WFMT], kvfmt = dims[D_KVFMT], embfmt = dims[D_EMBFMT];
    const float eps = *eps_p;
    if (n < 1 || n > STEP_MAX_TOKENS || pos < 0 || pos + n > max_t || max_t > dims[D_MAX_TOKENS]) return 1;
    if (n_logits < 0 || n_logits > n) return 1;
    for (int64_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= vocab) return 1;
    const int64_t G = H / KVH, half = D / 2, qkv_n = (H + 2 * KVH) * D, HD = H * D, I2 = 2 * inter;
    const int64_t parts_per_head = WL_ATTN_PARTS(dims[D_MAX_TOKENS], n, G, D);
    float *x = (float *)ptrs[P_SCRATCH];
    float *xb = x + n * dim, *tmp = xb + n * dim, *qkv = tmp + n * dim, *att = qkv + n * qkv_n, *hb = att + n * HD;
    float *sx = hb + n * I2, *parts = (float *)(((uintptr_t)(sx + n) + 63) & ~(uintptr_t)63); /* on a cache line */
    float *scb = parts + KVH * parts_per_head;
    float *rows = scb + KVH * (n + 4) * G * WL_ATTN_CHUNK, *qts = rows + KVH * n * 16 * D;
    /* the attention's items: one per KV head, or with more threads one per KV head and 4 tokens, or for up to 4 tokens
     * one per KV head and chunk of their positions (their queries transposed once per KV head, in qts) */
    const int64_t per_piece = threads > 1 && n > 4 ? 4 : n, pieces = (n + per_piece - 1) / per_piece;
    const int by_chunks =
        n <= CHUNK_ITEMS_MAX_TOKENS && threads > 1 && n * G <= CHUNK_ITEM_QUERIES && D <= CHUNK_ITEM_D;
    const int64_t qt_floats = by_chunks ? (n * G + 7) / 8 * 8 * D : 0;
    uint8_t *xq = (uint8_t *)(qts + KVH * qt_floats);

    for (int64_t t = 0; t < n; t++) {
        if (embfmt >= EMB_BLOCKS) {
            const int64_t kind = embfmt - EMB_BLOCKS;
            wl_block_table_row(x + t * dim, (const uint8_t *)ptrs[P_EMBED], kind, dim, tokens[t]);
        } else if (embfmt == KV_BF16) {
            const uint16_t *e = (const uint16_t *)ptrs[P_EMBED] + tokens[t] * dim;
            for (int64_t i = 0; i < dim; i++) x[t * dim + i] = bf16_to_f32(e[i]);
        } else {
            memcpy(x + t * dim, (const float *)ptrs[P_EMBED] + tokens[t] * dim, sizeof(float) * (size_t)dim);
        }
    }

    for (int64_t l = 0; l < n_layers; l++) {
        void *const *p = ptrs + GLOBAL_PTRS + l * PER_LAYER;
        const int64_t layer_base = l * 2 * KVH * max_t * D; /* keys of layer l; values follow after KVH * max_t * D */
        if (kv_prefetch_on && n <= CHUNK_ITEMS_MAX_TOKENS) prefetch_kv(kv, kvfmt, layer_base, 2 * KVH, max_t, D, pos);
        for (int64_t t = 0; t < n; t++) rms_norm(xb + t * dim, x + t * dim, (const float *)p[L_ATTN_NORM], dim, eps);
        const wl_matrix wqkv = matrix(p, L_QKV_W, (const float *)p[L_QKV_B], dim, qkv_n, wfmt);
        wl_linear(qkv, qkv_n, xb, dim, n, &wqkv, xq, sx, threads);
        const float *q_norm = (const float *)p[L_Q_NORM], *k_norm = (const float *)p[L_K_NORM];
        for (int64_t t = 0; t < n; t++) { /* (normalise and) rotate q and k heads, then write k and v at pos + t */
            float *qt = qkv + t * qkv_n;
            if (q_norm != NULL)
                for (int64_t h = 0; h < H; h++) rms_norm(qt + h * D, qt + h * D, q_norm, D, eps);
            if (k_norm != NULL)
                for (int64_t g = 0; g < KVH; g++) rms_norm(qt + (H + g) * D, qt + (H + g) * D, k_norm, D, eps);
            const float *cos_row = (const float *)ptrs[P_COS] + (pos + t) * half;
            const float *sin_row = (const float *)ptrs[P_SIN] + (pos + t) * half;
            for (int64_t h = 0; h < H + KVH; h++) rotary(qt + h * D, cos_row, sin_row, half);
            const float *k = qt + H * D, *v = qt + (H + KVH) * D;
            for (int64_t g = 0; g < KVH; g++) {
                const int64_t kb = layer_base + g * max_t * D, vb = layer_base + (KVH + g) * max_t * D;
                for (int64_t i = 0; i < D; i++) {
                    kv_put(kv, kvfmt, kb + (pos + t) * D + i, k[g * D + i]);
                    kv_put(kv, kvfmt, vb + (pos + t) * D + i, v[g * D + i]);
                }
            }
        }
        /* the G query heads of the tokens that share KV head g read its rows once; the last token sees pos + n
         * positions (its own included), which wl_attend_merge reads in as many chunks */
        const int64_t chunks = (pos + n + WL_ATTN_CHUNK - 1) / WL_ATTN_CHUNK;
        attend_ctx actx = {.att = att, .parts = parts, .scb = scb, .rows = rows, .qts = qts, .qkv = qkv, .kv = kv,
                           .n = n, .kvfmt = kvfmt, .layer_base = layer_base, .max_t = max_t, .pos = pos, .G = G,
                           .D = D, .HD = HD, .qkv_n = qkv_n, .KVH = KVH, .parts_per_head = parts_per_head,
                           .pieces = pieces, .per_piece = per_piece, .chunks = chunks, .qt_floats = qt_floats};
        if (by_chunks) {
            for (int64_t g = 0; g < KVH; g++)
                if (wl_attend_queries(qts + g * qt_floats, qkv + g * G * D, qkv_n, n, G, D) == NULL) actx.qts = NULL;
            wl_parallel(threads, attend_chunks, &actx, KVH * chunks, 1);
            for (int64_t g = 0; g < KVH; g++)
                wl_attend_merge(att + g * G * D, HD, parts + g * parts_per_head, n, G, D, pos + 1, kvfmt);
        } else {
            wl_parallel(threads, attend_heads, &actx, KVH * pieces, 1);
        }
        const wl_matrix wo = matrix(p, L_O_W, NULL, HD, dim, wfmt);
        wl_linear(tmp, dim, att, HD, n, &wo, xq, sx, threads);
        for (int64_t i = 0; i < n * dim; i++) x[i] += tmp[i];
        for (int64_t t = 0; t < n; t++) rms_norm(xb + t * dim, x + t * dim, (const float *)p[L_MLP_NORM], dim, eps);
        const wl_matrix wgu = matrix(p, L_GU_W, NULL, dim, I2, wfmt);
        wl_linear(hb, I2, xb, dim, n, &wgu, xq, sx, threads);
        for (int64_t t = 0; t < n; t++) wl_silu_mul(hb + t * I2, inter);
        const wl_matrix wdown = matrix(p, L_DOWN_W, NULL, inter, dim, wfmt);
        wl_linear(tmp, dim, hb, I2, n, &wdown, xq, sx, threads);
        for (int64_t i = 0; i < n * dim; i++) x[i] += tmp[i];
    }
    if (n_logits == 0) return 0;
    const int64_t first = n - n_logits;
    for (int64_t t = first; t < n; t++)
        rms_norm(xb + (t - first) * dim, x + t * dim, (const float *)ptrs[P_NORM], dim, eps);
    const wl_matrix head = matrix(ptrs, P_HEAD_W, NULL, dim, vocab, wfmt);
    wl_linear(logits, vocab, xb, dim, n_logits, &head, xq, sx, threads);
    return 0;
}

/* One token: waferline_steps with n = 1. */
int waferline_step(const int64_t *dims, const float *eps_p, void *const *ptrs, void *kv, int64_t max_t, int64_t token,
                   int64_t pos, float *logits, int64_t threads) {
    return waferline_steps(dims, eps_p, ptrs, kv, max_t, &token, 1, pos, logits, 1, threads);
}
