/* Requests by the size of their images (vl_stats_t.sizes): which sizes failed, how and how often,
 * so that an error ties to the images that drew it ("1920x1080 failed 21 of 21, 640x480 0 of
 * 19"). A request counts under its largest image; text-only requests under "text-only".
 */
#ifndef VLMLOAD_SIZESTATS_H
#define VLMLOAD_SIZESTATS_H

#include "vlmload/stats.h"

#include <cjson/cJSON.h>
#include <stdio.h>

/* The rows as a new JSON array, the most failing share first: each {"size" ("WxH" or
 * "text-only"), "width", "height" (0 for text-only), "completed", "ok", "failed", "errors" (the
 * classes that occurred, with their counts), "message" (the server's words of the first failure
 * that had some, or null)}, then {"size": "other", "completed"} for requests of sizes past the
 * first VL_STATS_SIZES, when there were any. */
cJSON *vl_sizestats_json(const vl_stats_t *s);

/* Whether the summary prints them: requests failed and they were of more than one size. */
int vl_sizestats_worth_printing(const vl_stats_t *s);

/* The text summary's "by size" line: each size, how many of its requests failed and by which
 * class, the most failing share first. */
void vl_sizestats_print(FILE *f, const vl_stats_t *s);

#endif
