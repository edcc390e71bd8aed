/* What the fused step's three C files share (compiled together into one library by fused.py).
 *
 * fused_pool.c   the worker threads that split a step's products between cores, and the read probe
 * fused_linear.c the matrix products (int8 with 8-bit activations, float32) and the vectorised exp
 * fused_step.c   the step itself: embedding, norms, rotary, attention, the order of the layers
 */
#ifndef WAFERLINE_FUSED_H
#define WAFERLINE_FUSED_H
#include <stdint.h>

enum { W_F32 = 0, W_INT8 = 1 };

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
/* A linear weight as placed: int8 rows (out, in) with per-row float scales and int32 row sums, or float32 (in, out). */
typedef struct {
    const void *w;
    const float *scale;
    const int32_t *rowsum;
    const float *bias;
    int64_t n_in, n_out, fmt;
} wl_matrix;

/* y[t] = W x[t] (+ b) for n vectors (x rows `xs` floats apart, y rows `ys` apart), every weight read once for all n
 * and each output row by one thread. xq: n * n_in bytes and sx: n floats of scratch (int8). */
void wl_linear(float *y, int64_t ys, const float *x, int64_t xs, int64_t n, const wl_matrix *m, uint8_t *xq,
               float *sx, int64_t threads);
float wl_exp_shifted(float *v, int64_t n, float sub); /* v[i] = e^(v[i] - sub); returns their sum */
void wl_silu_mul(float *h, int64_t n);                /* h[i] = silu(h[i]) * h[n + i] */

#endif
