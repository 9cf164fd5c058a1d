#include "http_auth.h"

#include <openssl/evp.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "exporter_web_config.h"
#include "http_request.h"
#include "core/error.h"

namespace shaperctl::http {

std::string basic_credentials(const std::string& authorization)
{
    if (authorization.size() < 6 || lower(authorization.substr(0, 6)) != "basic ")
        return "";
    const std::string encoded = trim(authorization.substr(6));
    if (encoded.empty() || encoded.size() % 4 || encoded.size() > 4096)
        return "";
    std::string decoded(encoded.size() / 4 * 3, '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(decoded.data()),
                                  reinterpret_cast<const unsigned char*>(encoded.data()), int(encoded.size()));
    if (n < 0)
        return "";
    const size_t padding = size_t(std::count(encoded.end() - 2, encoded.end(), '='));
    decoded.resize(size_t(n) - padding);
    return decoded.find(':') == std::string::npos ? "" : decoded;
}

std::string credential_key(const std::string& credentials)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_Digest(credentials.data(), credentials.size(), digest, &len, EVP_sha256(), nullptr);
    return std::string(reinterpret_cast<char*>(digest), len);
}

PasswordChecker::PasswordChecker()
    : done_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), thread_([this] { work(); })
{
    if (!done_)
        throw Error(errno_message("the exporter cannot create an eventfd", errno));
}

PasswordChecker::~PasswordChecker()
{
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
}

void PasswordChecker::submit(uint64_t connection, std::string password, std::string hash,
                             std::string decoy)
{
    std::lock_guard lock(mutex_);
    jobs_.push_back({connection, std::move(password), std::move(hash), std::move(decoy)});
    wake_.notify_one();
}

void PasswordChecker::cancel(uint64_t connection)
{
    std::lock_guard lock(mutex_);
    std::erase_if(jobs_, [&](const Job& j) { return j.connection == connection; });
}

std::vector<PasswordChecker::Result> PasswordChecker::results()
{
    uint64_t count;
    if (read(done_.get(), &count, sizeof count) < 0) {
        // nothing new: the eventfd was drained by an earlier call
    }
    std::lock_guard lock(mutex_);
    return std::exchange(results_, {});
}

void PasswordChecker::work()
{
    for (;;) {
        Job job;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
            if (stop_)
                return;
            job = std::move(jobs_.front());
            jobs_.pop_front();
        }
        const bool ok = job.hash.empty() ? (bcrypt_matches(job.password, job.decoy), false)
                                         : bcrypt_matches(job.password, job.hash);
        {
            std::lock_guard lock(mutex_);
            results_.push_back({job.connection, ok});
        }
        const uint64_t one = 1;
        if (write(done_.get(), &one, sizeof one) < 0) {
            // the counter is full: the loop has wakeups pending already
        }
    }
}

}  // namespace shaperctl::http
