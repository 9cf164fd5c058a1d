// What one load out of every cache costs on this host: the floor under a cold class's packet.
// A random cyclic chase through a buffer, one cache line per hop, each load's address the value
// of the one before (so no two overlap), timed over millions of hops: ns per dependent load.
// Buffers from a few KiB (L1) to several times the last-level cache (DRAM), on 4 KiB pages and
// on transparent huge pages (madvise; the share the kernel really backed by huge pages is read
// back from /proc/self/smaps and printed, since THP may be unavailable or refused).
//
//   build/bench/miss_latency [--mib N] [--hops N]     # N MiB for the largest buffer (default 256)
//
// Prints one JSON object. A benchmark: no assertion. Pin it (taskset) and keep the host quiet.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define LINE 64

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

// KiB of the mapping at `addr` the kernel backs by huge pages (AnonHugePages in smaps).
static long huge_kib(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[256];
	int in = 0;
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') == line + strspn(line, "0123456789abcdef"))
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
		else if (in && sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
			break;
	}
	fclose(f);
	return kib;
}

// ns per dependent load through `bytes` of a buffer, on huge pages if asked.
static double chase(size_t bytes, int huge, long hops, long *huge_out)
{
	const size_t lines = bytes / LINE;
	char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t *order = malloc(lines * sizeof *order);

	if (buf == MAP_FAILED || !order) {
		fprintf(stderr, "miss_latency: cannot map %zu bytes\n", bytes);
		exit(1);
	}
	madvise(buf, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	memset(buf, 0, bytes);
	for (size_t i = 0; i < lines; i++)
		order[i] = i;
	for (size_t i = lines - 1; i > 0; i--) {
		const size_t j = next_random() % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (size_t i = 0; i < lines; i++)
		*(char **)(buf + order[i] * LINE) = buf + order[(i + 1) % lines] * LINE;
	*huge_out = huge_kib(buf);

	char *p = buf + order[0] * LINE;

	for (size_t i = 0; i < lines && i < (size_t)hops; i++) // one lap to warm what fits
		p = *(char **)p;
	const double t0 = now_ns();

	for (long i = 0; i < hops; i++)
		p = *(char **)p;
	const double ns = (now_ns() - t0) / hops;

	if (p == NULL)
		puts(""); // keeps the chase
	munmap(buf, bytes);
	free(order);
	return ns;
}

int main(int argc, char **argv)
{
	long mib = 256, hops = 4000000;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mib") && i + 1 < argc)
			mib = atol(argv[++i]);
		else if (!strcmp(argv[i], "--hops") && i + 1 < argc)
			hops = atol(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--mib N] [--hops N]\n", argv[0]);
			return 2;
		}
	}
	if (mib < 1 || hops < 1000) {
		fprintf(stderr, "miss_latency: --mib wants at least 1, --hops at least 1000\n");
		return 2;
	}
	const size_t sizes[] = {16 << 10, 256 << 10, 4 << 20, 16 << 20, (size_t)mib << 20};

	printf("{\"rows\": [");
	for (int huge = 0; huge <= 1; huge++) {
		for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
			long backed = 0;
			const double ns = chase(sizes[k], huge, hops, &backed);

			printf("%s\n  {\"kib\": %zu, \"pages\": \"%s\", \"huge_backed_kib\": %ld, \"ns_per_load\": %.1f}",
			       huge || k ? "," : "", sizes[k] >> 10, huge ? "thp" : "4k", backed, ns);
		}
	}
	printf("\n]}\n");
	return 0;
}
