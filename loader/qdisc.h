// The root qdisc of a device, read and replaced over rtnetlink (never through `tc`).
//
// The shaper's BPF program only stamps departure times (skb->tstamp); sch_fq is what holds
// packets until then, so every TX queue of the device must end in fq.
//
// Every call works in the network namespace of the calling thread at the time of the call
// (callers may setns() first), opens its own NETLINK_ROUTE socket and throws shaperctl::Error
// with a one-line message on failure.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/fq_options.h"

namespace shaperctl {

// One qdisc as the kernel reports it.
struct Qdisc {
    std::string kind;              // "fq", "mq", "pfifo_fast", "noqueue", "htb", ...
    uint32_t handle = 0;           // 0 for the kernel's default qdiscs
    uint32_t parent = 0;           // TC_H_ROOT for the root
    std::vector<uint8_t> options;  // payload of TCA_OPTIONS, enough to re-create it
};

// The qdiscs of the device (not the hidden default children of e.g. tbf).
std::vector<Qdisc> list_qdiscs(int ifindex);

// The root (egress) qdisc; nullopt when the kernel shows none, which is the case of a device
// that is down and was never given one (its built-in "noop" is not dumped).
std::optional<Qdisc> root_qdisc(int ifindex);

// IFLA_NUM_TX_QUEUES: how many TX queues the device has (and mq has classes).
unsigned tx_queue_count(int ifindex);

// Makes the device pace by departure time: a root fq on single-queue devices, else an mq root
// with one fq per TX queue. Installing again updates the options in place. Throws, leaving the
// prior root in place, when sch_fq cannot be created (the kernel lacks it) or anything else
// fails half-way.
void install_fq(int ifindex, const FqOptions& options);

// Puts back the root that root_qdisc() returned before install_fq(). A default (handle 0) or
// absent prior: deletes the current root so the kernel re-attaches its default. An explicit
// one: re-created with its kind, handle and options (nothing done if it is still there).
void restore_root(int ifindex, const std::optional<Qdisc>& prior);

// Whether departure times are enforced on every TX queue, for status and doctor.
struct PacingSetup {
    bool fq_everywhere = false;  // root fq, or mq with fq on all `queues` classes
    unsigned queues = 0;         // tx_queue_count()
    unsigned fq_queues = 0;      // TX queues whose qdisc is fq
    std::string root_kind;       // "" when the kernel shows no root
    uint64_t fq_horizon_ns = 0;  // the lowest horizon of those fq qdiscs (0: no fq)
};
PacingSetup inspect_pacing(int ifindex);

namespace detail {
// install_fq() with another leaf qdisc kind (options: TCA_OPTIONS payload). Tests use it to
// exercise the mq set-up on kernels without sch_fq.
void install_leaves(int ifindex, std::string_view kind, std::span<const uint8_t> options);
}  // namespace detail

}  // namespace shaperctl
