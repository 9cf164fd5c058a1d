#include "exporter_http.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "loader/error.h"

namespace shaperctl {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxConnections = 512;
constexpr size_t kMaxHeadBytes = 8192;
constexpr auto kHeadTimeout = std::chrono::seconds(10);   // from accept (TLS handshake included), or first byte
constexpr auto kWriteTimeout = std::chrono::seconds(30);  // the whole response
constexpr auto kIdleTimeout = std::chrono::minutes(2);    // keep-alive between requests
constexpr size_t kRememberedCredentials = 64;

// epoll tags; connections are numbered from kFirstConnection.
constexpr uint64_t kListenerTag = 0, kSignalTag = 1, kAuthTag = 2, kFirstConnection = 16;

// Idle comes first: the order in which a full server closes connections to take a new one.
enum class Phase { Idle, Handshake, Head, Auth, Write };

int eviction_rank(Phase phase)
{
    return phase == Phase::Idle ? 0 : phase == Phase::Write ? 2 : 1;
}

struct SslFree {
    void operator()(SSL* ssl) const { SSL_free(ssl); }
};

struct Connection {
    Fd fd;
    std::unique_ptr<SSL, SslFree> ssl;  // after fd: freed before the socket closes
    Phase phase = Phase::Head;
    Clock::time_point since, deadline;  // entered the phase; must leave it by
    std::string in, out;
    size_t sent = 0;
    bool close_after = false;  // of the response being written
    uint32_t events = 0;       // asked of epoll
    // A request waiting for its password check.
    std::string path, credential;
    bool head_only = false;
};

enum class Io { Done, Again, Closed };  // Again: retry when epoll says the socket is ready

// TLS may need the other direction to progress (a handshake message during a read, say).
Io ssl_result(SSL* ssl, int ret, bool& reversed)
{
    switch (SSL_get_error(ssl, ret)) {
    case SSL_ERROR_WANT_READ:
        return Io::Again;
    case SSL_ERROR_WANT_WRITE:
        reversed = true;
        return Io::Again;
    default:
        return Io::Closed;
    }
}

// Appends what the peer sent to c.in, up to one byte beyond the head limit.
Io read_some(Connection& c, bool& want_write)
{
    char buf[4096];
    while (c.in.size() <= kMaxHeadBytes) {
        ssize_t n;
        if (c.ssl) {
            ERR_clear_error();
            n = SSL_read(c.ssl.get(), buf, sizeof buf);
            if (n <= 0)
                return ssl_result(c.ssl.get(), int(n), want_write);
        } else {
            n = recv(c.fd.get(), buf, sizeof buf, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN)
                return Io::Again;
            if (n <= 0)
                return Io::Closed;
        }
        c.in.append(buf, size_t(n));
    }
    return Io::Done;
}

Io write_some(Connection& c, bool& want_read)
{
    while (c.sent < c.out.size()) {
        const char* data = c.out.data() + c.sent;
        const size_t left = c.out.size() - c.sent;
        ssize_t n;
        if (c.ssl) {
            ERR_clear_error();
            n = SSL_write(c.ssl.get(), data, int(std::min<size_t>(left, INT_MAX)));
            if (n <= 0)
                return ssl_result(c.ssl.get(), int(n), want_read);
        } else {
            n = send(c.fd.get(), data, left, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN)
                return Io::Again;
            if (n < 0)
                return Io::Closed;
        }
        c.sent += size_t(n);
    }
    return Io::Done;
}

std::string lower(std::string s)
{
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    return s;
}

std::string trim(const std::string& s)
{
    const size_t first = s.find_first_not_of(" \t");
    return first == std::string::npos ? "" : s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

struct Request {
    std::string method, path, version;
    std::unordered_map<std::string, std::string> headers;  // names in lower case
};

// The head (request line and header lines, CRLF-separated, without the final blank line); false
// when it is not HTTP/1.x.
bool parse_head(const std::string& head, Request& r)
{
    size_t at = head.find("\r\n");
    const std::string line = head.substr(0, at);
    const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
    if (sp1 == std::string::npos || sp1 == sp2)
        return false;
    r.method = line.substr(0, sp1);
    const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    r.path = target.substr(0, target.find('?'));
    r.version = line.substr(sp2 + 1);
    if (r.version != "HTTP/1.1" && r.version != "HTTP/1.0")
        return false;
    while (at != std::string::npos) {
        const size_t start = at + 2, end = head.find("\r\n", start);
        const std::string field = head.substr(start, end == std::string::npos ? std::string::npos : end - start);
        const size_t colon = field.find(':');
        if (colon == 0 || colon == std::string::npos || field.find_first_of(" \t") < colon)
            return false;  // also obsolete line folding
        r.headers[lower(field.substr(0, colon))] = trim(field.substr(colon + 1));
        at = end;
    }
    return true;
}

// "Basic base64(user:password)" -> "user:password", or "" when malformed.
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

std::string sha256(const std::string& text)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
    return std::string(reinterpret_cast<char*>(digest), len);
}

const char* reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    default: return "Internal Server Error";
    }
}

// bcrypt on its own thread: a check takes tens of milliseconds, which the loop must not wait.
class PasswordChecker {
public:
    struct Result {
        uint64_t connection;
        bool ok;
    };

    PasswordChecker() : done_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), thread_([this] { work(); })
    {
        if (!done_)
            throw Error(errno_message("the exporter cannot create an eventfd", errno));
    }
    ~PasswordChecker()
    {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        wake_.notify_one();
        thread_.join();
    }

    int fd() const { return done_.get(); }

    // `hash` empty: an unknown user, checked against `decoy` all the same (same time, no match).
    void submit(uint64_t connection, std::string password, std::string hash, std::string decoy)
    {
        std::lock_guard lock(mutex_);
        jobs_.push_back({connection, std::move(password), std::move(hash), std::move(decoy)});
        wake_.notify_one();
    }
    // A connection closed before its check: drop the check (the queue stays within the
    // connection limit).
    void cancel(uint64_t connection)
    {
        std::lock_guard lock(mutex_);
        std::erase_if(jobs_, [&](const Job& j) { return j.connection == connection; });
    }
    std::vector<Result> results()
    {
        uint64_t count;
        if (read(done_.get(), &count, sizeof count) < 0) {
            // nothing new: the eventfd was drained by an earlier call
        }
        std::lock_guard lock(mutex_);
        return std::exchange(results_, {});
    }

private:
    struct Job {
        uint64_t connection;
        std::string password, hash, decoy;
    };
    void work()
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

    Fd done_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Job> jobs_;
    std::vector<Result> results_;
    bool stop_ = false;
    std::thread thread_;  // last: starts once the members it uses exist
};

class Server {
public:
    Server(Fd listener, WebConfig web, const HttpHandler& handler)
        : listener_(std::move(listener)), web_(std::move(web)), handler_(handler)
    {
        if (!epoll_)
            throw Error(errno_message("the exporter cannot create an epoll instance", errno));
        // Every connection needs a descriptor: ask for enough, else take fewer connections.
        rlimit files{};
        getrlimit(RLIMIT_NOFILE, &files);
        if (files.rlim_cur < kMaxConnections + 64) {
            files.rlim_cur = std::min<rlim_t>(files.rlim_max, kMaxConnections + 64);
            setrlimit(RLIMIT_NOFILE, &files);
        }
        max_connections_ = std::clamp<size_t>(files.rlim_cur > 64 ? files.rlim_cur - 64 : 0, 16, kMaxConnections);
        if (!web_.users.empty())
            checker_ = std::make_unique<PasswordChecker>();
        add(listener_.get(), kListenerTag);
        if (checker_)
            add(checker_->fd(), kAuthTag);
    }

    void run(const sigset_t& stop_signals)
    {
        Fd signals(signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK));
        if (!signals)
            throw Error(errno_message("the exporter cannot create a signalfd", errno));
        add(signals.get(), kSignalTag);
        epoll_event events[64];
        for (;;) {
            const int n = epoll_wait(epoll_.get(), events, 64, timeout_ms());
            if (n < 0 && errno != EINTR)
                throw Error(errno_message("the exporter's epoll_wait failed", errno));
            for (int i = 0; i < n; i++) {
                const uint64_t tag = events[i].data.u64;
                if (tag == kSignalTag)
                    return;
                if (tag == kListenerTag)
                    accept_all();
                else if (tag == kAuthTag)
                    password_results();
                else if (conns_.count(tag))
                    ready(tag, events[i].events);
            }
            expire();
        }
    }

private:
    void add(int fd, uint64_t tag, uint32_t events = EPOLLIN)
    {
        epoll_event ev{};
        ev.events = events;
        ev.data.u64 = tag;
        if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev))
            throw Error(errno_message("the exporter cannot watch a socket", errno));
    }

    void watch(uint64_t id, Connection& c, uint32_t events)
    {
        if (c.events == events)
            return;
        epoll_event ev{};
        ev.events = events;
        ev.data.u64 = id;
        epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
        c.events = events;
    }

    void enter(Connection& c, Phase phase, std::chrono::seconds timeout)
    {
        c.phase = phase;
        c.since = Clock::now();
        c.deadline = c.since + timeout;
    }

    void accept_all()
    {
        for (int i = 0; i < 64; i++) {
            Fd fd(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
            if (!fd) {
                if (errno == EINTR || errno == ECONNABORTED)
                    continue;
                if ((errno == EMFILE || errno == ENFILE) && !conns_.empty()) {
                    evict_one();
                    continue;
                }
                return;
            }
            if (conns_.size() >= max_connections_)
                evict_one();
            const int yes = 1;
            setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
            const uint64_t id = next_id_++;
            Connection& c = conns_[id];
            c.fd = std::move(fd);
            enter(c, Phase::Head, kHeadTimeout);
            if (web_.tls) {
                c.ssl.reset(SSL_new(web_.tls.get()));
                if (!c.ssl || SSL_set_fd(c.ssl.get(), c.fd.get()) != 1) {
                    conns_.erase(id);
                    continue;
                }
                SSL_set_accept_state(c.ssl.get());
                c.phase = Phase::Handshake;
            }
            add(c.fd.get(), id);
            c.events = EPOLLIN;
        }
    }

    // A full server takes a new connection in place of the idle one idle longest, else of
    // the oldest one still being set up or sending its request, else of the oldest response.
    void evict_one()
    {
        auto victim = conns_.end();
        for (auto it = conns_.begin(); it != conns_.end(); ++it)
            if (victim == conns_.end() ||
                std::make_pair(eviction_rank(it->second.phase), it->second.since) <
                    std::make_pair(eviction_rank(victim->second.phase), victim->second.since))
                victim = it;
        if (victim != conns_.end())
            close(victim->first);
    }

    void close(uint64_t id)
    {
        const auto it = conns_.find(id);
        if (it->second.phase == Phase::Auth)
            checker_->cancel(id);
        conns_.erase(it);  // the descriptor leaves epoll as it closes
    }

    void expire()
    {
        const auto now = Clock::now();
        std::vector<uint64_t> late;
        for (const auto& [id, c] : conns_)
            if (c.deadline <= now)
                late.push_back(id);
        for (uint64_t id : late)
            close(id);
    }

    int timeout_ms() const
    {
        if (conns_.empty())
            return -1;
        auto first = Clock::time_point::max();
        for (const auto& [id, c] : conns_)
            first = std::min(first, c.deadline);
        const auto wait = std::chrono::ceil<std::chrono::milliseconds>(first - Clock::now()).count();
        return int(std::clamp<int64_t>(wait, 0, INT_MAX));
    }

    void ready(uint64_t id, uint32_t events)
    {
        Connection& c = conns_.at(id);
        if (c.phase == Phase::Auth && (events & (EPOLLERR | EPOLLHUP)))
            close(id);  // gone while its password is checked (and not watched for reading)
        else
            progress(id, c);
    }

    // Drives a connection as far as its socket allows; may close it.
    void progress(uint64_t id, Connection& c)
    {
        for (;;) {
            bool reversed = false;  // TLS waits for the other direction
            switch (c.phase) {
            case Phase::Handshake: {
                ERR_clear_error();
                const int ret = SSL_accept(c.ssl.get());
                if (ret == 1) {
                    c.phase = Phase::Head;  // the head's deadline still counts from accept
                    continue;
                }
                if (ssl_result(c.ssl.get(), ret, reversed) == Io::Closed)
                    return close(id);
                return watch(id, c, reversed ? EPOLLOUT : EPOLLIN);
            }
            case Phase::Idle:
            case Phase::Head: {
                const Io io = read_some(c, reversed);
                if (c.phase == Phase::Idle && !c.in.empty())
                    enter(c, Phase::Head, kHeadTimeout);
                const size_t end = c.in.find("\r\n\r\n");
                if (end != std::string::npos && end + 4 <= kMaxHeadBytes) {
                    request(id, c, end);
                    continue;
                }
                if (c.in.size() > kMaxHeadBytes) {
                    respond(c, 431, "request head over 8 kB\n", true);
                    continue;
                }
                if (io == Io::Closed)
                    return close(id);
                return watch(id, c, reversed ? EPOLLOUT : EPOLLIN);
            }
            case Phase::Auth:
                return watch(id, c, 0);
            case Phase::Write: {
                const Io io = write_some(c, reversed);
                if (io == Io::Closed || (io == Io::Done && c.close_after))
                    return close(id);
                if (io == Io::Again)
                    return watch(id, c, reversed ? EPOLLIN : EPOLLOUT);
                c.out.clear();
                c.sent = 0;
                enter(c, Phase::Idle, kIdleTimeout);
                continue;  // a pipelined request may be in c.in already
            }
            }
        }
    }

    // c.in starts with a complete head of `end` bytes (then CRLF CRLF).
    void request(uint64_t id, Connection& c, size_t end)
    {
        Request r;
        c.head_only = false;
        const bool parsed = parse_head(c.in.substr(0, end), r);
        c.in.erase(0, end + 4);
        if (!parsed)
            return respond(c, 400, "not an HTTP/1.1 request\n", true);
        const auto header = [&](const char* name) {
            const auto it = r.headers.find(name);
            return it == r.headers.end() ? std::string() : it->second;
        };
        // Scrapes send no body; one that would follow is refused, not read.
        if (r.headers.count("transfer-encoding") || !(header("content-length").empty() || header("content-length") == "0"))
            return respond(c, 413, "no request body accepted\n", true);
        c.close_after = r.version == "HTTP/1.0" || lower(header("connection")).find("close") != std::string::npos;
        c.head_only = r.method == "HEAD";
        if (r.method != "GET" && r.method != "HEAD")
            return respond(c, 405, "GET or HEAD only\n", c.close_after);
        if (!web_.users.empty()) {
            const std::string credentials = basic_credentials(header("authorization"));
            if (credentials.empty())
                return respond(c, 401, "", c.close_after);
            c.credential = sha256(credentials);
            if (!remembered_.count(c.credential)) {
                const size_t colon = credentials.find(':');
                const auto user = web_.users.find(credentials.substr(0, colon));
                checker_->submit(id, credentials.substr(colon + 1),
                                 user == web_.users.end() ? "" : user->second, web_.users.begin()->second);
                c.path = r.path;
                enter(c, Phase::Auth, kHeadTimeout);
                return;
            }
        }
        serve(c, r.path);
    }

    void serve(Connection& c, const std::string& path)
    {
        const HttpResponse res = handler_(path);
        respond(c, res.status, res.body, c.close_after, res.content_type);
    }

    void password_results()
    {
        for (const PasswordChecker::Result& r : checker_->results()) {
            const auto it = conns_.find(r.connection);
            if (it == conns_.end() || it->second.phase != Phase::Auth)
                continue;
            Connection& c = it->second;
            if (r.ok) {
                if (remembered_.size() >= kRememberedCredentials)
                    remembered_.clear();
                remembered_.insert(c.credential);
                serve(c, c.path);
            } else {
                respond(c, 401, "", c.close_after);  // the same answer as no credentials at all
            }
            progress(r.connection, c);
        }
    }

    void respond(Connection& c, int status, const std::string& body, bool close_after,
                 const std::string& content_type = "text/plain; charset=utf-8")
    {
        c.close_after = close_after;
        c.out = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
        if (!body.empty())
            c.out += "Content-Type: " + content_type + "\r\n";
        c.out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
        if (status == 401)
            c.out += "WWW-Authenticate: Basic realm=\"shaperctl\", charset=\"UTF-8\"\r\n";
        if (status == 405)
            c.out += "Allow: GET, HEAD\r\n";
        if (close_after)
            c.out += "Connection: close\r\n";
        c.out += "\r\n";
        if (!c.head_only)
            c.out += body;
        c.sent = 0;
        enter(c, Phase::Write, kWriteTimeout);
    }

    Fd listener_;
    WebConfig web_;
    const HttpHandler& handler_;
    Fd epoll_{epoll_create1(EPOLL_CLOEXEC)};
    std::unique_ptr<PasswordChecker> checker_;
    std::set<std::string> remembered_;  // SHA-256 of credentials that matched
    std::unordered_map<uint64_t, Connection> conns_;
    uint64_t next_id_ = kFirstConnection;
    size_t max_connections_ = kMaxConnections;
};

}  // namespace

Fd listen_tcp(const std::string& host, int port, const std::string& listen)
{
    addrinfo hints{}, *found = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
        throw Error("bad --listen \"" + listen + "\": \"" + host + "\" is not an IP address");
    Fd sock(socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    // SO_REUSEADDR only: a second exporter on the port must fail, not share it (SO_REUSEPORT).
    const int yes = 1;
    const int err = !sock ? errno
                    : setsockopt(sock.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes) ||
                              bind(sock.get(), found->ai_addr, found->ai_addrlen) || ::listen(sock.get(), SOMAXCONN)
                        ? errno
                        : 0;
    freeaddrinfo(found);
    if (err == EADDRINUSE)
        throw Error("cannot listen on " + listen + ": the port is in use (another exporter?)");
    if (err)
        throw Error(errno_message("cannot listen on " + listen, err));
    return sock;
}

void serve_http(Fd listener, WebConfig web, const HttpHandler& handler, const sigset_t& stop_signals)
{
    Server(std::move(listener), std::move(web), handler).run(stop_signals);
}

}  // namespace shaperctl
