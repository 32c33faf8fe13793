/* The live progress line: every figure labelled, and a line that fits the terminal by losing whole
 * fields, the least important first. */
#include "task.h"
#include "vlmload/common.h"
#include "vlmload/progress.h"

#include <fcntl.h>
#include <pty.h>
#include <sys/ioctl.h>

static vl_progress_t busy(void) {
  vl_progress_t p = {
      .elapsed_s = 125.4,
      .phase = "measure",
      .rate = 45.0,
      .sent = 5643,
      .ok = 5600,
      .failed = 12,
      .dropped = 3,
      .in_flight = 31,
      .p50_ms = 35.12,
      .p99_ms = 812.3,
      .ttft_p50_ms = 12.34,
      .rss_mb = 20480,
      .gpu_mb = 812,
      .flushes_on = 1,
      .flushes = 112,
  };
  return p;
}

TEST_IMPL(progress_wide_shows_every_field_labelled) {
  vl_progress_t p = busy();
  char line[512];
  size_t n = vl_progress_format(line, sizeof(line), 200, &p);
  ASSERT_UINT_EQ(n, strlen(line));
  ASSERT_STR_EQ(line, "125s  45.0 req/s  ok 5600  err 12  dropped 3  in flight 31  p50 35.1ms  "
                      "p99 812ms  TTFT p50 12.3ms  rss 20.5 GB  gpu 812 MB  flushes 112  "
                      "sent 5643");
}

/* At any width the line stays within width - 1 columns, and what goes first is what matters
 * least: the total sent, then p99, then requests in flight. */
TEST_IMPL(progress_fits_by_dropping_least_important) {
  vl_progress_t p = busy();
  char line[512];
  for (int w = 2; w <= 200; w++) {
    size_t n = vl_progress_format(line, sizeof(line), w, &p);
    ASSERT(n <= (size_t)w - 1);
    ASSERT(strstr(line, "  ") != line); /* never starts with a separator */
    if (w >= 80) {
      ASSERT(strstr(line, "req/s") != NULL);
      ASSERT(strstr(line, "ok 5600") != NULL);
      ASSERT(strstr(line, "err 12") != NULL);
      ASSERT(strstr(line, "flushes 112") != NULL);
      ASSERT(strstr(line, "rss 20.5 GB") != NULL);
    }
  }
  vl_progress_format(line, sizeof(line), 80, &p);
  ASSERT(strstr(line, "sent 5643") == NULL);
  ASSERT(strstr(line, "p99") == NULL);
  ASSERT(strstr(line, "in flight") == NULL);
  ASSERT(strstr(line, "p50 35.1ms") != NULL);
  /* A field is whole or absent: no line ends inside one. */
  for (int w = 20; w <= 200; w++) {
    vl_progress_format(line, sizeof(line), w, &p);
    const char *whole[] = {
        "125s",         "45.0 req/s",  "ok 5600",   "err 12",          "dropped 3",
        "in flight 31", "p50 35.1ms",  "p99 812ms", "TTFT p50 12.3ms", "rss 20.5 GB",
        "gpu 812 MB",   "flushes 112", "sent 5643"};
    size_t covered = 0, kept = 0;
    for (size_t i = 0; i < VL_ARRAY_SIZE(whole); i++)
      if (strstr(line, whole[i])) {
        covered += strlen(whole[i]);
        kept++;
      }
    ASSERT_UINT_EQ(covered + 2 * (kept - 1), strlen(line));
  }
}

/* Figures not measured are left out, not shown as 0; the phase and a flush under way are shown. */
TEST_IMPL(progress_unmeasured_and_states) {
  vl_progress_t p = {.elapsed_s = 1,
                     .phase = "warmup",
                     .rate = 10,
                     .p50_ms = -1,
                     .p99_ms = -1,
                     .ttft_p50_ms = -1,
                     .rss_mb = -1,
                     .gpu_mb = -1};
  char line[512];
  vl_progress_format(line, sizeof(line), 200, &p);
  ASSERT_STR_EQ(line, "1s  [warmup]  10.0 req/s  ok 0  err 0  in flight 0  sent 0");
  p.phase = "flush";
  p.flushes_on = 1;
  p.flushing = 1;
  p.flushes = 4;
  vl_progress_format(line, sizeof(line), 200, &p);
  ASSERT_STR_EQ(line, "1s  10.0 req/s  ok 0  err 0  in flight 0  flushing (4 done)  sent 0");
}

/* The width is the terminal's own, read again at each call (a resize is followed). */
TEST_IMPL(progress_columns_of_a_terminal) {
  int master, slave;
  struct winsize ws = {.ws_row = 24, .ws_col = 57};
  ASSERT_INT_EQ(openpty(&master, &slave, NULL, NULL, &ws), 0);
  ASSERT_INT_EQ(vl_progress_columns(slave), 57);
  ws.ws_col = 132;
  ASSERT_INT_EQ(ioctl(master, TIOCSWINSZ, &ws), 0);
  ASSERT_INT_EQ(vl_progress_columns(slave), 132);
  close(master);
  close(slave);
  int fd = open("/dev/null", O_WRONLY);
  ASSERT_INT_EQ(vl_progress_columns(fd), 80);
  close(fd);
}

static const task_entry_t tests[] = {
    TEST_ENTRY(progress_wide_shows_every_field_labelled),
    TEST_ENTRY(progress_fits_by_dropping_least_important),
    TEST_ENTRY(progress_unmeasured_and_states),
    TEST_ENTRY(progress_columns_of_a_terminal),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}
