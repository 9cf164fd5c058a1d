// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * udp_blast: sends a fixed number of UDP packets as fast as it can, round-robin over K
 * destination addresses (DST_NET + i: 10.201.(i/250).(i%250+1)), with sendmmsg from one
 * unconnected socket, pinned to one CPU. Prints one JSON object with the CPU it cost.
 *
 * Cost method (kernel without IRQ_TIME_ACCOUNTING, tick accounting): on a veth the whole
 * transmit path — qdisc or tc filter, veth_xmit, and the peer's receive softirq (netif_rx to
 * the local CPU's backlog, run at local_bh_enable) — executes in the sender's own context,
 * so the sender's getrusage (utime + stime, which sums sched runtime exactly) covers it; any
 * softirq deferred to ksoftirqd/<cpu> is added from its /proc/<pid>/schedstat runtime (ns).
 * The pinned CPU's /proc/stat busy ticks are reported as a cross-check (they include other
 * processes that ran on that CPU, at 1/USER_HZ resolution).
 *
 *   udp_blast --count N [--ndst K] [--size BYTES] [--batch B] [--cpu C] [--warmup N]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct cpu_ticks {
	unsigned long long user, nice, system, idle, iowait, irq, softirq, steal;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t rusage_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

static int read_cpu_ticks(int cpu, struct cpu_ticks *t)
{
	char name[32], line[512];
	FILE *f = fopen("/proc/stat", "r");
	int found = 0;

	if (!f)
		return -1;
	snprintf(name, sizeof name, "cpu%d ", cpu);
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, name, strlen(name)) == 0) {
			sscanf(line + strlen(name), "%llu %llu %llu %llu %llu %llu %llu %llu", &t->user,
			       &t->nice, &t->system, &t->idle, &t->iowait, &t->irq, &t->softirq, &t->steal);
			found = 1;
			break;
		}
	}
	fclose(f);
	return found ? 0 : -1;
}

static int ksoftirqd_pid(int cpu)
{
	char want[32], path[300], comm[64];
	DIR *d = opendir("/proc");
	struct dirent *e;
	int pid = -1;

	snprintf(want, sizeof want, "ksoftirqd/%d\n", cpu);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof comm, f) && strcmp(comm, want) == 0)
			pid = atoi(e->d_name);
		fclose(f);
		if (pid > 0)
			break;
	}
	if (d)
		closedir(d);
	return pid;
}

static uint64_t schedstat_ns(int pid)
{
	char path[64];
	unsigned long long run = 0;
	snprintf(path, sizeof path, "/proc/%d/schedstat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &run) != 1)
		run = 0;
	fclose(f);
	return run;
}

int main(int argc, char **argv)
{
	unsigned long long count = 1000000, warmup = 20000;
	unsigned ndst = 1000, size = 64, batch = 64;
	int cpu = -1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "udp_blast: %s needs a value\n", a);
			return 2;
		}
		if (!strcmp(a, "--count"))
			count = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--ndst"))
			ndst = strtoul(v, NULL, 0);
		else if (!strcmp(a, "--size"))
			size = strtoul(v, NULL, 0);
		else if (!strcmp(a, "--batch"))
			batch = strtoul(v, NULL, 0);
		else if (!strcmp(a, "--cpu"))
			cpu = atoi(v);
		else if (!strcmp(a, "--warmup"))
			warmup = strtoull(v, NULL, 0);
		else {
			fprintf(stderr, "udp_blast: unknown option %s\n", a);
			return 2;
		}
		i++;
	}
	if (!ndst || ndst > 250 * 256 || !batch || batch > 1024 || !size || size > 1472) {
		fprintf(stderr, "udp_blast: bad --ndst, --batch or --size\n");
		return 2;
	}
	if (cpu < 0)
		cpu = (int)sysconf(_SC_NPROCESSORS_ONLN) - 1;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set)) {
		perror("udp_blast: sched_setaffinity");
		return 1;
	}

	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("udp_blast: socket");
		return 1;
	}
	int sndbuf = 4 << 20;
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);

	struct sockaddr_in *dst = calloc(ndst, sizeof *dst);
	for (unsigned i = 0; i < ndst; i++) {
		dst[i].sin_family = AF_INET;
		dst[i].sin_port = htons(9);
		dst[i].sin_addr.s_addr = htonl((10u << 24) | (201u << 16) | ((i / 250) << 8) | (i % 250 + 1));
	}
	static char payload[1472];
	memset(payload, 0xab, sizeof payload);
	struct iovec iov = {.iov_base = payload, .iov_len = size};
	struct mmsghdr *msgs = calloc(batch, sizeof *msgs);
	for (unsigned j = 0; j < batch; j++) {
		msgs[j].msg_hdr.msg_iov = &iov;
		msgs[j].msg_hdr.msg_iovlen = 1;
		msgs[j].msg_hdr.msg_namelen = sizeof(struct sockaddr_in);
	}

	unsigned next = 0;
	unsigned long long errors = 0;
	int ksoft = ksoftirqd_pid(cpu);
	struct cpu_ticks t0 = {0}, t1 = {0};
	uint64_t r0 = 0, k0 = 0, w0 = 0;

	for (int phase = 0; phase < 2; phase++) {
		unsigned long long todo = phase ? count : warmup, sent = 0;
		if (phase) {
			read_cpu_ticks(cpu, &t0);
			k0 = ksoft > 0 ? schedstat_ns(ksoft) : 0;
			r0 = rusage_ns();
			w0 = now_ns();
		}
		while (sent < todo) {
			unsigned n = todo - sent < batch ? (unsigned)(todo - sent) : batch;
			for (unsigned j = 0; j < n; j++) {
				msgs[j].msg_hdr.msg_name = &dst[next];
				next = next + 1 == ndst ? 0 : next + 1;
			}
			int done = sendmmsg(fd, msgs, n, 0);
			if (done < 0) {
				if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR) {
					errors++;
					continue;
				}
				perror("udp_blast: sendmmsg");
				return 1;
			}
			sent += (unsigned)done;
		}
	}
	uint64_t w1 = now_ns(), r1 = rusage_ns();
	uint64_t k1 = ksoft > 0 ? schedstat_ns(ksoft) : 0;
	read_cpu_ticks(cpu, &t1);

	long hz = sysconf(_SC_CLK_TCK);
	unsigned long long busy = (t1.user - t0.user) + (t1.nice - t0.nice) + (t1.system - t0.system) +
				  (t1.irq - t0.irq) + (t1.softirq - t0.softirq);
	printf("{\"sent\": %llu, \"warmup\": %llu, \"send_errors\": %llu, \"cpu\": %d, \"size\": %u, \"ndst\": %u, "
	       "\"wall_ns\": %llu, \"rusage_ns\": %llu, \"ksoftirqd_ns\": %llu, "
	       "\"cpu_busy_ns\": %llu, \"cpu_softirq_ns\": %llu, \"user_hz\": %ld}\n",
	       count, warmup, errors, cpu, size, ndst, (unsigned long long)(w1 - w0),
	       (unsigned long long)(r1 - r0), (unsigned long long)(k1 - k0),
	       busy * 1000000000ull / (unsigned long long)hz,
	       (t1.softirq - t0.softirq) * 1000000000ull / (unsigned long long)hz, hz);
	return 0;
}
