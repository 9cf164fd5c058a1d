// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * class_clock: what the datapath decided for one class, sampled as it runs, for the end-to-end
 * tests' judgements. Each sample is one line:
 *     MONO_NS TAT_NS CHARGED_BYTES DROPS TX_BYTES TX_PACKETS
 * the monotonic clock (the datapath's), the class clock (the departure its backlog reaches: the
 * class holds a backlog while TAT_NS > MONO_NS), the bytes the class charged and the packets it
 * dropped (every cause), summed over CPUs, and the device's transmitted bytes and packets.
 *
 *   class_clock --netns NS --dev DEV --class ID [--period-ms 5] --seconds S
 *
 * It reads the class's entry and counters through mappings of the pinned maps (no system call
 * per sample), so sampling every few ms costs the guest little; a gap between two samples much
 * longer than the period says the guest itself stalled. Started outside `ip netns exec` (whose
 * private /sys hides bpffs): it enters NS itself and reads the device from /proc/self/net/dev.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <net/if.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shaper_abi.h"

static void die(const char *what)
{
	fprintf(stderr, "class_clock: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int bpf_call(int cmd, union bpf_attr *attr)
{
	return (int)syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/* A pinned array map, mapped whole; its value stride and entries. */
struct mapped {
	const char *base;
	size_t stride;
	uint32_t entries;
};

static struct mapped map_pinned(const char *path)
{
	union bpf_attr attr;
	struct bpf_map_info info;
	struct mapped m;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.pathname = (uint64_t)(uintptr_t)path;
	fd = bpf_call(BPF_OBJ_GET, &attr);
	if (fd < 0)
		die(path);
	memset(&info, 0, sizeof(info));
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = fd;
	attr.info.info_len = sizeof(info);
	attr.info.info = (uint64_t)(uintptr_t)&info;
	if (bpf_call(BPF_OBJ_GET_INFO_BY_FD, &attr))
		die(path);
	m.stride = (info.value_size + 7) & ~7u;
	m.entries = info.max_entries;
	m.base = mmap(NULL, m.stride * m.entries, PROT_READ, MAP_SHARED, fd, 0);
	if (m.base == MAP_FAILED)
		die(path);
	close(fd);
	return m;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* DEV's transmitted bytes and packets, from /proc/self/net/dev (this thread's namespace). */
static int tx_counters(const char *dev, unsigned long long *bytes, unsigned long long *packets)
{
	char line[512], name[IFNAMSIZ + 2];
	unsigned long long v[16];
	FILE *f = fopen("/proc/self/net/dev", "r");
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (!colon || sscanf(line, " %17[^:]", name) != 1 || strcmp(name, dev))
			continue;
		found = sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
			       &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]) == 10;
		*bytes = v[8];
		*packets = v[9];
	}
	fclose(f);
	return found;
}

int main(int argc, char **argv)
{
	const char *netns = NULL, *dev = NULL;
	unsigned long class_id = 0, period_ms = 5;
	double seconds = 0;
	char path[256];
	struct stat ns;
	int i, fd;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--netns"))
			netns = argv[i + 1];
		else if (!strcmp(argv[i], "--dev"))
			dev = argv[i + 1];
		else if (!strcmp(argv[i], "--class"))
			class_id = strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--period-ms"))
			period_ms = strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else
			break;
	}
	if (i != argc || !netns || !dev || !class_id || !period_ms || seconds <= 0) {
		fprintf(stderr, "usage: class_clock --netns NS --dev DEV --class ID [--period-ms 5] --seconds S\n");
		return 2;
	}
	snprintf(path, sizeof(path), "/run/netns/%s", netns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &ns) || setns(fd, CLONE_NEWNET))
		die(path);
	close(fd);
	if (!if_nametoindex(dev))
		die(dev);
	snprintf(path, sizeof(path), "/sys/fs/bpf/shaperctl/ns%llu/if%u/shaper_classes",
		 (unsigned long long)ns.st_ino, if_nametoindex(dev));
	const struct mapped classes = map_pinned(path);
	strcpy(strrchr(path, '/'), "/shaper_class_stats");
	const struct mapped stats = map_pinned(path);
	if (class_id >= classes.entries || stats.entries % classes.entries) {
		fprintf(stderr, "class_clock: class %lu is beyond the maps (%u classes)\n", class_id,
			classes.entries);
		return 1;
	}
	const uint32_t cpus = stats.entries / classes.entries;
	const volatile struct shaper_class *cls =
		(const volatile struct shaper_class *)(classes.base + class_id * classes.stride);
	const struct timespec period = { period_ms / 1000, (long)(period_ms % 1000) * 1000000 };
	const uint64_t end = mono_ns() + (uint64_t)(seconds * 1e9);

	setvbuf(stdout, NULL, _IOLBF, 0);  /* a test reads the latest sample while this runs */

	for (;;) {
		unsigned long long tx_bytes = 0, tx_packets = 0, bytes = 0, drops = 0;
		const uint64_t now = mono_ns();
		const uint64_t tat = cls->tat_ns;

		for (uint32_t cpu = 0; cpu < cpus; cpu++) {
			const volatile struct shaper_class_stats *st =
				(const volatile struct shaper_class_stats *)(stats.base +
				((uint64_t)cpu * classes.entries + class_id) * stats.stride);

			bytes += st->bytes;
			drops += st->drops_horizon + st->drops_aqm + st->drops_fair;
		}
		if (!tx_counters(dev, &tx_bytes, &tx_packets))
			die(dev);
		printf("%llu %llu %llu %llu %llu %llu\n", (unsigned long long)now,
		       (unsigned long long)tat, bytes, drops, tx_bytes, tx_packets);
		if (now >= end)
			break;
		nanosleep(&period, NULL);
	}
	return fflush(stdout) ? 1 : 0;
}
