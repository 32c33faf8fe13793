/* The server's own counters on the timeline. Before the run, when GET {url}/metrics of the
 * server answers a Prometheus page that holds some of its profile's counters and gauges
 * (vl_profile_metrics), a scrape of them is added to the monitor under the label "server": their
 * series are timeline columns prom.server.NAME, sampled with the memory, and each one's change
 * over the run and per phase goes to the summary. --no-server-metrics, or a --monitor-prom of the
 * server's own origin, leaves the monitor as it is.
 */
#ifndef VLMLOAD_COUNTERS_H
#define VLMLOAD_COUNTERS_H

#include "vlmload/config.h"

#include <stddef.h>

/* What the monitor's series of the server's counters are named from. */
#define VL_COUNTERS_PREFIX "prom.server."

/* The most counters a phase keeps the values of (vl_phase_result_t). */
#define VL_COUNTERS_MAX 24

/* Asks the server's /metrics (2 s at most) and, when it holds some of the profile's metrics, adds
 * their scrape to cfg->monitor. Returns how many metrics the page held (0: nothing added). */
int vl_counters_setup(vl_config_t *cfg);

/* Whether a monitor series is one of the server's counters. */
int vl_counters_is(const char *series);

struct vl_monitor_s;
/* The latest value of each of the server's counters in the monitor's order (NaN for one not read),
 * at most max of them, into v. Returns how many. */
int vl_counters_read(const struct vl_monitor_s *mon, double *v, int max);

#endif
