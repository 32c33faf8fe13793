/* A request trace to replay: one row per request with its arrival time, its prompt and output
 * lengths in tokens, the ids of its prompt's 512-token blocks and its image count.
 *
 * Two formats, told apart by the file's extension (.jsonl, .ndjson or .json; .csv), else by its
 * first byte that is not blank ('{': JSONL):
 * - Mooncake's JSONL (kvcache-ai/Mooncake FAST25-release/traces, as AIPerf, SGLang's bench_serving
 *   and Dynamo read it), one object per line: "timestamp" (ms, required), "input_length" (tokens,
 *   required), "output_length" (tokens, required), "hash_ids" (optional: a list of whole numbers,
 *   one per 512-token block of the prompt; rows whose lists start alike share that prefix), and
 *   vlmload's own "images" (optional: images the request carries, 0 to VL_MAX_IMAGES). Other keys
 *   (session_id ...) are ignored. Blank lines are skipped.
 * - CSV (csvin.h's syntax) with the columns timestamp_ms, input_tokens, output_tokens and,
 *   optionally, images; other columns are ignored.
 *
 * Timestamps are milliseconds on any origin; each row's offset is its timestamp minus the
 * smallest one. Rows need not be in time order: they are sorted by timestamp, stably (rows with
 * equal timestamps keep their file order), and request i is row i of that order. A bad row is
 * refused as a whole file with one line naming it: "FILE:LINE: what is wrong".
 */
#ifndef VLMLOAD_TRACE_H
#define VLMLOAD_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The longest prompt and output a row may ask for, in tokens. */
#define VL_TRACE_MAX_INPUT  10000000
#define VL_TRACE_MAX_OUTPUT 1000000
/* Tokens per hash id (Mooncake's block size). */
#define VL_TRACE_BLOCK_TOKENS 512

typedef enum {
  VL_TRACE_JSONL = 0, /* Mooncake's JSON lines */
  VL_TRACE_CSV,
} vl_trace_format_t;

typedef struct vl_trace_row_s {
  int input_tokens;  /* 0..VL_TRACE_MAX_INPUT */
  int output_tokens; /* 1..VL_TRACE_MAX_OUTPUT: the request's max_tokens */
  int images;        /* 0..VL_MAX_IMAGES (0 when the trace gives no counts) */
  uint32_t line;     /* the row's line in the file (1-based) */
  size_t hash;       /* its hash ids: hashes[hash .. hash + n_hash - 1] */
  uint32_t n_hash;
} vl_trace_row_t;

typedef struct vl_trace_s {
  char *path; /* as given; owned */
  vl_trace_format_t format;
  size_t n;             /* rows, >= 1 */
  vl_trace_row_t *rows; /* n, in time order */
  double *at_ms;        /* n: row i's offset from the first, ascending, at_ms[0] == 0 */
  uint64_t *hashes;     /* every row's hash ids, row after row */
  size_t n_hashes;      /* their number */
  int has_images;       /* the trace gives images per row (a column, or the key in some row) */
  int images_lo;        /* the smallest nonzero count (0 when none is) */
  int images_hi;        /* the largest count */
  size_t out_of_order;  /* rows found earlier in time than the row before them in the file */
  double span_ms;       /* the last row's offset */
  int input_lo, input_hi, output_lo, output_hi;
  double input_mean, output_mean;
} vl_trace_t;

/* Reads and checks the trace at path into *t (vl_trace_free frees it; on failure nothing is left
 * to free). Returns 0, VL_EIO when the file cannot be read, VL_EINVAL for a bad row or an empty
 * trace; err gets one line, without a trailing period, naming the file and the line. */
int vl_trace_load(vl_trace_t *t, const char *path, char *err, size_t errlen);

/* As vl_trace_load, from len bytes of text; `name` stands for the file in messages and picks the
 * format by its extension as a path would. */
int vl_trace_parse(vl_trace_t *t, const char *name, const char *text, size_t len, char *err,
                   size_t errlen);

void vl_trace_free(vl_trace_t *t);

/* "mooncake jsonl" or "csv". */
const char *vl_trace_format_name(vl_trace_format_t f);

/* Row i's due time after the start of the replay at `speed` (2: twice as fast), in ns. */
uint64_t vl_trace_due_ns(const vl_trace_t *t, size_t i, double speed);

/* Rows whose first hash id is that of an earlier row: their prompts start with a block already
 * sent. */
size_t vl_trace_shared_prefix_rows(const vl_trace_t *t);

struct cJSON;

/* The summary's "trace" object: file, format, rows, speed, span_s (the trace's own), replay_s (at
 * speed), rows_out_of_order, hash_ids, rows_sharing_prefix, images_per_row. Caller owns it. */
struct cJSON *vl_trace_json(const vl_trace_t *t, double speed);

/* The text summary's words about the trace: "FILE (FORMAT): N rows over Xs at Yx". */
void vl_trace_words(const vl_trace_t *t, double speed, char *buf, size_t cap);

/* Prints the --dry-run lines about the trace replayed at speed, each starting with "trace". */
void vl_trace_describe(const vl_trace_t *t, double speed, FILE *out);

#endif
