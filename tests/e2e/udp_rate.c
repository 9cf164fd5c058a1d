// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * udp_rate: a paced UDP sender with a socket priority of its choice (iperf3 has no SO_PRIORITY
 * option), and the receiver that measures what arrives, for the end-to-end tests.
 *
 *   udp_rate send --dst ADDR --port P --rate BITS_PER_S --seconds S [--size BYTES] [--priority N]
 *     offers datagrams of BYTES of payload (default 1472) at RATE bits/s of payload for S
 *     seconds, on its own clock (a late sender catches up), without ever waiting for its socket
 *     buffer (8 MiB: what a shaper holds within its horizon does not stop it); prints
 *     {"sent": N, "unsent": N (socket buffer full), "priority": N}.
 *   udp_rate recv --port P --window S [--timeout S]
 *     counts the payload that arrives within WINDOW seconds of the first datagram, by the
 *     kernel's receive times; prints {"datagrams": N, "bytes": N, "window_ns": N, "bps": N}.
 *     Exits 1 when nothing arrived within TIMEOUT seconds (default 30).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static int usage(void)
{
	fprintf(stderr, "usage: udp_rate send --dst ADDR --port P --rate BPS --seconds S [--size B] [--priority N]\n"
			"       udp_rate recv --port P --window S [--timeout S]\n");
	return 2;
}

static int do_send(const char *dst, int port, double rate, double seconds, int size, int priority)
{
	static char payload[65507];
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0 || inet_pton(AF_INET, dst, &to.sin_addr) != 1) {
		perror("udp_rate: socket or --dst");
		return 1;
	}
	/* Priorities above 6 need CAP_NET_ADMIN in the socket's network namespace. */
	if (priority >= 0 && setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &priority, sizeof priority)) {
		perror("udp_rate: SO_PRIORITY");
		return 1;
	}
	int sndbuf = 8 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
	const uint64_t gap = (uint64_t)((double)size * 8 * 1e9 / rate);
	const uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9);
	unsigned long long sent = 0, unsent = 0;

	for (uint64_t next = start; next < end && now_ns() < end; next += gap) {
		sleep_until(next);
		if (sendto(fd, payload, (size_t)size, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof to) == size)
			sent++;
		else
			unsent++;
	}
	printf("{\"sent\": %llu, \"unsent\": %llu, \"priority\": %d}\n", sent, unsent, priority);
	return 0;
}

/* When the kernel received a datagram (SO_TIMESTAMPNS, CLOCK_REALTIME), else when it is read. */
static uint64_t arrival_ns(struct msghdr *msg)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
			struct timespec ts;

			memcpy(&ts, CMSG_DATA(c), sizeof ts);
			return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		}
	}
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/*
 * Datagrams are counted by the kernel's receive time, not by when this process reads them: a
 * receiver scheduled late (a busy VM) neither loses the window's last datagrams nor counts a
 * queue it found at its first read. The window ends at the first datagram received after it,
 * or after a second without any.
 */
static int do_recv(int port, double window, double timeout)
{
	static char buf[65536];
	char control[256];
	struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	int rcvbuf = 4 << 20, on = 1;

	if (fd < 0 || bind(fd, (struct sockaddr *)&at, sizeof at)) {
		perror("udp_rate: bind");
		return 1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	uint64_t first = 0, end = 0;
	unsigned long long datagrams = 0, bytes = 0;

	for (;;) {
		if (poll(&pfd, 1, first ? 1000 : (int)(timeout * 1000)) != 1) {
			if (first)
				break;
			fprintf(stderr, "udp_rate: nothing arrived in %.0f s\n", timeout);
			return 1;
		}
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
				     .msg_controllen = sizeof control};
		ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);

		if (n < 0)
			continue;
		const uint64_t t = arrival_ns(&msg);

		if (!first) {
			first = t;
			end = first + (uint64_t)(window * 1e9);
		}
		if (t >= end)
			break;
		datagrams++;
		bytes += (unsigned long long)n;
	}
	printf("{\"datagrams\": %llu, \"bytes\": %llu, \"window_ns\": %llu, \"bps\": %.0f}\n", datagrams, bytes,
	       (unsigned long long)(end - first), (double)bytes * 8 / window);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dst = NULL;
	int port = 0, size = 1472, priority = -1;
	double rate = 0, seconds = 0, window = 0, timeout = 30;

	if (argc < 2)
		return usage();
	for (int i = 2; i + 1 < argc; i += 2) {
		const char *opt = argv[i], *val = argv[i + 1];

		if (!strcmp(opt, "--dst"))
			dst = val;
		else if (!strcmp(opt, "--port"))
			port = atoi(val);
		else if (!strcmp(opt, "--rate"))
			rate = atof(val);
		else if (!strcmp(opt, "--seconds"))
			seconds = atof(val);
		else if (!strcmp(opt, "--size"))
			size = atoi(val);
		else if (!strcmp(opt, "--priority"))
			priority = atoi(val);
		else if (!strcmp(opt, "--window"))
			window = atof(val);
		else if (!strcmp(opt, "--timeout"))
			timeout = atof(val);
		else
			return usage();
	}
	if (argc % 2 || port <= 0 || port > 65535)
		return usage();
	if (!strcmp(argv[1], "send") && dst && rate > 0 && seconds > 0 && size > 0 && size <= 65507)
		return do_send(dst, port, rate, seconds, size, priority);
	if (!strcmp(argv[1], "recv") && window > 0 && timeout > 0)
		return do_recv(port, window, timeout);
	return usage();
}
