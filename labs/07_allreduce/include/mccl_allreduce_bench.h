/**
 * @file mccl_allreduce_bench.h
 * @brief The allreduce benchmark driver that lab 07's `mpi_bench_allreduce` and final's
 * `allreduce_perf` share: nccl-tests' flags and table, NCCL's ncclAllReduce beside ours in the same
 * run (dlopen), the data check, eager or CUDA-graph timing, CSV/JSON files, progress lines and a
 * closing summary (a few sizes: our best time, NCCL's, their ratio). A program supplies only its
 * allreduce (a table of callbacks) and its buffers; the driver does the rest.
 * @ingroup lab07
 *
 * It lives in `libmccl_07_allreduce_bench.a` (labs/07_allreduce/benchlib/), linked into the
 * benchmarks of lab 07 and of every module above it, never into a library. It uses MPI (the
 * program calls MPI_Init first): one process per device under mpirun (nccl-tests' `-g 1`), or one
 * process driving several devices (`nLocal` > 1, nccl-tests' `-g N`, the calls of one iteration in
 * a group).
 * @code
 * static const char* const mine[] = {"--nccl", NULL};
 * mcclArBenchSpec spec = {.program = "final allreduce_perf", .extraOptions = mine, .usage = "[--nccl]", .help = help};
 * mcclArBenchOpts o;
 * mcclArBenchParse(argc, argv, &spec, &o);          // before MPI_Init; exits 2 on a bad flag
 * MPI_Init(&argc, &argv);
 * mcclArBenchSetup s = {.program = spec.program, .nLocal = 1, .devs = {dev}, .streams = {stream},
 *                       .nOurs = 1, .ours = {{.lib = "minccl", .variant = "auto", .send = {sbuf}, .recv = {rbuf}}},
 *                       .ops = {.enqueue = myAllReduce, .ctx = comm}, .useNccl = 1, .summary = 1};
 * long wrong;
 * MCCLCHECK(mcclArBenchRun(&s, &o, argc, argv, &wrong));
 * @endcode
 */
#ifndef MCCL_ALLREDUCE_BENCH_H_
#define MCCL_ALLREDUCE_BENCH_H_

#include <stddef.h>
#include <cuda_runtime.h>
#include "mccl_result.h"
#include "mccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup lab07
 * @{ */

/** @brief Most devices one process drives (`-g`). */
#define MCCL_ARB_MAX_LOCAL 8
/** @brief Most targets of ours (rows per size besides NCCL's). */
#define MCCL_ARB_MAX_TARGETS 12
/** @brief Most sizes of a sweep. */
#define MCCL_ARB_MAX_SIZES 64
/** @brief Most extra metadata entries a program adds (mcclArBenchSetup::metaKey). */
#define MCCL_ARB_MAX_META 8

/** @brief The settings the common flags give (mcclArBenchParse()). */
typedef struct {
  size_t minBytes;         /**< -b */
  size_t maxBytes;         /**< -e */
  int factor;              /**< -f */
  int iters;               /**< -n: timed calls per row */
  int warm;                /**< -w: warm-up calls per row */
  int check;               /**< -c: checked calls per row and placement (0: no check) */
  int graph;               /**< -G: graph replays per row (0: eager launches) */
  int reg;                 /**< -R: 0 or 2 (symmetric windows) */
  int nLocal;              /**< -g: devices per process */
  int progress;            /**< --progress */
  int types[mcclNumTypes]; /**< -d: the types swept */
  int nTypes;              /**< entries of types */
  int ops[mcclNumOps];     /**< -o: the operations swept */
  int nOps;                /**< entries of ops */
  const char* csv;         /**< --csv FILE, or NULL */
  const char* json;        /**< --json FILE, or NULL */
} mcclArBenchOpts;

/** @brief What a program tells mcclArBenchParse(): its own options, usage and defaults. */
typedef struct {
  const char* program;             /**< its name in messages, e.g. "lab 07 bench" */
  const char* const* extraOptions; /**< its own spellings, NULL-terminated (mcclArgsCheckOpts()), or NULL */
  const char* usage;               /**< the usage line's part for its own options (after the common ones) */
  const char* help;                /**< what `--help` prints after the usage line */
  int maxLocal;                    /**< largest -g accepted (0 or 1: -g is not offered) */
} mcclArBenchSpec;

/** @brief One row's results (both placements). */
typedef struct {
  double sec[2]; /**< seconds per call [out-of-place, in-place], max over ranks; 0: not run */
  long wrong[2]; /**< wrong elements summed over ranks and checked calls; -1: not checked */
} mcclArBenchRow;

/** @brief A series of rows: one allreduce on its buffers (one per local device). */
typedef struct {
  const char* lib;                /**< "minccl" (the driver fills NCCL's targets itself) */
  const char* variant;            /**< the series name (the CSV's variant column) */
  int id;                         /**< the program's own number for it (lab 07: its algorithm) */
  void* send[MCCL_ARB_MAX_LOCAL]; /**< send buffer of each local device (maxBytes + 64 bytes) */
  void* recv[MCCL_ARB_MAX_LOCAL]; /**< receive buffer of each local device (maxBytes + 64 bytes) */
} mcclArBenchTarget;

/** @brief The program's allreduce and hooks; ctx is passed back to each. Only enqueue is required. */
typedef struct {
  /** One allreduce of local device `local` on `stream` (in a group when nLocal > 1). */
  mcclResult_t (*enqueue)(void* ctx, const mcclArBenchTarget* t, int local, const void* src, void* dst, size_t count,
                          int dtype, int op, cudaStream_t stream);
  mcclResult_t (*groupStart)(void* ctx); /**< around the nLocal calls of one iteration (NULL: nothing) */
  mcclResult_t (*groupEnd)(void* ctx);   /**< (NULL: nothing) */
  /** Before a row of t: every rank between barriers, streams drained (lab 07 forces its algorithm). */
  void (*beginRow)(void* ctx, const mcclArBenchTarget* t);
  /** Whether t runs at this size (NULL: always). The same answer on every rank. */
  int (*runs)(void* ctx, const mcclArBenchTarget* t, size_t bytes);
  /** The table's algo column for t at this size (NULL: its variant). */
  void (*label)(void* ctx, const mcclArBenchTarget* t, size_t bytes, char* buf, size_t len);
  /** After each row of t (NULL: nothing); lab 07's --tune collects its times here. */
  void (*onRow)(void* ctx, const mcclArBenchTarget* t, size_t bytes, const mcclArBenchRow* r);
  /** A call did not finish in time: abort the communicators (NULL: nothing). */
  void (*abort)(void* ctx);
  void* ctx; /**< passed to each */
} mcclArBenchOps;

/** @brief What a program hands mcclArBenchRun(): devices, streams, its targets and hooks. */
typedef struct {
  const char* program;                          /**< metadata "program" */
  int nLocal;                                   /**< devices this process drives (1 under mpirun) */
  int devs[MCCL_ARB_MAX_LOCAL];                 /**< their CUDA device numbers */
  cudaStream_t streams[MCCL_ARB_MAX_LOCAL];     /**< the stream of each */
  mcclArBenchTarget ours[MCCL_ARB_MAX_TARGETS]; /**< our series, in row order */
  int nOurs;                                    /**< entries of ours */
  mcclArBenchOps ops;                           /**< our allreduce */
  int useNccl;                                  /**< time NCCL's ncclAllReduce too (MCCL_NCCL_LIB; never on the sim) */
  int ncclSameBuffers;    /**< NCCL's plain row on ours[0]'s buffers (else on cudaMalloc buffers of its own) */
  const char* ncclWhyNot; /**< when useNccl is 0: why, for the header line */
  int oopOnly;            /**< out-of-place rows only */
  int shmMode;            /**< a run with P2P disabled (the SHM path; no nccl-sym rows) */
  int netMode;            /**< ranks posed as several hosts, edges over NET (no nccl-sym rows) */
  int summary;            /**< end with the summary: a few sizes, our best time and NCCL's, their ratio */
  const char* metaKey[MCCL_ARB_MAX_META];   /**< extra metadata of the --csv/--json files */
  const char* metaValue[MCCL_ARB_MAX_META]; /**< their values */
  int nMeta;                                /**< entries of metaKey */
} mcclArBenchSetup;

/**
 * @brief Check the command line (common flags and the program's own) and read the common ones:
 * `-b -e -f -n -w -c -d -o -G -R [-g] --csv --json --progress`. Refuses (exit 2, the option named)
 * a bad value, -R 1, -b above -e, and -G on the sim. Call before MPI_Init.
 * @param[in]  argc,argv main()'s arguments.
 * @param[in]  spec      the program's options and help.
 * @param[out] opts      the settings.
 */
void mcclArBenchParse(int argc, char** argv, const mcclArBenchSpec* spec, mcclArBenchOpts* opts);

/**
 * @brief The whole run: NCCL set up (where asked and present), the header, for each type and
 * operation every size (NCCL's rows first, then ours, each checked then timed, printed and written
 * as it comes), the summary, NCCL torn down. Rank 0 prints; every rank calls it.
 * @param[in]  setup      devices, streams, targets, hooks.
 * @param[in]  opts       from mcclArBenchParse().
 * @param[in]  argc,argv  main()'s arguments (the files' metadata).
 * @param[out] totalWrong wrong elements of every row (the same on every rank).
 * @return mcclSuccess; the first failure otherwise (a hang after 120 s is mcclSystemError).
 */
mcclResult_t mcclArBenchRun(const mcclArBenchSetup* setup, const mcclArBenchOpts* opts, int argc, char** argv,
                            long* totalWrong);

/**
 * @brief A benchmark's exit status after its run, as nccl-tests: a failed run aborts the MPI job
 * (naming the error), wrong data makes the status 1 (the count is the same on every rank).
 * @param[in] program    the program's name, for the messages.
 * @param[in] rank       this process's MPI rank (rank 0 reports wrong data).
 * @param[in] r          what mcclArBenchRun (or the program's set-up around it) returned.
 * @param[in] totalWrong wrong elements it counted.
 * @return 0, or 1 when totalWrong > 0 (a failed run does not return).
 */
int mcclArBenchExitStatus(const char* program, int rank, mcclResult_t r, long totalWrong);

/**
 * @brief "8 B", "4 KiB", "2 MiB": a size as the tables and summaries show it.
 * @param[in]  bytes  the size.
 * @param[out] buf    where the text goes.
 * @param[in]  len    its size.
 * @return buf.
 */
const char* mcclArBenchFmtSize(size_t bytes, char* buf, size_t len);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
