// Test helper: the shaperctl binary as the operator runs it, in the foreground (stdout and stderr
// apart) or in the background (exporter, status --watch) with its pid to signal.
#pragma once

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "loader/device.h"
#include "loader/fd.h"
#include "netns.h"

namespace shaperctl::test {

struct Outcome {
    int status;
    std::string out, err;
};

// The binary under test: the build's, or $SHAPERCTL_BIN (the stock-kernel VM copies it elsewhere).
inline std::string shaperctl_bin()
{
    const char* env = std::getenv("SHAPERCTL_BIN");
    return env && *env ? env : SHAPERCTL_BIN;
}

inline std::string read_file(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

inline void write_file(const std::string& path, const std::string& text)
{
    std::ofstream(path) << text;
}

// `shaperctl ARGS` through /bin/sh, in the calling thread's network namespace.
inline Outcome shaperctl_run(const std::string& args, const std::string& prefix = "")
{
    const std::string err_file = "/tmp/shaperctl-test-stderr-" + std::to_string(getpid());
    CommandResult r = run("(" + prefix + shaperctl_bin() + " " + args + " 2>" + err_file + ")");
    Outcome o{r.status, r.output, read_file(err_file)};
    std::remove(err_file.c_str());
    return o;
}

// A shaperctl running in the background; its output goes to files. The destructor ends it
// (SIGKILL if it is still running) so no test leaves one behind. `prefix` runs it under another
// command that execs it (setpriv ...), so that pid() is still shaperctl's.
class Background {
public:
    explicit Background(const std::string& args, const std::string& prefix = "")
        : out_("/tmp/shaperctl-test-bg-" + std::to_string(getpid()) + "-" + std::to_string(++count()) + ".out"),
          err_(out_ + ".err")
    {
        pid_ = fork();
        if (pid_ == 0) {
            const std::string command = "exec " + prefix + shaperctl_bin() + " " + args + " >" + out_ + " 2>" + err_;
            execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
            _exit(127);
        }
    }
    ~Background()
    {
        if (pid_ > 0 && !exited_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        std::remove(out_.c_str());
        std::remove(err_.c_str());
    }
    Background(const Background&) = delete;
    Background& operator=(const Background&) = delete;

    pid_t pid() const { return pid_; }
    std::string out() const { return read_file(out_); }
    std::string err() const { return read_file(err_); }

    // Whether it is still running (reaps it when it is not).
    bool running()
    {
        if (exited_)
            return false;
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            exited_ = true;
            status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            return false;
        }
        return true;
    }

    // Sends `sig` and waits up to `timeout` for the exit; its status, or -1 if it did not exit.
    int stop(int sig, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000))
    {
        if (running())
            kill(pid_, sig);
        return wait(timeout);
    }

    // Waits for the exit; its status, or -1 on timeout.
    int wait(std::chrono::milliseconds timeout)
    {
        const auto end = std::chrono::steady_clock::now() + timeout;
        while (running() && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return exited_ ? status_ : -1;
    }

private:
    static unsigned& count()
    {
        static unsigned n = 0;
        return n;
    }
    std::string out_, err_;
    pid_t pid_ = -1;
    bool exited_ = false;
    int status_ = -1;
};

// A throw-away network namespace with a veth pair sh0 <-> sh1, and shaperctl run in it (`-n`).
// Needs root. Whatever a test leaves attached is detached, whatever it asserted.
class DeviceTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (geteuid() != 0)
            GTEST_SKIP() << "needs root";
        ns_ = std::make_unique<NetNs>();
        prepare_namespace();
        ns_->add_veth("sh0", "sh1");
    }
    void TearDown() override
    {
        if (ns_) {
            sh("detach --dev sh0");
            sh("detach --dev sh1");
        }
        ns_.reset();
    }
    // Before the devices exist (e.g. loopback up, IPv6 off).
    virtual void prepare_namespace() {}

    Outcome sh(const std::string& args, const std::string& prefix = "")
    {
        return shaperctl_run("-n " + ns_->name() + " " + args, prefix);
    }
    void ok(const std::string& args, const std::string& prefix = "")
    {
        Outcome o = sh(args, prefix);
        ASSERT_EQ(o.status, 0) << args << ": " << o.err;
    }

    // `apply -f` of a file holding `text`; the test fails when it does not exit 0.
    void apply_text(const std::string& text)
    {
        const std::string path = "/tmp/shaperctl-test-apply-" + std::to_string(getpid()) + ".json";
        write_file(path, text);
        ok("apply -f " + path);
        std::remove(path.c_str());
    }
    // One of sh0's pinned maps (the thread is in the namespace), opened.
    shaperctl::Fd pinned(const std::string& map) const
    {
        const std::string pin = shaperctl::Device::resolve("sh0").pin_dir() + "/" + map;
        const int fd = bpf_obj_get(pin.c_str());
        EXPECT_GE(fd, 0) << pin;
        return shaperctl::Fd(fd);
    }

    std::unique_ptr<NetNs> ns_;
};

}  // namespace shaperctl::test
