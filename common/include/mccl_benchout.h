/**
 * @file mccl_benchout.h
 * @brief Benchmark results as CSV and JSON files (one record per row and placement), with the run's
 * metadata, and progress lines on long runs: what `make plot` (mk/plot.py) reads.
 * @ingroup common
 *
 * A CSV file starts with the metadata as comment lines (`# date: ...`), then a header line and one
 * line per record. A JSON file is one object: `{"metadata": {...}, "rows": [{...}, ...]}`. The
 * columns (and JSON keys) are, in order: size (bytes), count (elements), type, redop, lib (`minccl`
 * or `nccl`), variant (the series a chart draws: the algorithm asked for, e.g. `ring` or `auto`, or
 * NCCL's buffer kind), algo (what ran at this size, e.g. `ring/LL`), placement (`oop` or `ip`), time_us, algbw and
 * busbw (GB/s), wrong (empty / null: not checked), nccl_time_us (NCCL's best time of the same size and placement, empty
 * / null where not measured) and ratio (nccl_time_us / time_us, > 1: minccl is faster). Each record is written (and
 * flushed) as it comes, so a CSV file holds every row measured before a run was cut short; the JSON file is closed by
 * mcclBenchOutClose().
 * @code
 * mcclBenchMeta meta;
 * mcclBenchMetaFill(&meta, dev, argc, argv);
 * mcclBenchOut* out;
 * MCCLCHECK(mcclBenchOutOpen(csvPath, jsonPath, &meta, &out));  // either path may be NULL
 * mcclBenchRecord r = {.bytes = 1024, .count = 256, .type = "float32", .redop = "sum", .lib = "minccl",
 *                      .variant = "ring", .algo = "ring/LL", .inPlace = 0, .timeUs = 7.5, .wrong = 0};
 * mcclBenchRecordRates(&r, nranks);  // algbw, busbw from bytes and timeUs
 * MCCLCHECK(mcclBenchOutRecord(out, &r));
 * MCCLCHECK(mcclBenchOutClose(out));
 * @endcode
 */
#ifndef MCCL_BENCHOUT_H_
#define MCCL_BENCHOUT_H_

#include <stddef.h>
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup common
 * @{ */

/** @brief Longest metadata value kept, with its terminating NUL. */
#define MCCL_BENCH_META_LEN 256
/** @brief Most extra metadata entries (mcclBenchMetaAdd()). */
#define MCCL_BENCH_META_EXTRA 16

/**
 * @brief A run's metadata: written first in both files, and used by mk/plot.py for chart titles.
 * mcclBenchMetaFill() sets the fixed fields; mcclBenchMetaAdd() appends others (NCCL's version,
 * ranks, timing settings). An empty field is left out of the files.
 */
typedef struct {
  char date[MCCL_BENCH_META_LEN];           /**< UTC, ISO 8601 */
  char device[MCCL_BENCH_META_LEN];         /**< the device's name (cudaGetDeviceProperties) */
  char driver[MCCL_BENCH_META_LEN];         /**< the kernel module and CUDA versions, e.g. "580.159.04 (CUDA 13.0)" */
  char commit[MCCL_BENCH_META_LEN];         /**< MCCL_COMMIT, else `git rev-parse --short HEAD`, else "unknown" */
  char backend[MCCL_BENCH_META_LEN];        /**< "cuda" or "sim" */
  char command[MCCL_BENCH_META_LEN];        /**< the program and its arguments, cut to fit */
  int nExtra;                               /**< entries used in extraKey / extraValue */
  char extraKey[MCCL_BENCH_META_EXTRA][64]; /**< extra keys, in order */
  char extraValue[MCCL_BENCH_META_EXTRA][MCCL_BENCH_META_LEN]; /**< their values */
} mcclBenchMeta;

/** @brief One result: a size at one algorithm (or library) and placement. */
typedef struct {
  size_t bytes;        /**< message size in bytes */
  size_t count;        /**< elements */
  const char* type;    /**< element type, e.g. "float32" */
  const char* redop;   /**< reduction, e.g. "sum" */
  const char* lib;     /**< "minccl" or "nccl" */
  const char* variant; /**< the series: the algorithm asked for ("ring", "auto"), or "nccl", "nccl-sym" */
  const char* algo;    /**< what ran at this size, as the row shows it, e.g. "ring/LL", "auto:oneshot" */
  int inPlace;         /**< 0: out-of-place ("oop"), 1: in-place ("ip") */
  double timeUs;       /**< microseconds per call */
  double algbw;        /**< bytes / time, GB/s (mcclBenchRecordRates()) */
  double busbw;        /**< algbw * 2(n-1)/n, GB/s (mcclBenchRecordRates()) */
  long wrong;          /**< wrong elements; negative: not checked */
  double ncclTimeUs;   /**< NCCL's best time for this size and placement (the ratio column is
                            ncclTimeUs / timeUs); 0: not measured */
} mcclBenchRecord;

/** @brief Where the records go (opaque; mcclBenchOutOpen()). */
typedef struct mcclBenchOut mcclBenchOut;

/**
 * @brief Fill the fixed metadata: date now, device and driver of CUDA device dev, the commit, the
 * backend and the command line; no extra entries.
 * @param[out] meta  the metadata.
 * @param[in]  dev   the CUDA device the run uses (its name and the driver are asked of the runtime;
 *                   "unknown" if that fails).
 * @param[in]  argc,argv main()'s arguments (the command field).
 */
void mcclBenchMetaFill(mcclBenchMeta* meta, int dev, int argc, char** argv);

/**
 * @brief Append an extra metadata entry (written after the fixed ones, in the order added).
 * @param[in,out] meta   the metadata.
 * @param[in]     key    its key: letters, digits and '_' only.
 * @param[in]     value  its value (cut to MCCL_BENCH_META_LEN - 1 bytes).
 * @return mcclSuccess; mcclInvalidArgument for a NULL argument, a bad key, or more than
 *         MCCL_BENCH_META_EXTRA entries.
 */
mcclResult_t mcclBenchMetaAdd(mcclBenchMeta* meta, const char* key, const char* value);

/**
 * @brief Set algbw and busbw from bytes and timeUs (nccl-tests' allreduce factor 2(n-1)/n; 1 for
 * one rank). Both 0 when timeUs is not positive.
 * @param[in,out] r       the record.
 * @param[in]     nranks  ranks in the communicator.
 */
void mcclBenchRecordRates(mcclBenchRecord* r, int nranks);

/**
 * @brief The median of @p n samples, the figure every benchmark reports after warm-up: the middle
 * one, or the mean of the middle two when @p n is even. Sorts @p v in place.
 * @param[in,out] v  the samples; sorted on return.
 * @param[in]     n  how many.
 * @return the median; 0 when @p n is less than 1.
 */
double mcclBenchMedian(double* v, int n);

/**
 * @brief Create the output files and write the metadata (and the CSV header).
 * @param[in]  csvPath   CSV file to create (replaced if it exists), or NULL for none.
 * @param[in]  jsonPath  JSON file to create (replaced if it exists), or NULL for none.
 * @param[in]  meta      the run's metadata.
 * @param[out] out       the writer, set on success only (also when both paths are NULL: records
 *                       then go nowhere).
 * @return mcclSuccess; mcclInvalidArgument for a NULL meta or out; mcclSystemError (with a message
 *         naming the file) when a file cannot be created.
 */
mcclResult_t mcclBenchOutOpen(const char* csvPath, const char* jsonPath, const mcclBenchMeta* meta, mcclBenchOut** out);

/**
 * @brief Write one record to each file, and flush.
 * @param[in] out  the writer.
 * @param[in] r    the record; type, redop, lib, variant and algo must not be NULL.
 * @return mcclSuccess; mcclInvalidArgument for NULL arguments; mcclSystemError when a write fails.
 */
mcclResult_t mcclBenchOutRecord(mcclBenchOut* out, const mcclBenchRecord* r);

/**
 * @brief Close the JSON object, close the files and free the writer (NULL: nothing to do).
 * @param[in] out  the writer.
 * @return mcclSuccess; mcclSystemError when a final write or close fails (the writer is freed anyway).
 */
mcclResult_t mcclBenchOutClose(mcclBenchOut* out);

/**
 * @brief Whether progress lines should be printed: when asked (`--progress`), or when stderr is a
 * terminal.
 * @param[in] forced  non-zero: always.
 * @return 1 or 0.
 */
int mcclBenchProgressOn(int forced);

/**
 * @brief One progress line on stderr: `[done/total] what, elapsed s`, flushed.
 * @param[in] done     items finished.
 * @param[in] total    items in the run (0: unknown, left out).
 * @param[in] what     what was just finished, e.g. "1 MiB float32 sum".
 * @param[in] elapsed  seconds since the run started.
 */
void mcclBenchProgress(int done, int total, const char* what, double elapsed);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
