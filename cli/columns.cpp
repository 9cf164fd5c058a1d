#include "columns.h"

#include <algorithm>

namespace shaperctl {

void Columns::row(std::initializer_list<std::string_view> cells)
{
    width_.resize(std::max(width_.size(), cells.size()));
    size_t i = 0;
    for (std::string_view cell : cells) {
        width_[i] = std::max(width_[i], cell.size());
        cells_.append(cell);
        cells_ += '\0';
        i++;
    }
    row_cells_.push_back(uint16_t(cells.size()));
}

void Columns::write(TextSink& out) const
{
    static const std::string spaces(256, ' ');
    size_t at = 0;
    for (uint16_t n : row_cells_) {
        for (uint16_t i = 0; i < n; i++) {
            const size_t end = cells_.find('\0', at);
            out << std::string_view(cells_).substr(at, end - at);
            if (i + 1 < n)
                for (size_t pad = width_[i] - (end - at) + 2; pad > 0;) {
                    const size_t some = std::min(pad, spaces.size());
                    out << std::string_view(spaces).substr(0, some);
                    pad -= some;
                }
            at = end + 1;
        }
        out << '\n';
    }
}

std::string Columns::text() const
{
    TextSink text;
    write(text);
    return text.take();
}

}  // namespace shaperctl
