// loader/qdisc: the root qdisc over rtnetlink, checked against iproute2 in throw-away network
// namespaces. Needs root. Tests that need sch_fq (or its absence) skip themselves on kernels
// that have it (or lack it), so the same binary serves this host and the stock-kernel VM.
#include "core/error.h"
#include "loader/qdisc.h"
#include "netns.h"

#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

namespace shaperctl {
namespace {

std::string show(const Qdisc& q)
{
    char head[64];
    std::snprintf(head, sizeof head, "%s %x:%x parent %x:%x options", q.kind.c_str(),
                  TC_H_MAJ(q.handle) >> 16, TC_H_MIN(q.handle), TC_H_MAJ(q.parent) >> 16,
                  TC_H_MIN(q.parent));
    std::string text = head;
    for (uint8_t byte : q.options) {
        char hex[4];
        std::snprintf(hex, sizeof hex, " %02x", byte);
        text += hex;
    }
    return text;
}

// Every qdisc of the device, comparable as a whole and readable in a failure.
std::set<std::string> snapshot(int ifindex)
{
    std::set<std::string> all;
    for (const Qdisc& q : list_qdiscs(ifindex))
        all.insert(show(q));
    return all;
}

std::string root_text(int ifindex)
{
    std::optional<Qdisc> root = root_qdisc(ifindex);
    return root ? show(*root) : "(none)";
}

// Whether this kernel can create sch_fq, asked of iproute2 on a scratch veth.
bool kernel_has_fq(const test::NetNs& ns)
{
    static std::optional<bool> has;
    if (!has) {
        ns.add_veth("probe0", "probe1");
        has = test::run(test::tc_tool() + " -n " + ns.name() + " qdisc add dev probe0 root fq")
                  .status == 0;
        ns.ip("link del probe0");
    }
    return *has;
}

// The device's fq qdiscs, in the order of the queues they serve.
std::vector<Qdisc> fq_qdiscs(int ifindex)
{
    std::vector<Qdisc> fqs;
    for (const Qdisc& q : list_qdiscs(ifindex))
        if (q.kind == "fq")
            fqs.push_back(q);
    std::ranges::sort(fqs, {}, &Qdisc::parent);
    return fqs;
}

// A u32 attribute of a qdisc's options; nullopt if absent.
std::optional<uint32_t> u32_option(const Qdisc& q, uint16_t type)
{
    size_t offset = 0;
    while (offset + sizeof(nlattr) <= q.options.size()) {
        nlattr attr;
        std::memcpy(&attr, q.options.data() + offset, sizeof attr);
        if (attr.nla_len < sizeof attr || offset + attr.nla_len > q.options.size())
            break;
        if ((attr.nla_type & NLA_TYPE_MASK) == type &&
            attr.nla_len == sizeof attr + sizeof(uint32_t)) {
            uint32_t value;
            std::memcpy(&value, q.options.data() + offset + sizeof attr, sizeof value);
            return value;
        }
        offset += NLA_ALIGN(attr.nla_len);
    }
    return std::nullopt;
}

std::vector<uint8_t> pfifo_options(uint32_t limit)
{
    const tc_fifo_qopt opt{.limit = limit};
    auto* bytes = reinterpret_cast<const uint8_t*>(&opt);
    return {bytes, bytes + sizeof opt};
}

class QdiscTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (geteuid() != 0)
            GTEST_SKIP() << "needs root to create network namespaces";
        ns.emplace();
        ns->disable_ipv6();  // quiet devices: qdisc counters stay put between snapshots
    }

    // A veth end with `tx_queues` queues, up, with its kernel-default root.
    int veth(unsigned tx_queues = 1)
    {
        ns->add_veth("vA", "vB", tx_queues);
        return ns->ifindex("vA");
    }

    std::optional<test::NetNs> ns;
};

TEST(NetNsTest, EntersThenLeavesAndDeletesTheNamespace)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root";
    struct stat before{}, inside{}, after{};
    ASSERT_EQ(stat("/proc/thread-self/ns/net", &before), 0);
    std::string name;
    {
        test::NetNs ns;
        name = ns.name();
        ASSERT_EQ(stat("/proc/thread-self/ns/net", &inside), 0);
        EXPECT_NE(inside.st_ino, before.st_ino);
        EXPECT_TRUE(std::filesystem::exists("/run/netns/" + name));
    }
    ASSERT_EQ(stat("/proc/thread-self/ns/net", &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_FALSE(std::filesystem::exists("/run/netns/" + name));
}

TEST_F(QdiscTest, FreshVethHasNoqueueRootWithHandleZero)
{
    const int vA = veth();
    const std::vector<Qdisc> all = list_qdiscs(vA);
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].kind, "noqueue");
    EXPECT_EQ(all[0].handle, 0u);
    EXPECT_EQ(all[0].parent, TC_H_ROOT);

    const std::optional<Qdisc> root = root_qdisc(vA);
    ASSERT_TRUE(root);
    EXPECT_EQ(show(*root), show(all[0]));
    EXPECT_NE(ns->tc("qdisc show dev vA").find("noqueue 0: root"), std::string::npos);
}

TEST_F(QdiscTest, DeviceNeverBroughtUpShowsNoRoot)
{
    ns->add_veth("vA", "vB", 1, /*up=*/false);
    const int vA = ns->ifindex("vA");
    EXPECT_TRUE(list_qdiscs(vA).empty());
    EXPECT_FALSE(root_qdisc(vA));
    EXPECT_EQ(inspect_pacing(vA).root_kind, "");
}

TEST_F(QdiscTest, ListKeepsToTheDeviceAndRootIgnoresClsact)
{
    const int vA = veth();
    ns->tc("qdisc add dev vA clsact");
    ns->tc("qdisc add dev vA root handle 1: htb default 10");
    ns->tc("qdisc add dev vB root handle 2: tbf rate 1mbit burst 10kb latency 10ms");

    std::set<std::string> kinds;
    for (const Qdisc& q : list_qdiscs(vA))
        kinds.insert(q.kind);
    EXPECT_EQ(kinds, (std::set<std::string>{"clsact", "htb"}));

    const std::optional<Qdisc> root = root_qdisc(vA);
    ASSERT_TRUE(root);
    EXPECT_EQ(root->kind, "htb");
    EXPECT_EQ(root->handle, 0x10000u);
    EXPECT_FALSE(root->options.empty());  // TCA_HTB_INIT at least
}

TEST_F(QdiscTest, TxQueueCountIsWhatTheDeviceWasCreatedWith)
{
    ns->add_veth("one0", "one1", 1);
    ns->add_veth("four0", "four1", 4);
    EXPECT_EQ(tx_queue_count(ns->ifindex("one0")), 1u);
    EXPECT_EQ(tx_queue_count(ns->ifindex("four0")), 4u);
}

TEST_F(QdiscTest, UnknownIfindexIsAnErrorNamingIt)
{
    try {
        list_qdiscs(987654);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "ifindex 987654: no such device in this network namespace");
    }
    EXPECT_THROW(tx_queue_count(987654), Error);
    EXPECT_THROW(install_fq(987654, {}), Error);
}

TEST_F(QdiscTest, InstallFqWithoutSchFqFailsAndLeavesSingleQueueRootAlone)
{
    const int vA = veth(1);
    if (kernel_has_fq(*ns))
        GTEST_SKIP() << "this kernel has sch_fq";
    ns->tc("qdisc add dev vA root handle 1: htb default 10");
    const std::optional<Qdisc> prior = root_qdisc(vA);
    ASSERT_TRUE(prior);
    const std::set<std::string> before = snapshot(vA);

    try {
        install_fq(vA, {});
        FAIL() << "install_fq succeeded without sch_fq";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_EQ(
            message,
            "dev vA: cannot create sch_fq: the kernel has no sch_fq (No such file or directory); "
            "departure times would not be enforced");
    }
    EXPECT_EQ(root_text(vA), show(*prior));
    EXPECT_EQ(snapshot(vA), before);
}

TEST_F(QdiscTest, InstallFqWithoutSchFqRollsBackTheMqItStartedOnMultiQueueDevice)
{
    const int vA = veth(4);
    if (kernel_has_fq(*ns))
        GTEST_SKIP() << "this kernel has sch_fq";
    ns->tc("qdisc add dev vA root handle 1: tbf rate 10mbit burst 32kb latency 50ms");
    const std::optional<Qdisc> prior = root_qdisc(vA);
    ASSERT_TRUE(prior);
    ASSERT_EQ(prior->kind, "tbf");
    const std::set<std::string> before = snapshot(vA);

    try {
        install_fq(vA, {});
        FAIL() << "install_fq succeeded without sch_fq";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_EQ(message.find('\n'), std::string::npos);
        EXPECT_NE(message.find(
                      "dev vA: cannot create sch_fq on TX queue 1 of 4: the kernel has no sch_fq"),
                  std::string::npos)
            << message;
        EXPECT_EQ(message.find("restoring"), std::string::npos) << message;
    }
    EXPECT_EQ(root_text(vA), show(*prior));
    EXPECT_EQ(snapshot(vA), before);
    EXPECT_NE(ns->tc("qdisc show dev vA").find("qdisc tbf 1: root"), std::string::npos);
}

TEST_F(QdiscTest, InstallFqWithoutSchFqGivesBackTheKernelDefaultRoots)
{
    const int vA = veth(4);  // noqueue: veth has IFF_NO_QUEUE
    ns->ip("link add ifb0 numtxqueues 4 numrxqueues 4 type ifb");
    ns->ip("link set ifb0 up");  // mq 0: with a pfifo_fast per queue
    const int ifb0 = ns->ifindex("ifb0");
    if (kernel_has_fq(*ns))
        GTEST_SKIP() << "this kernel has sch_fq";

    for (int dev : {vA, ifb0}) {
        const std::set<std::string> before = snapshot(dev);
        EXPECT_THROW(install_fq(dev, {}), Error);
        EXPECT_EQ(snapshot(dev), before);
    }
    EXPECT_EQ(root_qdisc(vA)->kind, "noqueue");
    EXPECT_EQ(root_qdisc(ifb0)->kind, "mq");
    EXPECT_EQ(root_qdisc(ifb0)->handle, 0u);
}

TEST_F(QdiscTest, LeafFailingHalfWayPutsThePriorRootBackOnAnyKernel)
{
    // A kind no kernel has fails where fq fails on kernels without it: after the mq is in.
    const int vA = veth(4);
    ns->tc("qdisc add dev vA root handle 1: tbf rate 10mbit burst 32kb latency 50ms");
    const std::set<std::string> before = snapshot(vA);
    try {
        detail::install_leaves(vA, "no_such_qdisc", {});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "dev vA: cannot create sch_no_such_qdisc on TX queue 1 of 4: "
                               "the kernel has no sch_no_such_qdisc (No such file or directory)");
    }
    EXPECT_EQ(snapshot(vA), before);
}

TEST_F(QdiscTest, InstallFqRefusesHorizonOutOfRangeBeforeTouchingTheDevice)
{
    const int vA = veth();
    const std::set<std::string> before = snapshot(vA);
    EXPECT_THROW(install_fq(vA, {.horizon_ns = 999}), Error);
    EXPECT_THROW(install_fq(vA, {.horizon_ns = 5'000'000'000'000}), Error);
    EXPECT_EQ(snapshot(vA), before);
}

TEST_F(QdiscTest, InstallFqPacesEveryQueueAndRestoreUndoesIt)
{
    const int single = veth(1);
    ns->add_veth("mq0", "mq1", 4);
    const int multi = ns->ifindex("mq0");
    ns->add_veth("tbf0", "tbf1", 4);
    ns->tc("qdisc add dev tbf0 root handle 1: tbf rate 10mbit burst 32kb latency 50ms");
    const int explicit_prior = ns->ifindex("tbf0");
    if (!kernel_has_fq(*ns))
        GTEST_SKIP() << "this kernel has no sch_fq";

    for (int dev : {single, multi, explicit_prior}) {
        SCOPED_TRACE(dev);
        const std::optional<Qdisc> prior = root_qdisc(dev);
        const std::set<std::string> before = snapshot(dev);

        install_fq(dev, {.horizon_ns = 2'000'000'000,
                         .horizon_drop = false,
                         .flow_limit = 1000,
                         .limit = 20000});
        std::vector<Qdisc> fqs = fq_qdiscs(dev);
        ASSERT_EQ(fqs.size(), dev == single ? 1u : 4u);
        EXPECT_EQ(u32_option(fqs[0], TCA_FQ_HORIZON), 2'000'000u);
        EXPECT_EQ(u32_option(fqs[0], TCA_FQ_FLOW_PLIMIT), 1000u);
        EXPECT_EQ(u32_option(fqs[0], TCA_FQ_PLIMIT), 20000u);

        install_fq(dev, {});  // again: the same qdiscs, back to the defaults
        std::vector<Qdisc> again = fq_qdiscs(dev);
        ASSERT_EQ(again.size(), fqs.size());
        for (size_t i = 0; i < fqs.size(); ++i) {
            EXPECT_EQ(again[i].handle, fqs[i].handle);
            EXPECT_EQ(u32_option(again[i], TCA_FQ_HORIZON), 10'000'000u);
            EXPECT_EQ(u32_option(again[i], TCA_FQ_FLOW_PLIMIT), FqOptions{}.flow_limit);
            EXPECT_EQ(u32_option(again[i], TCA_FQ_PLIMIT), FqOptions{}.limit);
        }

        const PacingSetup setup = inspect_pacing(dev);
        EXPECT_TRUE(setup.fq_everywhere);
        EXPECT_EQ(setup.fq_queues, setup.queues);
        EXPECT_EQ(setup.root_kind, dev == single ? "fq" : "mq");

        restore_root(dev, prior);
        EXPECT_EQ(snapshot(dev), before);
        EXPECT_FALSE(inspect_pacing(dev).fq_everywhere);
    }
}

TEST_F(QdiscTest, MqSetUpPutsTheLeafOnEveryTxQueueAndRestoreRemovesIt)
{
    // pfifo stands in for fq, which this host's kernel lacks: same netlink path.
    const int vA = veth(4);
    const std::optional<Qdisc> prior = root_qdisc(vA);
    const std::set<std::string> before = snapshot(vA);

    detail::install_leaves(vA, "pfifo", pfifo_options(100));
    const std::optional<Qdisc> root = root_qdisc(vA);
    ASSERT_TRUE(root);
    EXPECT_EQ(root->kind, "mq");
    EXPECT_NE(root->handle, 0u);
    std::set<uint32_t> queues;
    for (const Qdisc& q : list_qdiscs(vA))
        if (q.kind == "pfifo" && TC_H_MAJ(q.parent) == root->handle) {
            queues.insert(TC_H_MIN(q.parent));
            EXPECT_EQ(q.options, pfifo_options(100));
        }
    EXPECT_EQ(queues, (std::set<uint32_t>{1, 2, 3, 4}));

    const PacingSetup setup = inspect_pacing(vA);
    EXPECT_FALSE(setup.fq_everywhere);
    EXPECT_EQ(setup.queues, 4u);
    EXPECT_EQ(setup.fq_queues, 0u);
    EXPECT_EQ(setup.root_kind, "mq");

    restore_root(vA, prior);
    EXPECT_EQ(snapshot(vA), before);
}

TEST_F(QdiscTest, InstallingAgainChangesTheLeavesInPlace)
{
    const int vA = veth(4);
    ns->ip("link add ifb0 type ifb");  // single queue, pfifo_fast by default
    ns->ip("link set ifb0 up");
    const int ifb0 = ns->ifindex("ifb0");

    for (int dev : {vA, ifb0}) {
        detail::install_leaves(dev, "pfifo", pfifo_options(100));
        std::set<uint32_t> handles;
        for (const Qdisc& q : list_qdiscs(dev))
            if (q.kind == "pfifo")
                handles.insert(q.handle);

        detail::install_leaves(dev, "pfifo", pfifo_options(200));
        std::set<uint32_t> handles_again;
        for (const Qdisc& q : list_qdiscs(dev))
            if (q.kind == "pfifo") {
                handles_again.insert(q.handle);
                EXPECT_EQ(q.options, pfifo_options(200));
            }
        EXPECT_EQ(handles_again, handles);
        EXPECT_EQ(handles.size(), dev == vA ? 4u : 1u);
    }
}

TEST_F(QdiscTest, RestoreRootRecreatesAnExplicitPriorExactly)
{
    // Kinds this kernel lacks are passed over; the stock-kernel VM has them all.
    const int vA = veth(1);
    unsigned tried = 0;
    // sfq and fq_codel dump values that creating them again rounds or clamps once more
    // (flows clamped to limit; codel times lose a microsecond in the us -> ns/1024 -> us trip):
    // only their kind and handle come back exactly.
    const std::pair<std::string, bool> specs[] = {
        {"handle 1: htb default 10 r2q 5", true},
        {"handle 2: tbf rate 10mbit burst 32kb latency 50ms", true},
        {"handle 3: tbf rate 10gbit burst 1mb limit 2mb peakrate 20gbit mtu 9000", true},
        {"handle 4: pfifo limit 50", true},
        {"handle 5: bfifo limit 100000", true},
        {"handle 6: pfifo_head_drop limit 20", true},
        {"handle 7: prio bands 4 priomap 0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3", true},
        {"handle 8: sfq perturb 10 quantum 3000", false},
        {"handle 9: fq_codel target 10ms interval 200ms ecn", false},
        {"handle a: fq flow_limit 50 horizon 3s horizon_cap", true},
        {"handle b: netem delay 10ms 2ms loss 1%", true},
    };
    for (const auto& [spec, exact] : specs) {
        SCOPED_TRACE(spec);
        const test::CommandResult created =
            test::run(test::tc_tool() + " -n " + ns->name() + " qdisc add dev vA root " + spec);
        if (created.output.find("qdisc kind is unknown") != std::string::npos)
            continue;
        ASSERT_EQ(created.status, 0) << created.output;
        ++tried;
        const std::optional<Qdisc> prior = root_qdisc(vA);
        ASSERT_TRUE(prior);
        const std::string tc_before = ns->tc("qdisc show dev vA");

        ns->tc("qdisc del dev vA root");
        ASSERT_EQ(root_qdisc(vA)->kind, "noqueue");
        restore_root(vA, prior);

        const std::optional<Qdisc> restored = root_qdisc(vA);
        ASSERT_TRUE(restored);
        EXPECT_EQ(restored->kind, prior->kind);
        EXPECT_EQ(restored->handle, prior->handle);
        if (exact) {
            EXPECT_EQ(show(*restored), show(*prior));
            EXPECT_EQ(ns->tc("qdisc show dev vA"), tc_before);
        }
        ns->tc("qdisc del dev vA root");
    }
    EXPECT_GE(tried, 6u);  // htb, tbf and the fifos are in every kernel worth the name
}

TEST_F(QdiscTest, RestoreRootRecreatesAnExplicitPriorOverOurMq)
{
    const int vA = veth(4);
    ns->tc("qdisc add dev vA root handle 1: htb default 10");
    const std::optional<Qdisc> prior = root_qdisc(vA);
    const std::set<std::string> before = snapshot(vA);

    detail::install_leaves(vA, "pfifo", pfifo_options(100));
    ASSERT_EQ(root_qdisc(vA)->kind, "mq");
    restore_root(vA, prior);
    EXPECT_EQ(snapshot(vA), before);
}

TEST_F(QdiscTest, RestoreRootOfADefaultPriorGivesTheKernelDefaultBack)
{
    const int vA = veth(1);
    ns->ip("link add ifb0 type ifb");
    ns->ip("link set ifb0 up");
    const int ifb0 = ns->ifindex("ifb0");

    // veth has IFF_NO_QUEUE; ifb gets net.core.default_qdisc (pfifo_fast here, fq_codel on
    // Debian's kernel).
    for (int dev : {vA, ifb0}) {
        const std::optional<Qdisc> prior = root_qdisc(dev);
        ASSERT_TRUE(prior);
        EXPECT_EQ(prior->handle, 0u);
        EXPECT_TRUE(dev != vA || prior->kind == "noqueue") << prior->kind;
        ASSERT_NE(prior->kind, "pfifo");

        detail::install_leaves(dev, "pfifo", pfifo_options(100));
        ASSERT_EQ(root_qdisc(dev)->kind, "pfifo");
        restore_root(dev, prior);
        EXPECT_EQ(root_text(dev), show(*prior));

        restore_root(dev, prior);  // nothing left to undo: no error
        EXPECT_EQ(root_text(dev), show(*prior));
    }
}

TEST_F(QdiscTest, RestoreRootOfNoPriorDeletesOurRoot)
{
    // A device that was down had no root to record; once up, the kernel's default is back.
    const int vA = veth(1);
    ns->tc("qdisc add dev vA root handle 1: htb");
    restore_root(vA, std::nullopt);
    EXPECT_EQ(root_qdisc(vA)->kind, "noqueue");
}

TEST_F(QdiscTest, RestoreRootLeavesAPriorStillInPlaceAlone)
{
    // htb cannot be changed in place: a request to would fail.
    const int vA = veth(1);
    ns->tc("qdisc add dev vA root handle 1: htb default 10");
    const std::optional<Qdisc> prior = root_qdisc(vA);
    const std::set<std::string> before = snapshot(vA);
    restore_root(vA, prior);
    EXPECT_EQ(snapshot(vA), before);
}

TEST_F(QdiscTest, KernelRefusalIsOneLineWithTheKernelsExplanation)
{
    const int vA = veth(1);
    const std::set<std::string> before = snapshot(vA);
    Qdisc bogus;
    bogus.kind = "no_such_qdisc";
    bogus.handle = 0x10000;
    bogus.parent = TC_H_ROOT;
    try {
        restore_root(vA, bogus);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "dev vA: cannot re-create root qdisc no_such_qdisc (handle 1:): "
                               "Specified qdisc kind is unknown (No such file or directory)");
    }
    EXPECT_EQ(snapshot(vA), before);
}

TEST_F(QdiscTest, InspectPacingFindsNoFqOnKernelDefaults)
{
    ns->add_veth("one0", "one1", 1);
    ns->add_veth("four0", "four1", 4);
    for (auto [device, queues] : {std::pair{"one0", 1u}, std::pair{"four0", 4u}}) {
        const PacingSetup setup = inspect_pacing(ns->ifindex(device));
        EXPECT_FALSE(setup.fq_everywhere) << device;
        EXPECT_EQ(setup.queues, queues) << device;
        EXPECT_EQ(setup.fq_queues, 0u) << device;
        EXPECT_EQ(setup.root_kind, "noqueue") << device;
    }
}

}  // namespace
}  // namespace shaperctl
