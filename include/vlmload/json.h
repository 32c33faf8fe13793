/* Parsing short-lived JSON (a reply, an SSE event) without a malloc per node.
 *
 * cJSON allocates every node and string separately. A reply's tree lives only while it is read, so
 * vl_json_parse gives cJSON a bump arena for the parse and vl_json_free forgets the tree by
 * rewinding it (nodes that did not fit are malloc'ed and freed as usual). One tree at a time, on
 * one thread: the allocator cJSON uses is process-wide and is swapped only inside vl_json_parse.
 */
#ifndef VLMLOAD_JSON_H
#define VLMLOAD_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* cJSON_ParseWithLength into the arena; white space may follow the value, nothing else. The tree
 * must be given to vl_json_free before the next vl_json_parse. Returns NULL for malformed input (or
 * no memory). */
cJSON *vl_json_parse(const char *text, size_t len);

/* Ends the tree's life (NULL accepted). */
void vl_json_free(cJSON *root);

/* A whole file parsed with cJSON's own allocator (a tree to keep; free it with cJSON_Delete).
 * NULL when the file cannot be opened (errno says why) or is not JSON (errno is then 0). */
cJSON *vl_json_load_file(const char *path);

/* As vl_json_load_file, with why on failure: errno's text, or where the text stops being JSON
 * ("not JSON: line 3, column 14"). */
cJSON *vl_json_read_file(const char *path, char *why, size_t whylen);

/* text (len bytes) parsed whole with cJSON's own allocator: one value, white space around it.
 * NULL when it is not JSON, with why saying where it stops being JSON ("not JSON: line 3,
 * column 14", the column in characters). */
cJSON *vl_json_parse_text(const char *text, size_t len, char *why, size_t whylen);

#endif
