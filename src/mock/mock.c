/* vlmmock: the mock VLM server that vlmload's tests and quick start run against.
 *
 * THREADING. MHD runs in MHD_USE_EPOLL_INTERNAL_THREAD mode with a pool of --threads workers (one
 * per CPU), each an epoll loop over its share of the connections, and MHD_ALLOW_SUSPEND_RESUME. A
 * connection that has to wait (--latency before its headers, --ttft and --itl between streamed
 * tokens, the stall fault) is suspended, which takes it out of epoll; one timer thread (timer.c: a
 * min-heap of deadlines and a condition variable on CLOCK_MONOTONIC) resumes it when due. So a
 * waiting request costs a heap entry and MHD's connection memory, no thread and no CPU; one slow
 * request never delays another; and an idle server sleeps. Every instant is absolute (token k at
 * body received + latency + ttft + k*itl), so lateness never accumulates; the timer groups
 * deadlines within 200 us into one wake-up and never fires early. A streamed reply is an MHD
 * content reader that emits every event already due and, when none is, suspends the connection
 * until the next and returns 0 (MHD documents both as legal in a content reader). Bodies over
 * 64 KiB are parsed and their images decoded by a small pool (work.c) while their connection is
 * suspended, so decoding never stalls an HTTP thread. Thread-per-connection (blocking sleeps in
 * the handler and reader) was measured and rejected: with 5000 streams it spent more than twice
 * the CPU and delayed first bytes by seconds. Known cost: MHD scans a worker's whole list of
 * suspended connections on each resume pass, which shows at thousands of sparse wake-ups a second.
 * Shutdown (SIGINT, SIGTERM): stop accepting, drain the decode pool, resume every suspended
 * connection (MHD_stop_daemon requires it; resumed requests end at once), stop the daemon.
 *
 * RECORD (--record FILE): JSON Lines, truncated at start, one line per event, each written whole
 * with one write(2), so the file can be read at any moment and survives a kill. Model requests
 * (chat, and SGLang's native /generate) are written when the body has been received and parsed
 * (lines may be out of seq order by a little; a body refused by its Content-Length as too large is
 * written at once, status 413):
 *   {"seq":0,"route":"/v1/chat/completions","t_us":<CLOCK_MONOTONIC us, body received>,
 *    "wall_ms":<epoch ms>,"in_flight":<model requests in flight, this one included>,
 *    "completed_before":<model requests fully answered before this one was admitted>,
 *    "body_bytes":N,"stream":false,"max_tokens":N|null,"model":"..."|null,"messages":N,
 *    "text_parts":N,"roles":["user","assistant",...] (each message's, null when not a string),
 *    "assistant":[<each assistant message's content as received, null when not a string>],
 *    "reply":"<the content this reply sends>"|null (null for an error or an injected fault; chat
 *             replies differ per request: "chatcmpl-mock-<seq> \"q\" \\ é\n tok tok ..."),
 *    "prompt_chars":<code points>,
 *    "text_tokens":<the text's tokens by the mock's tokenizer (tokenizer.h); usage.prompt_tokens
 *                   is this plus --vision-tokens per image>,
 *    "extra":{<every top-level field beyond model, messages, max_tokens, temperature, stream and
 *             stream_options, as sent: max_completion_tokens, ignore_eos, top_k ...>},
 *    "images":[{"fmt":"png"|"jpeg","w":W,"h":H,"channels":1..4,"bytes":<encoded>,
 *               "hash":"<16 hex: FNV-1a 64 of the 8-bit pixel rows>"}],
 *    "prompt_hash":"<16 hex: FNV-1a 64 of the text's bytes, its text parts in order>",
 *    "prompt_head":"<the same of its first 256 bytes>" (prompts sharing a prefix share it),
 *    "tokens":<completion tokens planned>,"status":200|400|401|413|429|500|503|0 (reset,
 *    stall; 200 for reset_after_headers, huge and slowloris, whose headers say so),
 *    "fault":"http500"|...  (only when injected), "error":"..." (only for a 4xx on content)}
 * A /generate request (sglang profile) has the same line with "route":"/generate", "max_tokens"
 * from sampling_params.max_new_tokens, "model" null, and in place of "messages" and "text_parts"
 *    "placeholders":<image placeholders (--image-token) in the text>,
 * its "extra" holding the top-level fields beyond text, image_data, sampling_params and stream,
 * and "sampling_extra":{<sampling_params' fields beyond max_new_tokens and temperature>},
 * its "prompt_chars" counting the text without them; a text whose placeholders do not number its
 * images is answered 400. Chat and /generate requests share one seq, one fault sequence, one
 * in-flight count (the flush check's) and the memory model.
 * Flushes and cache resets:
 *   {"route":"/flush_cache"|"/reset_prefix_cache"|"/reset_mm_cache","t_us":..,"wall_ms":..,
 *    "in_flight":N,"completed_before":N,"status":200|400|500|0 (flush_stall),
 *    (in_flight: model requests whose reply was not yet produced in full, the count SGLang's
 *    idle check sees; completed_before: those whose reply was)
 *    "fault":"flush400"|"flush500"|"flush_stall" (only when injected)}
 *
 * STATS (GET /mock/stats), counters since start; /metrics has the same as vlmmock_* series:
 *   {"profile","model","uptime_s","requests_total","requests_completed_total",
 *    "bad_requests_total","requests_in_flight","requests_in_flight_max","images_total",
 *    "image_bytes_total","image_pixels_total","prompt_tokens_total","completion_tokens_total",
 *    "flushes_total","flush_refused_total","reset_prefix_cache_total","reset_mm_cache_total",
 *    "tokenize_total" (POST /tokenize calls answered),
 *    "faults":{"http500":N,"http503":N,"http429":N,"http400":N,"malformed":N,"truncate":N,
 *              "reset":N,"stall":N,"http401":N,"reset_after_headers":N,"huge":N,
 *              "slowloris":N,"flush400":N,"flush500":N,"flush_stall":N},
 *    "memory_bytes","memory_base_bytes","memory_leaked_bytes","memory_cached_bytes",
 *    "memory_noise_bytes","memory_unheld_bytes","memory_resident_bytes","connections",
 *    "memory":{"base","leaked","cached","noise","shm","step","arena","total","unheld","evicted",
 *              "resident" (bytes each, as memory.c and arena.c define them),"arena_threads"},
 *    "memory_requests" (model requests the memory model has processed),
 *    "step_at_request" (the one of those, 1-based, that made --step-mb-at-first-image's step;
 *    null before it or without it)}
 * A model request is in flight from admission (body received) until MHD reports it ended, whatever
 * the outcome; "completed" counts those whose response was sent in full. A fault replaces the
 * normal answer whether or not the request was valid; its images are still decoded and counted.
 *
 * MEMORY (memory.c): the memory model is held for real, so that a monitor of the process's resident
 * set measures what the model says. Each decoded image adds --leak-kb-per-image to a pool that is
 * never released and --cache-kb-per-image to one that a flush or cache reset unmaps; each model
 * request redraws the size of a noise region (0 to 2x --memory-noise-kb, from --seed). All three
 * live in anonymous mappings of their own, every page written as it is claimed, so residency
 * follows them page for page and a release reaches the kernel at once. A thread of their own
 * does the touching, so no request waits on page faults; a reading waits for the work asked
 * before it, so the figures include every request processed so far. memory_bytes = base +
 * leaked + cached + noise, base being the resident size once listening; memory_resident_bytes is
 * VmRSS at the reading, which also holds the server's working memory (a few MiB). The pools never
 * pass --memory-limit-mb: growth beyond is counted in memory_unheld_bytes instead, so a long run
 * levels off rather than exhausting the host. Four more ways to grow, each of a kind a monitor of
 * /proc/PID/smaps tells apart: --shm-kb-per-image in a shared /dev/shm mapping, a one-time
 * --step-mb-at-first-image at the first image, --cache-cap-mb capping the cache, and
 * --arena-threads filling glibc arenas that then hold; memory_bytes adds them in.
 *
 * FAULTS (--fault KIND:RATE): chat faults are drawn from the sequence of model requests, flush
 * faults from the sequence of flush and cache-reset calls, each exactly floor(n * RATE) of the
 * first n. A flush fault replaces the call: it neither flushes nor counts as a flush or a
 * refusal. The huge reply (--huge-bytes) is made by a content reader as it is sent, and the
 * slowloris reply is sent a byte per VL__SLOWLORIS_NS from the suspended connection, so neither
 * holds memory or a thread. */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Raises the open-file limit to its hard maximum. When that cannot hold the connections plus a few
 * descriptors of our own, the default connection limit shrinks to fit; an explicit one only warns.
 */
static void raise_nofile(vl__config_t *cfg) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return;
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  getrlimit(RLIMIT_NOFILE, &rl);
  rlim_t spare = 64;
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t)cfg->max_connections + spare)
    return;
  if (cfg->max_connections_given)
    fprintf(stderr,
            "vlmmock: warning: the open-file limit (%llu) cannot hold --max-connections %u\n",
            (unsigned long long)rl.rlim_cur, cfg->max_connections);
  else
    cfg->max_connections = rl.rlim_cur > 2 * spare ? (unsigned)(rl.rlim_cur - spare) : 1;
}

/* Writes the port to path atomically: a temporary file in the same directory, then rename. */
static int write_port_file(const char *path, uint16_t port) {
  size_t n = strlen(path) + 32;
  char *tmp = vl_xmalloc(n);
  snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  int rc = 0;
  if (!f || fprintf(f, "%u\n", port) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0)
    rc = -errno;
  if (f && fclose(f) != 0 && rc == 0)
    rc = -errno;
  if (rc == 0 && rename(tmp, path) != 0)
    rc = -errno;
  if (rc != 0)
    unlink(tmp);
  free(tmp);
  return rc;
}

int main(int argc, char **argv) {
  static vl__config_t cfg;
  int rc = vl__cli_parse(argc, argv, &cfg);
  if (rc != 0)
    return rc == 1 ? 0 : 2;
  raise_nofile(&cfg);
  vl__stats.start_ns = vl_now_ns();

  /* Every thread inherits this mask; only sigwait below sees the stop signals. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  signal(SIGPIPE, SIG_IGN);

  if (cfg.record && (rc = vl__record_open(cfg.record)) != 0) {
    fprintf(stderr, "vlmmock: --record: cannot open %s: %s\n", cfg.record, vl_strerror(rc));
    return 2;
  }
  if (vl__memory_start() != 0) {
    vl__record_close();
    return 1;
  }
  if ((rc = vl__timer_start()) != 0 || (rc = vl__work_start(cfg.decode_threads)) != 0) {
    fprintf(stderr, "vlmmock: cannot start threads: %s\n", vl_strerror(rc));
    return 1;
  }
  if (vl__server_start() != 0) {
    vl__work_stop();
    vl__timer_stop();
    vl__memory_stop();
    vl__record_close();
    return 1;
  }
  vl__memory_baseline();
  uint16_t port = vl__server_port();
  if (cfg.port_file && (rc = write_port_file(cfg.port_file, port)) != 0) {
    fprintf(stderr, "vlmmock: --port-file: cannot write %s: %s\n", cfg.port_file, vl_strerror(rc));
    vl__server_stop();
    vl__memory_stop();
    vl__record_close();
    return 2;
  }
  printf("vlmmock listening on %s://%s%s%s:%u\n", cfg.tls_cert ? "https" : "http",
         cfg.ipv6 ? "[" : "", cfg.host, cfg.ipv6 ? "]" : "", port);
  fflush(stdout);

  int sig = 0;
  while (sigwait(&stop, &sig) != 0)
    ;
  if (cfg.verbose)
    fprintf(stderr, "vlmmock: %s, stopping\n", strsignal(sig));
  vl__server_stop();
  vl__memory_stop();
  vl__record_close();
  return 0;
}
