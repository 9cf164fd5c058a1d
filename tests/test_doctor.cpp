// shaperctl doctor on this machine's kernel, and the generated man page, completion and install.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "loader/doctor.h"
#include "core/error.h"
#include "loader/tcx_link.h"
#include "netns.h"
#include "shaperctl_process.h"

using namespace shaperctl::test;
using nlohmann::json;

namespace {

// Removes a scratch directory however the test ends.
struct ScratchDir {
    std::string path;
    explicit ScratchDir(std::string p) : path(std::move(p)) { std::filesystem::create_directories(path); }
    ~ScratchDir() { std::filesystem::remove_all(path); }
};

bool have_sch_fq()
{
    return access("/sys/module/sch_fq", F_OK) == 0;
}

json finding(const json& report, const std::string& check)
{
    for (const auto& f : report["findings"])
        if (f["check"] == check)
            return f;
    return nullptr;
}

std::vector<std::string> netns_names()
{
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec))
        names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
}

TEST(Doctor, SaysWhatThisKernelHasAndLacks)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root";
    const auto namespaces_before = netns_names();
    Outcome o = shaperctl_run("doctor --json");
    const json report = json::parse(o.out);
    for (const char* check : {"kernel", "privileges", "btf", "bpffs", "bpf program", "set_tstamp", "clsact",
                              "tcx", "sch_fq", "default_qdisc", "congestion_control", "managed devices"}) {
        const json f = finding(report, check);
        ASSERT_FALSE(f.is_null()) << "no finding " << check << " in " << o.out;
        EXPECT_TRUE(f["status"] == "ok" || f["status"] == "warn" || f["status"] == "fail") << f;
        EXPECT_FALSE(f["detail"].get<std::string>().empty()) << f;
        if (f["status"] != "ok") {
            EXPECT_FALSE(f["hint"].get<std::string>().empty()) << "no fix hint: " << f;
        }
    }
    EXPECT_EQ(finding(report, "btf")["status"], "ok");
    EXPECT_EQ(finding(report, "clsact")["status"], "ok");
    EXPECT_EQ(finding(report, "tcx")["detail"].get<std::string>().starts_with("TCX"),
              shaperctl::kernel_has_tcx()) << finding(report, "tcx");
    EXPECT_EQ(finding(report, "bpf program")["status"], "ok") << finding(report, "bpf program");
    const json fq = finding(report, "sch_fq");
    if (have_sch_fq()) {
        EXPECT_EQ(fq["status"], "ok") << fq;
    } else {
        EXPECT_NE(fq["status"], "ok") << fq;
        EXPECT_NE(fq["detail"].get<std::string>().find("sch_fq is missing"), std::string::npos) << fq;
        EXPECT_NE(fq["hint"].get<std::string>().find("--mode police, or a kernel with sch_fq"), std::string::npos) << fq;
    }
    const bool failed = report["summary"]["fail"].get<int>() > 0;
    EXPECT_EQ(report["ok"], !failed);
    EXPECT_EQ(o.status, failed ? 1 : 0) << o.out;

    // The same in text, one finding a line, the hint under it.
    Outcome text = shaperctl_run("doctor");
    EXPECT_EQ(text.status, o.status);
    const std::string& t = text.out;
    const auto line = t.find("sch_fq ");
    ASSERT_NE(line, std::string::npos) << t;
    if (!have_sch_fq()) {
        EXPECT_NE(t.find("fix: --mode police, or a kernel with sch_fq", line), std::string::npos) << t;
    }
    // The probes' scratch namespaces are gone with their threads: nothing named was left.
    EXPECT_EQ(netns_names(), namespaces_before);
}

TEST(Doctor, ScratchNamespaceIsThreadLocal)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root";
    struct stat before {};
    ASSERT_EQ(stat("/proc/thread-self/ns/net", &before), 0);
    ino_t inside = 0;
    shaperctl::detail::in_scratch_netns([&] {
        struct stat st {};
        stat("/proc/thread-self/ns/net", &st);
        inside = st.st_ino;
    });
    struct stat after {};
    ASSERT_EQ(stat("/proc/thread-self/ns/net", &after), 0);
    EXPECT_NE(inside, before.st_ino);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_THROW(shaperctl::detail::in_scratch_netns([] { throw shaperctl::Error("probe failed"); }),
                 shaperctl::Error);
}

class DoctorDevice : public DeviceTest {
protected:
    json doctor(int* status = nullptr)
    {
        Outcome o = sh("doctor --json");
        if (status)
            *status = o.status;
        return json::parse(o.out);
    }
};

// Someone removes our filter (or replaces the qdisc): doctor fails and says how to fix it.
// On tc clsact (tests/test_tcx.cpp takes a TCX link off).
TEST_F(DoctorDevice, NoticesARemovedFilter)
{
    ASSERT_EQ(sh("attach --dev sh0 --mode police", "SHAPERCTL_ATTACH=tc ").status, 0);
    int status = -1;
    json report = doctor(&status);
    const std::string managed = finding(report, "managed devices")["detail"];
    EXPECT_TRUE(managed.starts_with("1 in this network namespace")) << managed;
    EXPECT_EQ(finding(report, "dev sh0 filter")["status"], "ok") << report.dump(2);
    EXPECT_EQ(finding(report, "dev sh0 fq")["status"], "ok");
    EXPECT_FALSE(finding(report, "dev sh0 offload").is_null());
    EXPECT_EQ(status, report["ok"] == true ? 0 : 1);

    ns_->tc("filter del dev sh0 egress");
    report = doctor(&status);
    const json filter = finding(report, "dev sh0 filter");
    EXPECT_EQ(filter["status"], "fail") << filter;
    EXPECT_NE(filter["hint"].get<std::string>().find("attach --dev sh0"), std::string::npos) << filter;
    EXPECT_EQ(status, 1);
    EXPECT_EQ(report["ok"], false);

    ASSERT_EQ(sh("attach --dev sh0 --mode police", "SHAPERCTL_ATTACH=tc ").status, 0);  // the fix the hint gives
    EXPECT_EQ(finding(doctor(), "dev sh0 filter")["status"], "ok");
}

// Runs where the kernel has sch_fq (the stock-kernel VM).
TEST_F(DoctorDevice, NoticesAReplacedQdisc)
{
    if (!have_sch_fq())
        GTEST_SKIP() << "this kernel has no sch_fq";
    ASSERT_EQ(sh("attach --dev sh0").status, 0);
    EXPECT_EQ(finding(doctor(), "dev sh0 fq")["status"], "ok");
    ns_->tc("qdisc replace dev sh0 root pfifo");
    int status = -1;
    const json fq = finding(doctor(&status), "dev sh0 fq");
    EXPECT_EQ(fq["status"], "fail") << fq;
    EXPECT_NE(fq["detail"].get<std::string>().find("root qdisc pfifo"), std::string::npos) << fq;
    EXPECT_EQ(status, 1);
}

// The receive side is checked as the send side is: its program on its hook, its pins, the
// kernel feature the hook stands for (TCX, or tc clsact ingress and the version that has TCX),
// and whether connections opened here ask for ECN. Taking it apart fails the ingress side's
// findings and names --ingress in the fix; the egress side stays ok.
TEST_F(DoctorDevice, CoversTheIngressSideOfADevice)
{
    ASSERT_EQ(sh("attach --dev sh0 --mode police", "SHAPERCTL_ATTACH=tc ").status, 0);
    ASSERT_EQ(sh("attach --dev sh0 --ingress", "SHAPERCTL_ATTACH=tc ").status, 0);
    json report = doctor();
    EXPECT_TRUE(finding(report, "managed devices")["detail"].get<std::string>().starts_with("2 in this"))
        << report.dump(2);
    EXPECT_EQ(finding(report, "dev sh0 ingress filter")["status"], "ok") << report.dump(2);
    EXPECT_NE(finding(report, "dev sh0 ingress filter")["detail"].get<std::string>().find("tc clsact ingress"),
              std::string::npos);
    const json pins = finding(report, "dev sh0 ingress pins");
    EXPECT_EQ(pins["status"], "ok") << pins;
    const json hook = finding(report, "dev sh0 ingress hook");
    EXPECT_EQ(hook["status"], "ok") << hook;
    const std::string hook_detail = hook["detail"];
    EXPECT_TRUE(hook_detail.starts_with("tc clsact ingress")) << hook;
    if (!shaperctl::kernel_has_tcx()) {
        EXPECT_NE(hook_detail.find("has no TCX ingress hook; Linux 6.6 has it"), std::string::npos) << hook;
    }
    EXPECT_TRUE(finding(report, "dev sh0 ingress fq").is_null()) << "no pacing on the receive side";
    // The send side polices: it cannot hold the receiver's ACKs (bpf/ack_pace.h).
    const json acks = finding(report, "dev sh0 ingress ack pacing");
    EXPECT_EQ(acks["status"], "warn") << acks;
    EXPECT_NE(acks["detail"].get<std::string>().find("ACKs are not paced"), std::string::npos) << acks;
    EXPECT_EQ(finding(report, "dev sh0 hook")["detail"].get<std::string>().starts_with("tc clsact egress"), true);

    // A namespace's tcp_ecn starts at 2: its own connections do not ask for ECN.
    must_run(ip_tool() + " netns exec " + ns_->name() + " sysctl -qw net.ipv4.tcp_ecn=2");
    json ecn = finding(doctor(), "dev sh0 ingress ecn");
    EXPECT_EQ(ecn["status"], "warn") << ecn;
    EXPECT_EQ(ecn["hint"], "sysctl -w net.ipv4.tcp_ecn=1");
    must_run(ip_tool() + " netns exec " + ns_->name() + " sysctl -qw net.ipv4.tcp_ecn=1");
    EXPECT_EQ(finding(doctor(), "dev sh0 ingress ecn")["status"], "ok");
    EXPECT_TRUE(finding(doctor(), "dev sh0 ecn").is_null()) << "the send side has no such finding";

    ns_->tc("filter del dev sh0 ingress");
    int status = -1;
    report = doctor(&status);
    const json filter = finding(report, "dev sh0 ingress filter");
    EXPECT_EQ(filter["status"], "fail") << filter;
    EXPECT_NE(filter["hint"].get<std::string>().find("attach --dev sh0 --ingress"), std::string::npos) << filter;
    EXPECT_EQ(finding(report, "dev sh0 filter")["status"], "ok") << "the send side is untouched";
    EXPECT_EQ(status, 1);

    // A map's pin removed by hand: the side can no longer be changed or read.
    const std::string pin_dir = pins["detail"].get<std::string>().substr(pins["detail"].get<std::string>().rfind(' ') + 1);
    ASSERT_TRUE(pin_dir.find("-ingress") != std::string::npos) << pins;
    ASSERT_EQ(unlink((pin_dir + "/shaper_class_stats").c_str()), 0) << pin_dir;
    const json broken = finding(doctor(), "dev sh0 ingress pins");
    EXPECT_EQ(broken["status"], "fail") << broken;
    EXPECT_NE(broken["detail"].get<std::string>().find("shaper_class_stats"), std::string::npos) << broken;
    EXPECT_NE(broken["hint"].get<std::string>().find("detach --dev sh0 --ingress"), std::string::npos) << broken;
    EXPECT_EQ(finding(doctor(), "dev sh0 pins")["status"], "ok");
    sh("detach --dev sh0 --ingress");
}

TEST(Doctor, WithoutPrivilegesSaysSo)
{
    if (run("setpriv --version").output.find("util-linux") == std::string::npos)
        GTEST_SKIP() << "needs util-linux setpriv to drop privileges";
    Outcome o = shaperctl_run("doctor --json", "setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all ");
    EXPECT_EQ(o.status, 1);
    const json report = json::parse(o.out);
    EXPECT_EQ(finding(report, "privileges")["status"], "fail");
    EXPECT_EQ(finding(report, "sch_fq")["detail"], "not checked: needs root");
}

TEST(Packaging, ManPageAndCompletionComeFromTheCli)
{
    Outcome man = shaperctl_run("help-man");
    ASSERT_EQ(man.status, 0) << man.err;
    EXPECT_TRUE(man.out.find(".TH SHAPERCTL 8") != std::string::npos);
    Outcome help = shaperctl_run("--help");
    Outcome completion = shaperctl_run("completion bash");
    ASSERT_EQ(completion.status, 0) << completion.err;
    for (const char* cmd : {"attach", "detach", "add-class", "change-class", "del-class", "set-default", "add-rule",
                            "del-rule", "status", "list", "dump", "apply", "doctor", "exporter", "import-htb"}) {
        EXPECT_NE(help.out.find(std::string("  ") + cmd + " "), std::string::npos) << cmd;
        EXPECT_NE(man.out.find(std::string(".SS \"") + cmd + "\""), std::string::npos) << cmd;
        EXPECT_NE(completion.out.find(std::string("    ") + cmd + ") "), std::string::npos) << cmd;
    }
    EXPECT_NE(man.out.find("\\-\\-dry\\-run"), std::string::npos);
    EXPECT_NE(completion.out.find("--watch"), std::string::npos);
    EXPECT_NE(completion.out.find("complete -F _shaperctl shaperctl"), std::string::npos);

    const ScratchDir scratch("/tmp/shaperctl-test-docs-" + std::to_string(getpid()));
    const std::string& dir = scratch.path;
    write_file(dir + "/shaperctl.8", man.out);
    write_file(dir + "/completion", completion.out);
    if (run("bash --version").status != 0)  // the stock-kernel VM has busybox sh only
        GTEST_SKIP() << "no bash to check the completion with";
    CommandResult syntax = run("bash -n " + dir + "/completion");
    EXPECT_EQ(syntax.status, 0) << syntax.output;
    if (run("groff --version").status == 0) {
        CommandResult lint = run("groff -man -ww -z " + dir + "/shaperctl.8");
        EXPECT_EQ(lint.status, 0);
        EXPECT_EQ(lint.output, "") << "groff warnings";
    }
    // The completion completes: commands, then a command's options.
    CommandResult words = run("bash -c 'source " + dir + "/completion; COMP_WORDS=(shaperctl ap); COMP_CWORD=1; "
                              "_shaperctl; echo ${COMPREPLY[@]}; COMP_WORDS=(shaperctl apply --dr); COMP_CWORD=2; "
                              "_shaperctl; echo ${COMPREPLY[@]}; COMP_WORDS=(shaperctl attach --mode p); COMP_CWORD=3; "
                              "_shaperctl; echo ${COMPREPLY[@]}'");
    EXPECT_EQ(words.output, "apply\n--dry-run\npolice\n");
}

// cmake --install of the build this binary comes from: binary, unit, completion, man page, schema.
TEST(Packaging, InstallPutsEverythingInPlace)
{
    const std::filesystem::path build = std::filesystem::path(shaperctl_bin()).parent_path().parent_path();
    if (!std::filesystem::exists(build / "CMakeCache.txt") || run("cmake --version").status != 0)
        GTEST_SKIP() << "not run from a build tree";
    // DESTDIR too: whatever the build's cache says, nothing lands outside the scratch directory.
    const ScratchDir scratch("/tmp/shaperctl-test-install-" + std::to_string(getpid()));
    const std::string& destdir = scratch.path;
    const std::string prefix = destdir + "/usr";
    CommandResult r = run("DESTDIR=" + destdir + " cmake --install " + build.string() + " --prefix /usr");
    ASSERT_EQ(r.status, 0) << r.output;
    for (const char* file : {"sbin/shaperctl", "share/man/man8/shaperctl.8",
                             "share/bash-completion/completions/shaperctl",
                             "share/shaperctl/shaperctl-config.schema.json", "share/shaperctl/config.example.json"})
        EXPECT_TRUE(std::filesystem::exists(prefix + "/" + file)) << file << " not installed:\n" << r.output;
    // The CNI plugin where runtimes look for plugins, whatever the prefix.
    for (const char* file : {"/opt/cni/bin/shaperctl-cni", "/usr/lib/cni/shaperctl-cni"})
        EXPECT_TRUE(std::filesystem::exists(destdir + file)) << file << " not installed:\n" << r.output;
    // The units' paths are the configured prefix's (cmake --install --prefix only relocates files).
    std::string unit;
    for (const auto& e : std::filesystem::recursive_directory_iterator(destdir))
        if (e.path().filename() == "shaperctl.service")
            unit = read_file(e.path());
    ASSERT_FALSE(unit.empty()) << "no shaperctl.service installed:\n" << r.output;
    EXPECT_NE(unit.find("shaperctl apply -f /etc/shaperctl/config.json\n"), std::string::npos) << unit;
    EXPECT_NE(unit.find("ExecStop=/"), std::string::npos) << unit;
    EXPECT_NE(unit.find("shaperctl detach -f /etc/shaperctl/config.json\n"), std::string::npos) << unit;
    EXPECT_NE(unit.find("Type=oneshot\nRemainAfterExit=yes"), std::string::npos) << unit;
}

}  // namespace
