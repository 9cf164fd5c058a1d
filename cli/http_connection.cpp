#include "http_connection.h"

#include <openssl/err.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

namespace shaperctl::http {

int eviction_rank(Phase phase)
{
    return phase == Phase::Idle ? 0 : phase == Phase::Write ? 2 : 1;
}

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

bool next_piece(Connection& c)
{
    constexpr size_t kPieceBytes = 256 * 1024;
    constexpr size_t kChunkHeadRoom = 16;  // hexadecimal size, CRLF
    c.sent = 0;
    if (!c.stream) {
        c.out.clear();
        return false;
    }
    const size_t room = c.chunked ? kChunkHeadRoom : 0;
    c.out.resize(room);
    const bool more = c.stream(c.out, kPieceBytes);
    if (!more)
        c.stream = nullptr;
    if (c.chunked) {
        // The chunk's head goes just before its data, in the room left for it: nothing is moved.
        const size_t size = c.out.size() - room;
        char head[kChunkHeadRoom];
        const int len = size ? std::snprintf(head, sizeof head, "%zx\r\n", size) : 0;
        c.sent = room - size_t(len);
        std::memcpy(c.out.data() + c.sent, head, size_t(len));
        if (size)
            c.out += "\r\n";
        if (!more)
            c.out += "0\r\n\r\n";
    }
    return true;
}

}  // namespace shaperctl::http
