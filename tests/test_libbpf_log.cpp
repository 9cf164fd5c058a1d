// libbpf's messages and the verifier's log, as the loader keeps and reports them.
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "loader/libbpf_log.h"

using namespace shaperctl;

namespace {

// SHAPERCTL_DEBUG set (or unset) for one test.
struct DebugEnv {
    std::string old;
    bool had;
    explicit DebugEnv(const char* value) : had(std::getenv("SHAPERCTL_DEBUG") != nullptr)
    {
        if (had)
            old = std::getenv("SHAPERCTL_DEBUG");
        if (value)
            setenv("SHAPERCTL_DEBUG", value, 1);
        else
            unsetenv("SHAPERCTL_DEBUG");
    }
    ~DebugEnv()
    {
        if (had)
            setenv("SHAPERCTL_DEBUG", old.c_str(), 1);
        else
            unsetenv("SHAPERCTL_DEBUG");
    }
};

void print(libbpf_print_level level, const char* format, ...)
{
    va_list args;
    va_start(args, format);
    detail::libbpf_print(level, format, args);
    va_end(args);
}

// What libbpf prints when the kernel refuses a program (libbpf 1.1's format).
void print_refusal(const std::string& log)
{
    print(LIBBPF_WARN, "libbpf: prog '%s': BPF program load failed: %s\n", "shaper_egress", "Bad address");
    print(LIBBPF_WARN, "libbpf: prog '%s': -- BEGIN PROG LOAD LOG --\n%s-- END PROG LOAD LOG --\n",
          "shaper_egress", log.c_str());
    print(LIBBPF_WARN, "libbpf: failed to load BPF skeleton '%s': %d\n", "shaper_bpf", -14);
}

// A log of tens of thousands of lines, ending as 7.x's did on a verifier bug.
std::string long_log()
{
    std::ostringstream log;
    for (int i = 0; i < 20000; i++)
        log << i << ": (bf) r3 = r10                   ; R3=fp0 R10=fp0\n";
    log << "verifier bug: stack slot 4, total slots 0 (i >= func->allocated_stack / BPF_REG_SIZE)\n"
        << "processed 89351 insns (limit 1000000) max_states_per_insn 23 total_states 6603 "
           "peak_states 2019 mark_read 0\n";
    return log.str();
}

}  // namespace

TEST(LibbpfLog, AMessageLongerThanALineBufferIsKeptWhole)
{
    DebugEnv env(nullptr);
    quiet_libbpf();
    // Through libbpf itself: it names the file it could not open.
    const std::string path = "/nonexistent/" + std::string(3000, 'a') + "/shaper.bpf.o";
    EXPECT_EQ(bpf_object__open_file(path.c_str(), nullptr), nullptr);
    const std::string message = last_libbpf_message();
    EXPECT_NE(message.find(path), std::string::npos) << message.size() << " chars: " << message.substr(0, 200);
}

TEST(LibbpfLog, TheErrorQuotesTheVerifiersVerdictNotItsStatistics)
{
    DebugEnv env(nullptr);
    forget_verifier_log();
    print_refusal(long_log());
    EXPECT_EQ(verifier_log_summary(),
              ": the verifier said \"verifier bug: stack slot 4, total slots 0 (i >= "
              "func->allocated_stack / BPF_REG_SIZE)\" (SHAPERCTL_DEBUG=1 keeps the whole log in "
              "/run/shaperctl/verifier.log)");
    EXPECT_EQ(last_libbpf_message(), "libbpf: failed to load BPF skeleton 'shaper_bpf': -14");
    forget_verifier_log();
    EXPECT_EQ(verifier_log_summary(), "") << "a later load must not quote an earlier log";
}

TEST(LibbpfLog, WithDebugTheWholeLogGoesToTheNamedFile)
{
    const std::string dir = "/tmp/shaperctl-test-log." + std::to_string(getpid());
    const std::string file = dir + "/sub/verifier.log";
    {
        DebugEnv env(file.c_str());
        forget_verifier_log();
        const std::string log = long_log();
        print_refusal(log);
        std::ifstream in(file, std::ios::binary);
        const std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        EXPECT_EQ(kept.size(), log.size());
        EXPECT_TRUE(kept == log) << "the file holds the log byte for byte";
        EXPECT_NE(verifier_log_summary().find("(whole log in " + file + ")"), std::string::npos)
            << verifier_log_summary();
    }
    std::filesystem::remove_all(dir);
}

TEST(LibbpfLog, DebugOnePutsTheLogUnderTheRunDirectory)
{
    EXPECT_EQ(detail::verifier_log_path("1"), "/run/shaperctl/verifier.log");
    EXPECT_EQ(detail::verifier_log_path("/var/tmp/v.log"), "/var/tmp/v.log");
    EXPECT_EQ(detail::verifier_log_path(nullptr), "");
}

TEST(LibbpfLog, LastWordsSkipStatisticsAndBlankLines)
{
    EXPECT_EQ(detail::verifier_last_words("0: (b7) r0 = 0\nR1 invalid mem access 'scalar'\n"
                                          "verification time 12 usec\nstack depth 48\n"
                                          "processed 2 insns (limit 1000000)\n\n"),
              "R1 invalid mem access 'scalar'");
    EXPECT_EQ(detail::verifier_last_words("processed 2 insns\n"), "");
    EXPECT_EQ(detail::verifier_last_words(""), "");
}
