// The exporter's HTTP/1.1 server (TLS and basic auth per --web-config). One thread serves every
// connection from an epoll loop, so no client can hold a thread: a request's head (TLS handshake
// included) must arrive within the head timeout (--head-timeout, 10 s by default) and fit in
// 8 kB, a response must be taken within 30 s, keep-alive connections idle for 2 min are closed,
// and at most 512 connections are open: a new one closes an old one, idle keep-alive
// connections first, then those still sending their request (oldest first). bcrypt checks run
// on a second thread, so wrong passwords cannot stall the loop; credentials that matched are
// remembered. A streamed body is made a piece at a time as its socket drains: a connection holds
// one piece of it.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <string>

#include "exporter_web_config.h"
#include "loader/fd.h"

namespace shaperctl {

// A body appends its next piece of about `size` bytes to `out`; false after its last piece.
using BodyStream = std::function<bool(std::string& out, size_t size)>;

struct HttpResponse {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
    // A body too big to hold whole instead: written a piece at a time as the client takes it,
    // in chunks (Transfer-Encoding: chunked), or to a HTTP/1.0 client until the connection closes.
    BodyStream stream;
};

// GET or HEAD of `path` (query string removed) -> response.
using HttpHandler = std::function<HttpResponse(const std::string& path)>;

// A listening TCP socket on host:port (`listen` names it in errors), non-blocking.
Fd listen_tcp(const std::string& host, int port, const std::string& listen);

// Serves `listener` until one of `stop_signals` arrives; the caller blocks them in every thread.
void serve_http(Fd listener, WebConfig web, const HttpHandler& handler, const sigset_t& stop_signals,
                std::chrono::steady_clock::duration head_timeout);

}  // namespace shaperctl
