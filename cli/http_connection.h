// One client connection of the exporter's server: its socket (under TLS or not), what it has
// sent and is sent, and the phase it is in. Reads and writes never block: they stop where the
// socket (or TLS, which may need the other direction first) would.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "loader/fd.h"

namespace shaperctl::http {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxHeadBytes = 8192;

// Idle comes first: the order in which a full server closes connections to take a new one.
enum class Phase { Idle, Handshake, Head, Auth, Write };

int eviction_rank(Phase phase);

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
    // The rest of a streamed body (next_piece); in chunks unless the client speaks HTTP/1.0.
    std::function<bool(std::string& out, size_t size)> stream;
    bool chunked = true;
    uint32_t events = 0;       // asked of epoll
    // A request waiting for its password check.
    std::string path, credential;
    bool head_only = false;
};

enum class Io { Done, Again, Closed };  // Again: retry when epoll says the socket is ready

// After a failed TLS call: Again, with `reversed` set when TLS waits for the other direction
// (a handshake message during a read, say), or Closed.
Io ssl_result(SSL* ssl, int ret, bool& reversed);

// Appends what the peer sent to c.in, up to one byte beyond the head limit.
Io read_some(Connection& c, bool& want_write);

// Sends c.out from c.sent on.
Io write_some(Connection& c, bool& want_read);

// Once c.out is sent: the next piece of c.stream in c.out (framed as a chunk, the last one
// followed by the closing chunk); false when the body was complete (c.stream is then empty).
bool next_piece(Connection& c);

}  // namespace shaperctl::http
