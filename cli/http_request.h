// HTTP/1.x as the exporter's server speaks it: the request head it reads (request line and
// header fields, no body) and the response head it writes.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>

namespace shaperctl::http {

struct Request {
    std::string method, path, version;  // path without its query string
    std::unordered_map<std::string, std::string> headers;  // names in lower case

    // A header field's value, "" when absent.
    std::string header(const std::string& name) const;
};

// The head (request line and header lines, CRLF-separated, without the final blank line); false
// when it is not HTTP/1.x.
bool parse_head(const std::string& head, Request& r);

// The status line and header fields of a response, through the blank line. A body of
// `content_length` bytes follows (Content-Type only when there is one); 401 asks for basic
// credentials, 405 names the allowed methods.
std::string response_head(int status, const std::string& content_type, size_t content_length,
                          bool close_after);
// The same for a body of unknown length, sent in chunks, or else (to a HTTP/1.0 client, whose
// connection closes after it) ending where the connection closes.
std::string streamed_response_head(int status, const std::string& content_type, bool chunked, bool close_after);

std::string lower(std::string s);
std::string trim(const std::string& s);  // spaces and tabs on both ends

}  // namespace shaperctl::http
