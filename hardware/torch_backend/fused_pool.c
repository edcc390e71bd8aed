/* Worker threads for the fused step (wl_parallel, see fused.h), and the read probe that `waferline bench` takes its
 * roofline from.
 *
 * A decode step is a chain of matrix products with small serial work between them (norms, rotary), ~5 products per
 * layer, so a product must start on every core within a microsecond or two of the last one ending: workers spin on a
 * generation counter (with the CPU's pause hint) for SPIN_NS after their last chunk before they sleep on a condition
 * variable, so within a step, and between the steps of one completion, nobody sleeps; an idle server spins for one
 * millisecond and then costs nothing. Each product's chunks are shared out in contiguous parts, one per thread: a
 * thread takes chunks from the front of its own part and, once that is empty, from the back of another's, one
 * compare-and-swap on that part's word each (tagged with the generation, so that a late worker can never take a chunk
 * of a later product). A part's word sits on a cache line of its own that only its owner touches until the end of the
 * product, so a chunk costs a swap in the owner's cache rather than a line taken from the other core (with one word for
 * all, swapped by both threads, a SmolLM2 Q4_1 step on 2 threads took 10% longer). A preempted worker (a shared machine)
 * delays nobody but the chunk it holds. A worker preempted in the middle of a chunk does delay the caller, who must
 * wait for that chunk; on a machine whose other cores are busy (more runnable threads than cores) that costs up to a
 * scheduler time slice (milliseconds) each time, so after such a stall the caller runs its products alone for
 * BACKOFF times as long as it waited (at least a millisecond) and then tries the workers again: a busy core is
 * tried again a few times a second, a virtual machine's core that paused for a tenth of a millisecond costs a
 * millisecond or two of one thread. Results do not depend on it (see fused.h). What a second thread cannot
 * help with is a busy machine: each product then waits for the slower of two threads that the scheduler serves
 * independently, and on the shared 2-core machines 2 threads decoded no faster than 1 while they were loaded.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "fused.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#define SPIN_NS 1000000 /* how long an idle worker spins before it sleeps */
#define STALL_NS 30000  /* a wait for workers this long, and longer than two of the caller's chunks, is a stall */
#define STALL_CHECK 256 /* spins of a wait (~15 µs of pause hints) before the clock is read: a shorter one is no stall */
#define BACKOFF 16      /* the caller then runs alone for this many times the stall (at least BACKOFF_MIN_NS) */
#define BACKOFF_MIN_NS 1000000

/* generation and done each on a cache line of its own (and each part's word, below): the spinning workers read
 * generation, and each thread adds to done once a product; on one line every swap took the line from the other
 * core's reads (a perf profile of SmolLM2 Q4_K_M on 2 threads: 4% of the samples on the load after `done`'s
 * increment, 8% on the workers' spin) */
static struct {
    _Alignas(64) _Atomic uint32_t generation;
    _Alignas(64) _Atomic int64_t done; /* chunks finished in this generation, added by each thread once it has none
                                        * left to take (so the generation cannot end while a thread runs one) */
    _Alignas(64) _Atomic int sleepers;
    _Atomic int busy;       /* a caller is inside wl_parallel */
    _Atomic int wanted;     /* workers that take part in this generation (ids below it): wanted + 1 parts */
    int started;            /* workers created so far (only the caller of wl_parallel creates them) */
    int64_t alone_until;    /* after a stall, the time until which products run without the workers */
    int64_t stats[4];       /* products run: split between threads, alone after a stall, and stalls seen */
    wl_task fn;             /* fn, ctx and the sizes are read only by the holder of one of the generation's chunks */
    const void *ctx;
    int64_t n_items, grain;
    pthread_mutex_t lock;
    pthread_cond_t wake;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Each thread's part of a generation's chunks (the caller's is part 0, worker i's part i + 1): the generation's low
 * PART_GEN_BITS bits, the next chunk to take from the front, and the end (exclusive), one word on a cache line of its
 * own. A product has at most PART_MAX_CHUNKS chunks (wl_parallel makes them larger if need be). */
enum { PART_BITS = 22, PART_GEN_BITS = 64 - 2 * PART_BITS };
#define PART_MASK ((UINT64_C(1) << PART_BITS) - 1)
#define PART_MAX_CHUNKS ((int64_t)PART_MASK)
static struct {
    _Alignas(64) _Atomic uint64_t w;
} part[WL_MAX_THREADS];

static inline uint64_t part_word(uint32_t g, int64_t begin, int64_t end) {
    return ((uint64_t)g & ((UINT64_C(1) << PART_GEN_BITS) - 1)) << (2 * PART_BITS) | (uint64_t)begin << PART_BITS |
           (uint64_t)end;
}

/* A chunk of generation g from part k: its first if k is the caller's own (`me`), else its last; -1 if none is left
 * there or a newer generation began. A swap that succeeds on a word of g's tag takes a chunk of the generation now
 * running, whichever that is (fn, ctx and the sizes are read after it), so the tag's few bits are enough. */
static int64_t take(int k, int me, uint32_t g) {
    uint64_t w = atomic_load_explicit(&part[k].w, memory_order_acquire);
    for (;;) {
        const int64_t begin = (int64_t)(w >> PART_BITS & PART_MASK), end = (int64_t)(w & PART_MASK);
        if ((w ^ part_word(g, 0, 0)) >> (2 * PART_BITS) || begin >= end) return -1;
        const uint64_t next = k == me ? part_word(g, begin + 1, end) : part_word(g, begin, end - 1);
        if (atomic_compare_exchange_weak_explicit(&part[k].w, &w, next, memory_order_acq_rel, memory_order_acquire))
            return k == me ? begin : end - 1;
    }
}

/* Run chunks of generation g, as thread `me`, until none is left in any part (or a newer generation began: then nothing
 * is ours); returns how many it ran, which it has added to done. */
static int64_t run_chunks(uint32_t g, int me, int parts) {
    int64_t ran = 0;
    for (int i = 0; i < parts; i++) {
        const int k = (me + i) % parts; /* its own part first, then the others' from the back */
        for (int64_t c; (c = take(k, me, g)) >= 0; ran++) {
            /* the chunk is ours, so generation g cannot end before we report it: fn, ctx and the sizes stay g's */
            const int64_t begin = c * pool.grain;
            const int64_t end = begin + pool.grain < pool.n_items ? begin + pool.grain : pool.n_items;
            pool.fn(pool.ctx, begin, end);
        }
    }
    if (ran > 0) atomic_fetch_add_explicit(&pool.done, ran, memory_order_release);
    return ran;
}

static void *worker(void *arg) {
    const int id = (int)(intptr_t)arg;
    uint32_t seen = atomic_load(&pool.generation);
    for (;;) {
        int64_t idle_since = now_ns();
        uint32_t g;
        for (int spins = 0;; spins++) {
            g = atomic_load_explicit(&pool.generation, memory_order_acquire);
            if (g != seen) break;
            CPU_RELAX();
            if ((spins & 255) == 255 && now_ns() - idle_since > SPIN_NS) {
                pthread_mutex_lock(&pool.lock);
                atomic_fetch_add(&pool.sleepers, 1);
                while ((g = atomic_load(&pool.generation)) == seen) pthread_cond_wait(&pool.wake, &pool.lock);
                atomic_fetch_sub(&pool.sleepers, 1);
                pthread_mutex_unlock(&pool.lock);
                break;
            }
        }
        seen = g;
        const int wanted = atomic_load_explicit(&pool.wanted, memory_order_relaxed);
        if (id < wanted) run_chunks(g, id + 1, wanted + 1);
    }
    return NULL;
}

/* A child of fork() has none of the workers (nor, maybe, an unlocked mutex): it starts with an empty pool. */
static void forget_workers(void) {
    pool.started = 0;
    pool.alone_until = 0;
    atomic_store(&pool.sleepers, 0);
    atomic_store(&pool.busy, 0);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
}

static void register_fork_handler(void) { pthread_atfork(NULL, NULL, forget_workers); }

void wl_parallel(int64_t threads, wl_task fn, const void *ctx, int64_t n_items, int64_t grain) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (n_items <= 0) return;
    pthread_once(&once, register_fork_handler);
    if (grain < 1) grain = 1;
    if ((n_items + grain - 1) / grain > PART_MAX_CHUNKS) grain = (n_items + PART_MAX_CHUNKS - 1) / PART_MAX_CHUNKS;
    const int64_t chunks = (n_items + grain - 1) / grain;
    int expected = 0;
    if (threads <= 1 || chunks <= 1 ||
        !atomic_compare_exchange_strong(&pool.busy, &expected, 1)) {
        fn(ctx, 0, n_items); /* one thread, one chunk, or another caller holds the pool: run it here */
        return;
    }
    if (pool.alone_until > 0) { /* backing off after a stall: until then, alone; after it, no more clock reads */
        if (now_ns() < pool.alone_until) {
            pool.stats[1]++;
            fn(ctx, 0, n_items);
            atomic_store(&pool.busy, 0);
            return;
        }
        pool.alone_until = 0;
    }
    int want = (int)(threads < WL_MAX_THREADS ? threads : WL_MAX_THREADS) - 1;
    if (want > chunks - 1) want = (int)(chunks - 1);
    while (pool.started < want) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        const int ok = pthread_create(&t, &attr, worker, (void *)(intptr_t)pool.started) == 0;
        pthread_attr_destroy(&attr);
        if (!ok) break; /* fewer workers: the caller takes what they would have */
        pool.started++;
    }
    const uint32_t g = atomic_load(&pool.generation) + 1;
    pool.fn = fn, pool.ctx = ctx, pool.n_items = n_items, pool.grain = grain;
    atomic_store(&pool.wanted, want);
    atomic_store(&pool.done, 0);
    for (int k = 0; k <= want; k++) /* a late worker's swap on the last generation's word now fails */
        atomic_store_explicit(&part[k].w, part_word(g, chunks * k / (want + 1), chunks * (k + 1) / (want + 1)),
                              memory_order_relaxed);
    atomic_store(&pool.generation, g); /* publishes everything above to the workers */
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
    }
    const int64_t t0 = now_ns();
    const int64_t ran = run_chunks(g, 0, want + 1);
    int64_t t1 = 0; /* the clock once the wait has lasted STALL_CHECK spins (most waits end sooner: no more reads) */
    for (int spins = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < chunks; spins++) {
        CPU_RELAX(); /* a chunk still running elsewhere: at most one chunk's time, unless its thread was preempted */
        if (spins == STALL_CHECK) t1 = now_ns();
        if ((spins & 4095) == 4095) sched_yield();
    }
    const int64_t waited = t1 > 0 ? now_ns() - t1 : 0; /* from the check on: a little less than the whole wait */
    pool.stats[0]++;
    /* the last chunk running elsewhere began before the caller's last one ended, so a wait longer than two of the
     * caller's chunks is a worker that lost its core (few chunks of a long product, as the attention of a prompt's
     * tokens, may leave a whole chunk to wait for: not a stall); t1 - t0 counts the caller's chunks and the first
     * spins of its wait */
    if (waited > STALL_NS && waited > 2 * (t1 - t0) / (ran > 0 ? ran : 1)) {
        pool.alone_until = now_ns() + (BACKOFF * waited > BACKOFF_MIN_NS ? BACKOFF * waited : BACKOFF_MIN_NS);
        pool.stats[2]++;
    }
    atomic_store(&pool.busy, 0);
}

/* out[0..3): products split between threads, run alone after a stall, stalls; then the counts start again. */
void waferline_pool_stats(int64_t *out) {
    int expected = 0;
    while (!atomic_compare_exchange_weak(&pool.busy, &expected, 1)) expected = 0;
    memcpy(out, pool.stats, sizeof(pool.stats));
    memset(pool.stats, 0, sizeof(pool.stats));
    atomic_store(&pool.busy, 0);
}

/* -- the read probe ------------------------------------------------------------------------------------------------ */
typedef struct {
    const uint8_t *p;
    int64_t nbytes;
    _Atomic uint64_t *sum;
} read_ctx;

enum { READ_PAGE = 4096, READ_GRAIN = 16 }; /* items of 4 KB, chunks of 64 KB */

static void read_pages(const void *ctx_, int64_t begin, int64_t end) {
    const read_ctx *ctx = (const read_ctx *)ctx_;
    const uint8_t *p = ctx->p + begin * READ_PAGE;
    const uint8_t *stop = ctx->p + (end * READ_PAGE < ctx->nbytes ? end * READ_PAGE : ctx->nbytes);
    uint64_t s = 0;
#ifdef __AVX512F__
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (; p + 256 <= stop; p += 256) {
        a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p));
        a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + 64));
        a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + 128));
        a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + 192));
    }
    s = (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
#endif
    for (; p + 8 <= stop; p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        s += v;
    }
    for (; p < stop; p++) s += *p;
    atomic_fetch_add_explicit(ctx->sum, s, memory_order_relaxed);
}

/* Read every byte of `n` buffers once, in order, as fast as this CPU reads (wide loads, each buffer split between
 * `threads` threads in chunks of 64 KB), and return a checksum so that the reads cannot be optimised away. */
uint64_t waferline_read(const void *const *ptrs, const int64_t *nbytes, int64_t n, int64_t threads) {
    _Atomic uint64_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
        const read_ctx ctx = {.p = (const uint8_t *)ptrs[i], .nbytes = nbytes[i], .sum = &sum};
        wl_parallel(threads, read_pages, &ctx, (nbytes[i] + READ_PAGE - 1) / READ_PAGE, READ_GRAIN);
    }
    return atomic_load(&sum);
}

/* -- for tests: a worker that loses its core ------------------------------------------------------------------------ */
typedef struct {
    pthread_t caller;
    int64_t caller_ns, worker_ns;
    _Atomic int64_t *worker_chunks;
} stall_ctx;

static void stall_chunks(const void *ctx_, int64_t begin, int64_t end) {
    const stall_ctx *c = (const stall_ctx *)ctx_;
    for (int64_t i = begin; i < end; i++) {
        if (pthread_equal(pthread_self(), c->caller)) { /* busy, as a chunk of a product is */
            for (const int64_t until = now_ns() + c->caller_ns; now_ns() < until;) CPU_RELAX();
        } else { /* asleep in the middle of its chunk, as a preempted worker is */
            atomic_fetch_add(c->worker_chunks, 1);
            const struct timespec t = {.tv_sec = c->worker_ns / 1000000000, .tv_nsec = c->worker_ns % 1000000000};
            nanosleep(&t, NULL);
        }
    }
}

/* For tests: one product of 2 chunks on 2 threads, the caller's chunk busy for caller_us, a worker's chunk asleep for
 * worker_us; returns how many chunks a worker ran (0: the caller ran both, alone or before the worker came). */
int64_t waferline_pool_stall_probe(int64_t caller_us, int64_t worker_us) {
    _Atomic int64_t worker_chunks = 0;
    const stall_ctx ctx = {.caller = pthread_self(), .caller_ns = caller_us * 1000, .worker_ns = worker_us * 1000,
                           .worker_chunks = &worker_chunks};
    wl_parallel(2, stall_chunks, &ctx, 2, 1);
    return atomic_load(&worker_chunks);
}
