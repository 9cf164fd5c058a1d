// Rows of cells printed as aligned columns: each cell padded to its column's widest, two spaces
// between columns, none after the last. The cells are kept packed in one string (100,000 rows of
// 14 cells take a few MB), since no column's width is known before the last row.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "text_sink.h"

namespace shaperctl {

class Columns {
public:
    void row(std::initializer_list<std::string_view> cells);  // the first row is the header
    void write(TextSink& out) const;
    std::string text() const;
    bool empty() const { return row_cells_.empty(); }

private:
    std::string cells_;              // every cell, each ended by '\0'
    std::vector<uint16_t> row_cells_;  // how many cells each row has
    std::vector<size_t> width_;
};

}  // namespace shaperctl
