// Text written in small pieces and handed on in large ones: to a stream every 64 KiB (printing
// 60 MB of status holds 64 KiB of it), or kept whole when there is no stream.
#pragma once

#include <charconv>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace shaperctl {

class TextSink {
public:
    TextSink() = default;  // keeps the text: take()
    explicit TextSink(std::ostream& out) : out_(&out) { text_.reserve(kFlushAt + 4096); }
    TextSink(const TextSink&) = delete;
    TextSink& operator=(const TextSink&) = delete;
    ~TextSink() { flush(); }

    TextSink& operator<<(std::string_view s)
    {
        text_.append(s);
        if (out_ && text_.size() >= kFlushAt)
            flush();
        return *this;
    }
    TextSink& operator<<(char c) { return *this << std::string_view(&c, 1); }
    template <typename Int>
        requires std::is_integral_v<Int>
    TextSink& operator<<(Int n)
    {
        char digits[24];
        return *this << std::string_view(digits, size_t(std::to_chars(digits, digits + sizeof digits, n).ptr - digits));
    }

    void flush()
    {
        if (out_ && !text_.empty()) {
            out_->write(text_.data(), std::streamsize(text_.size()));
            text_.clear();
        }
    }
    std::string take() { return std::move(text_); }

private:
    static constexpr size_t kFlushAt = 64 * 1024;
    std::ostream* out_ = nullptr;
    std::string text_;
};

// The whole text a status writer (StatusJsonWriter, StatusTableWriter) makes of a status it is
// given at once: head(), add() for each class, end().
template <typename Writer, typename Status>
std::string whole_text(const Status& status)
{
    TextSink text;
    Writer writer(text);
    writer.head(status);
    for (const auto& c : status.classes)
        writer.add(c);
    writer.end();
    return text.take();
}

}  // namespace shaperctl
