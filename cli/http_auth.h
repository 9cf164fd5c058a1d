// Basic authentication for the exporter's server: credentials from the Authorization header,
// and bcrypt checks on a thread of their own, so that a check (tens of milliseconds) never stalls
// the event loop; the loop learns of finished checks through an eventfd.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loader/fd.h"

namespace shaperctl::http {

// "Basic base64(user:password)" -> "user:password", or "" when malformed.
std::string basic_credentials(const std::string& authorization);

// What a server remembers of credentials that matched: their SHA-256, never the password.
std::string credential_key(const std::string& credentials);

class PasswordChecker {
public:
    struct Result {
        uint64_t connection;
        bool ok;
    };

    PasswordChecker();  // throws
    ~PasswordChecker();
    PasswordChecker(const PasswordChecker&) = delete;
    PasswordChecker& operator=(const PasswordChecker&) = delete;

    // Readable when results() has something.
    int fd() const { return done_.get(); }

    // `hash` empty: an unknown user, checked against `decoy` all the same (same time, no match).
    void submit(uint64_t connection, std::string password, std::string hash, std::string decoy);
    // A connection closed before its check: drop the check (the queue stays within the
    // connection limit).
    void cancel(uint64_t connection);
    // The checks finished since the last call.
    std::vector<Result> results();

private:
    struct Job {
        uint64_t connection;
        std::string password, hash, decoy;
    };
    void work();

    Fd done_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Job> jobs_;
    std::vector<Result> results_;
    bool stop_ = false;
    std::thread thread_;  // last: starts once the members it uses exist
};

}  // namespace shaperctl::http
