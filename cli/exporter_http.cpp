#include "exporter_http.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "http_auth.h"
#include "http_connection.h"
#include "http_request.h"
#include "core/error.h"

namespace shaperctl {
namespace {

using http::Clock;
using http::Connection;
using http::Io;
using http::kMaxHeadBytes;
using http::PasswordChecker;
using http::Phase;

constexpr size_t kMaxConnections = 512;
constexpr auto kWriteTimeout = std::chrono::seconds(30);  // the whole response
constexpr auto kIdleTimeout = std::chrono::minutes(2);    // keep-alive between requests
constexpr size_t kRememberedCredentials = 64;

// epoll tags; connections are numbered from kFirstConnection.
constexpr uint64_t kListenerTag = 0, kSignalTag = 1, kAuthTag = 2, kFirstConnection = 16;

class Server {
public:
    Server(Fd listener, WebConfig web, const HttpHandler& handler, Clock::duration head_timeout)
        : listener_(std::move(listener)), web_(std::move(web)), handler_(handler), head_timeout_(head_timeout)
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

    void enter(Connection& c, Phase phase, Clock::duration timeout)
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
            enter(c, Phase::Head, head_timeout_);
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
                std::make_pair(http::eviction_rank(it->second.phase), it->second.since) <
                    std::make_pair(http::eviction_rank(victim->second.phase), victim->second.since))
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
                if (http::ssl_result(c.ssl.get(), ret, reversed) == Io::Closed)
                    return close(id);
                return watch(id, c, reversed ? EPOLLOUT : EPOLLIN);
            }
            case Phase::Idle:
            case Phase::Head: {
                const Io io = http::read_some(c, reversed);
                if (c.phase == Phase::Idle && !c.in.empty())
                    enter(c, Phase::Head, head_timeout_);
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
                const Io io = http::write_some(c, reversed);
                if (io == Io::Closed)
                    return close(id);
                if (io == Io::Again)
                    return watch(id, c, reversed ? EPOLLIN : EPOLLOUT);
                if (http::next_piece(c))
                    continue;  // more of a streamed body
                if (c.close_after)
                    return close(id);
                std::string().swap(c.out);  // an idle connection holds no piece of a scrape
                enter(c, Phase::Idle, kIdleTimeout);
                continue;  // a pipelined request may be in c.in already
            }
            }
        }
    }

    // c.in starts with a complete head of `end` bytes (then CRLF CRLF).
    void request(uint64_t id, Connection& c, size_t end)
    {
        http::Request r;
        c.head_only = false;
        const bool parsed = http::parse_head(c.in.substr(0, end), r);
        c.in.erase(0, end + 4);
        if (!parsed)
            return respond(c, 400, "not an HTTP/1.1 request\n", true);
        // Scrapes send no body; one that would follow is refused, not read.
        const std::string length = r.header("content-length");
        if (r.headers.count("transfer-encoding") || !(length.empty() || length == "0"))
            return respond(c, 413, "no request body accepted\n", true);
        c.close_after = r.version == "HTTP/1.0" || http::lower(r.header("connection")).find("close") != std::string::npos;
        c.chunked = r.version != "HTTP/1.0";
        c.head_only = r.method == "HEAD";
        if (r.method != "GET" && r.method != "HEAD")
            return respond(c, 405, "GET or HEAD only\n", c.close_after);
        if (!web_.users.empty()) {
            const std::string credentials = http::basic_credentials(r.header("authorization"));
            if (credentials.empty())
                return respond(c, 401, "", c.close_after);
            c.credential = http::credential_key(credentials);
            if (!remembered_.count(c.credential)) {
                const size_t colon = credentials.find(':');
                const auto user = web_.users.find(credentials.substr(0, colon));
                checker_->submit(id, credentials.substr(colon + 1),
                                 user == web_.users.end() ? "" : user->second, web_.users.begin()->second);
                c.path = r.path;
                enter(c, Phase::Auth, head_timeout_);
                return;
            }
        }
        serve(c, r.path);
    }

    void serve(Connection& c, const std::string& path)
    {
        HttpResponse res = handler_(path);
        respond(c, res.status, std::move(res.body), c.close_after, res.content_type, std::move(res.stream));
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

    void respond(Connection& c, int status, std::string body, bool close_after,
                 const std::string& content_type = "text/plain; charset=utf-8", BodyStream stream = {})
    {
        c.close_after = close_after;
        c.sent = 0;
        if (stream) {
            c.out = http::streamed_response_head(status, content_type, c.chunked, close_after);
            if (!c.head_only)
                c.stream = std::move(stream);
        } else {
            // The head goes in front of the body where it lies: the body is not copied.
            const std::string head = http::response_head(status, content_type, body.size(), close_after);
            c.out = c.head_only ? head : std::move(body.insert(0, head));
        }
        enter(c, Phase::Write, kWriteTimeout);
    }

    Fd listener_;
    WebConfig web_;
    const HttpHandler& handler_;
    const Clock::duration head_timeout_;  // from accept (TLS handshake included), or first byte
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

void serve_http(Fd listener, WebConfig web, const HttpHandler& handler, const sigset_t& stop_signals,
                Clock::duration head_timeout)
{
    Server(std::move(listener), std::move(web), handler, head_timeout).run(stop_signals);
}

}  // namespace shaperctl
