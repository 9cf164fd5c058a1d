#include "loader/libbpf_log.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "loader/bpffs.h"
#include "loader/device.h"
#include "core/error.h"

namespace shaperctl {
namespace {

constexpr std::string_view kLogBegin = "-- BEGIN PROG LOAD LOG --\n";
constexpr std::string_view kLogEnd = "-- END PROG LOAD LOG --";

std::string g_last_message;
std::string g_verifier_last_words;
std::string g_verifier_log_file;   // where the whole log went; "" when it went nowhere
std::string g_verifier_log_error;  // why it could not go there

std::string format_whole(const char* format, va_list args)
{
    va_list measure;
    va_copy(measure, args);
    const int len = std::vsnprintf(nullptr, 0, format, measure);
    va_end(measure);
    if (len <= 0)
        return {};
    std::string text(static_cast<size_t>(len) + 1, '\0');
    std::vsnprintf(text.data(), text.size(), format, args);
    text.pop_back();
    return text;
}

bool starts_with_any(std::string_view line, std::initializer_list<std::string_view> prefixes)
{
    for (std::string_view p : prefixes)
        if (line.starts_with(p))
            return true;
    return false;
}

void write_log_file(const std::string& path, std::string_view log)
{
    g_verifier_log_file.clear();
    g_verifier_log_error.clear();
    const std::string dir = std::filesystem::path(path).parent_path();
    try {
        make_private_dir(dir, dir);  // /run/shaperctl as attach makes it
    } catch (const Error& e) {
        g_verifier_log_error = "could not keep the whole log: " + std::string(e.what());
        return;
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (out)
        out.write(log.data(), static_cast<std::streamsize>(log.size()));
    if (out.flush())
        g_verifier_log_file = path;
    else
        g_verifier_log_error = "could not write the whole log to " + path + ": " + std::strerror(errno);
}

// A message carrying a verifier log: keeps its verdict, and with SHAPERCTL_DEBUG the whole log
// in a file. Returns the message with the log replaced by a line saying where it went.
std::string take_verifier_log(const std::string& message, size_t begin, const char* debug)
{
    const size_t start = begin + kLogBegin.size();
    size_t end = message.rfind(kLogEnd);
    if (end == std::string::npos || end < start)
        end = message.size();
    const std::string_view log = std::string_view(message).substr(start, end - start);
    g_verifier_last_words = detail::verifier_last_words(log);
    std::string where = "not kept (SHAPERCTL_DEBUG unset)";
    if (debug) {
        write_log_file(detail::verifier_log_path(debug), log);
        where = g_verifier_log_file.empty() ? g_verifier_log_error : "in " + g_verifier_log_file;
    }
    return message.substr(0, begin) + "verifier log of " + std::to_string(log.size()) + " bytes " + where + "\n";
}

}  // namespace

namespace detail {

int libbpf_print(enum libbpf_print_level level, const char* format, va_list args)
{
    std::string message = format_whole(format, args);
    const char* debug = std::getenv("SHAPERCTL_DEBUG");
    if (const size_t begin = message.find(kLogBegin); begin != std::string::npos)
        message = take_verifier_log(message, begin, debug);
    if (debug)
        std::fputs(message.c_str(), stderr);
    if (level != LIBBPF_DEBUG) {
        while (!message.empty() && message.back() == '\n')
            message.pop_back();
        g_last_message = message;
    }
    return 0;
}

std::string verifier_last_words(std::string_view log)
{
    while (!log.empty()) {
        size_t cut = log.find_last_of('\n', log.size() - 1);
        std::string_view line = cut == std::string_view::npos ? log : log.substr(cut + 1);
        log = cut == std::string_view::npos ? std::string_view{} : log.substr(0, cut);
        while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
            line.remove_suffix(1);
        if (!line.empty() && !starts_with_any(line, {"processed ", "verification time ", "stack depth "}))
            return std::string(line);
    }
    return {};
}

std::string verifier_log_path(const char* debug)
{
    if (!debug)
        return {};
    if (debug[0] == '/')
        return debug;
    return std::string(kRunRoot) + "/verifier.log";
}

}  // namespace detail

void quiet_libbpf()
{
    libbpf_set_print(detail::libbpf_print);
}

std::string last_libbpf_message()
{
    return g_last_message;
}

void forget_verifier_log()
{
    g_verifier_last_words.clear();
    g_verifier_log_file.clear();
    g_verifier_log_error.clear();
}

std::string verifier_log_summary()
{
    if (g_verifier_last_words.empty())
        return {};
    std::string where;
    if (!g_verifier_log_file.empty())
        where = "whole log in " + g_verifier_log_file;
    else if (!g_verifier_log_error.empty())
        where = g_verifier_log_error;
    else
        where = "SHAPERCTL_DEBUG=1 keeps the whole log in " + detail::verifier_log_path("1");
    return ": the verifier said \"" + g_verifier_last_words + "\" (" + where + ")";
}

}  // namespace shaperctl
