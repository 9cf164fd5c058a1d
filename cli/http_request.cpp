#include "http_request.h"

#include <algorithm>
#include <cctype>

namespace shaperctl::http {
namespace {

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

}  // namespace

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

std::string Request::header(const std::string& name) const
{
    const auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
}

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

namespace {

// `length`: the Content-Length line, or the Transfer-Encoding line of a streamed body, or none.
std::string head_of(int status, const std::string& content_type, bool typed, const std::string& length, bool close_after)
{
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
    if (typed)
        head += "Content-Type: " + content_type + "\r\n";
    head += length;
    if (status == 401)
        head += "WWW-Authenticate: Basic realm=\"shaperctl\", charset=\"UTF-8\"\r\n";
    if (status == 405)
        head += "Allow: GET, HEAD\r\n";
    if (close_after)
        head += "Connection: close\r\n";
    head += "\r\n";
    return head;
}

}  // namespace

std::string response_head(int status, const std::string& content_type, size_t content_length,
                          bool close_after)
{
    return head_of(status, content_type, content_length > 0,
                "Content-Length: " + std::to_string(content_length) + "\r\n", close_after);
}

std::string streamed_response_head(int status, const std::string& content_type, bool chunked, bool close_after)
{
    return head_of(status, content_type, true, chunked ? "Transfer-Encoding: chunked\r\n" : "", close_after);
}

}  // namespace shaperctl::http
