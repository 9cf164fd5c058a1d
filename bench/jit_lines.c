// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * jit_lines: where a loaded BPF program's time goes, by source line, without perf annotate or
 * bpftool's JIT dump (both need libbfd, which this host's builds lack).
 *
 *     jit_lines NAME < samples     # samples: "count offset" lines, offset in hex from the
 *                                  # program's symbol (perf script's sym+0x... of NAME)
 *
 * Reads the JIT's line table of the first loaded program called NAME (bpf_prog_info:
 * jited_line_info, line_info and the program's BTF, whose strings hold each source line), maps
 * every offset of the main function to the line it was compiled from and prints each line's share
 * of the samples, largest first. bench/README.md ("Where the time went") has the perf commands.
 */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct line_total {
	const char *text;
	unsigned long samples;
};

static int by_samples(const void *a, const void *b)
{
	const struct line_total *x = a, *y = b;

	return x->samples < y->samples ? 1 : x->samples > y->samples ? -1 : 0;
}

static int find_prog(const char *name, struct bpf_prog_info *info)
{
	__u32 id = 0;

	while (!bpf_prog_get_next_id(id, &id)) {
		int fd = bpf_prog_get_fd_by_id(id);
		__u32 len = sizeof(*info);

		if (fd < 0)
			continue;
		memset(info, 0, sizeof(*info));
		if (!bpf_obj_get_info_by_fd(fd, info, &len) && !strcmp(info->name, name))
			return fd;
		close(fd);
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct bpf_prog_info info;
	int fd = argc == 2 ? find_prog(argv[1], &info) : -1;

	if (argc != 2) {
		fprintf(stderr, "usage: jit_lines PROG_NAME < \"count hex-offset\" lines\n");
		return 2;
	}
	if (fd < 0) {
		fprintf(stderr, "jit_lines: no loaded BPF program named %s\n", argv[1]);
		return 1;
	}
	const __u32 n = info.nr_jited_line_info, funcs = info.nr_jited_ksyms;
	__u64 *addr = calloc(n, sizeof(*addr)), *ksyms = calloc(funcs, sizeof(*ksyms));
	__u32 *func_len = calloc(funcs, sizeof(*func_len));
	struct bpf_line_info *lines = calloc(n, sizeof(*lines));
	struct bpf_prog_info want = {
		.nr_jited_line_info = n,
		.jited_line_info_rec_size = sizeof(__u64),
		.jited_line_info = (__u64)(unsigned long)addr,
		.nr_line_info = n,
		.line_info_rec_size = sizeof(*lines),
		.line_info = (__u64)(unsigned long)lines,
		.nr_jited_ksyms = funcs,
		.jited_ksyms = (__u64)(unsigned long)ksyms,
		.nr_jited_func_lens = funcs,
		.jited_func_lens = (__u64)(unsigned long)func_len,
	};
	__u32 len = sizeof(want);
	struct btf *btf = NULL;

	if (!n || !funcs || bpf_obj_get_info_by_fd(fd, &want, &len) ||
	    !(btf = btf__load_from_kernel_by_id(info.btf_id))) {
		fprintf(stderr, "jit_lines: %s has no JIT line info (needs BTF, and root)\n", argv[1]);
		return 1;
	}
	struct line_total *total = calloc(n, sizeof(*total));
	unsigned long count, offset, all = 0;

	for (__u32 i = 0; i < n; i++)
		total[i].text = btf__name_by_offset(btf, lines[i].line_off);
	while (scanf("%lu %lx", &count, &offset) == 2) {
		const __u64 at = ksyms[0] + offset;
		__u32 best = 0;

		if (offset >= func_len[0])
			continue; /* a subprogram: its samples carry its own symbol */
		for (__u32 i = 0; i < n && addr[i] <= at; i++)
			if (addr[i] >= ksyms[0] && addr[i] < ksyms[0] + func_len[0])
				best = i;
		total[best].samples += count;
		all += count;
	}
	for (__u32 i = 0; i < n; i++) /* one source line may stand at several places */
		for (__u32 j = 0; j < i; j++)
			if (total[j].text == total[i].text) {
				total[j].samples += total[i].samples;
				total[i].samples = 0;
				break;
			}
	qsort(total, n, sizeof(*total), by_samples);
	for (__u32 i = 0; i < n && total[i].samples; i++) {
		const char *t = total[i].text ? total[i].text : "?";

		while (*t == ' ' || *t == '\t')
			t++;
		printf("%5.1f%%  %s\n", 100.0 * total[i].samples / (all ? all : 1), t);
	}
	return 0;
}
