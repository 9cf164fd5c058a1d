// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * tc_class_clock: the byte and packet counters of tc classes (HTB's), sampled as they run, for
 * bench/borrow.sh; class_clock's counterpart for a qdisc tree. Each sample is one line:
 *     MONO_NS BYTES PACKETS [BYTES PACKETS]...
 * the monotonic clock (the middle of the dump) and each HANDLE's counters in the order given.
 * A qdisc counts a packet as it dequeues it (HTB's leaves and inner classes alike), a GSO
 * packet as its segments.
 *
 *   tc_class_clock --netns NS --dev DEV [--period-ms 10] --seconds S HANDLE...
 *
 * One rtnetlink dump per sample, with no process started per sample: `tc -s class show` costs
 * a fork and exec, over 100 ms each in a TCG guest on a busy host.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/gen_stats.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_HANDLES 16

static void die(const char *what)
{
	fprintf(stderr, "tc_class_clock: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "1:21" as tc reads it: hexadecimal major and minor. */
static int parse_handle(const char *s, uint32_t *out)
{
	char *end;
	unsigned long maj = strtoul(s, &end, 16), min;

	if (*end != ':' || maj > 0xffff)
		return -1;
	min = strtoul(end + 1, &end, 16);
	if (*end || min > 0xffff)
		return -1;
	*out = (uint32_t)(maj << 16 | min);
	return 0;
}

/* The basic counters in a class's attributes: TCA_STATS2's TCA_STATS_BASIC, else TCA_STATS. */
static int class_counters(struct rtattr *rta, int len, uint64_t *bytes, uint64_t *packets)
{
	int found = 0;

	for (; RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
		if (rta->rta_type == TCA_STATS2) {
			struct rtattr *n = RTA_DATA(rta);
			int nlen = RTA_PAYLOAD(rta);

			for (; RTA_OK(n, nlen); n = RTA_NEXT(n, nlen)) {
				struct gnet_stats_basic b;

				if (n->rta_type != TCA_STATS_BASIC || RTA_PAYLOAD(n) < sizeof(b))
					continue;
				memcpy(&b, RTA_DATA(n), sizeof(b));
				*bytes = b.bytes;
				*packets = b.packets;
				return 1;
			}
		} else if (rta->rta_type == TCA_STATS && RTA_PAYLOAD(rta) >= sizeof(struct tc_stats)) {
			struct tc_stats st;

			memcpy(&st, RTA_DATA(rta), sizeof(st));
			*bytes = st.bytes;
			*packets = st.packets;
			found = 1;
		}
	}
	return found;
}

int main(int argc, char **argv)
{
	const char *netns = NULL, *dev = NULL;
	unsigned long period_ms = 10;
	double seconds = 0;
	uint32_t handles[MAX_HANDLES];
	int nhandles = 0, i, fd;
	char path[256];

	for (i = 1; i < argc; i++) {
		if (i + 1 < argc && !strcmp(argv[i], "--netns"))
			netns = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--dev"))
			dev = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--period-ms"))
			period_ms = strtoul(argv[++i], NULL, 10);
		else if (i + 1 < argc && !strcmp(argv[i], "--seconds"))
			seconds = atof(argv[++i]);
		else if (nhandles < MAX_HANDLES && !parse_handle(argv[i], &handles[nhandles]))
			nhandles++;
		else
			break;
	}
	if (i != argc || !netns || !dev || !period_ms || seconds <= 0 || !nhandles) {
		fprintf(stderr, "usage: tc_class_clock --netns NS --dev DEV [--period-ms 10] --seconds S HANDLE...\n");
		return 2;
	}
	snprintf(path, sizeof(path), "/run/netns/%s", netns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET))
		die(path);
	close(fd);
	const unsigned ifindex = if_nametoindex(dev);
	if (!ifindex)
		die(dev);
	const int sk = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (sk < 0)
		die("netlink socket");

	const struct timespec period = { period_ms / 1000, (long)(period_ms % 1000) * 1000000 };
	const uint64_t end = mono_ns() + (uint64_t)(seconds * 1e9);
	static char buf[65536];
	uint32_t seq = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		struct {
			struct nlmsghdr n;
			struct tcmsg t;
		} req;
		uint64_t bytes[MAX_HANDLES] = {0}, packets[MAX_HANDLES] = {0};
		int done = 0;

		memset(&req, 0, sizeof(req));
		req.n.nlmsg_len = NLMSG_LENGTH(sizeof(struct tcmsg));
		req.n.nlmsg_type = RTM_GETTCLASS;
		req.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
		req.n.nlmsg_seq = ++seq;
		req.t.tcm_family = AF_UNSPEC;
		req.t.tcm_ifindex = (int)ifindex;
		const uint64_t t0 = mono_ns();
		if (send(sk, &req, req.n.nlmsg_len, 0) < 0)
			die("RTM_GETTCLASS");
		while (!done) {
			int len = (int)recv(sk, buf, sizeof(buf), 0);

			if (len < 0) {
				if (errno == EINTR)
					continue;
				die("recv");
			}
			for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned)len);
			     h = NLMSG_NEXT(h, len)) {
				if (h->nlmsg_seq != seq)
					continue;
				if (h->nlmsg_type == NLMSG_DONE) {
					done = 1;
					break;
				}
				if (h->nlmsg_type == NLMSG_ERROR) {
					errno = -((struct nlmsgerr *)NLMSG_DATA(h))->error;
					die("class dump");
				}
				if (h->nlmsg_type != RTM_NEWTCLASS)
					continue;
				struct tcmsg *tcm = NLMSG_DATA(h);
				uint64_t b, p;

				for (i = 0; i < nhandles; i++) {
					if (tcm->tcm_handle != handles[i])
						continue;
					if (class_counters((struct rtattr *)((char *)tcm + NLMSG_ALIGN(sizeof(*tcm))),
							   (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*tcm))), &b, &p)) {
						bytes[i] = b;
						packets[i] = p;
					}
				}
			}
		}
		const uint64_t t1 = mono_ns();

		printf("%llu", (unsigned long long)(t0 + (t1 - t0) / 2));
		for (i = 0; i < nhandles; i++)
			printf(" %llu %llu", (unsigned long long)bytes[i], (unsigned long long)packets[i]);
		printf("\n");
		if (t1 >= end)
			break;
		nanosleep(&period, NULL);
	}
	return fflush(stdout) ? 1 : 0;
}
