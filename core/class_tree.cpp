#include "core/class_tree.h"

#include <algorithm>

namespace shaperctl {
namespace {

// Sorts `items` by key(item), ascending, keeping the last item of each key (what a map filled in
// this order would hold).
template <class T, class Key>
void sort_keeping_last(std::vector<T>& items, Key key)
{
    auto before = [&](const T& a, const T& b) { return key(a) < key(b); };
    if (!std::is_sorted(items.begin(), items.end(), before))
        std::stable_sort(items.begin(), items.end(), before);
    // Reversed, unique keeps the first of each run: the last given.
    std::reverse(items.begin(), items.end());
    items.erase(std::unique(items.begin(), items.end(), [&](const T& a, const T& b) { return key(a) == key(b); }),
                items.end());
    std::reverse(items.begin(), items.end());
}

}  // namespace

ClassParents::ClassParents(std::vector<std::pair<uint32_t, uint32_t>> pairs) : pairs_(std::move(pairs))
{
    sort_keeping_last(pairs_, [](const auto& p) { return p.first; });
    const uint64_t top = pairs_.empty() ? 0 : pairs_.back().first;
    if (top > 8 * uint64_t(pairs_.size()) + 65536)
        return;  // sparse ids: searched
    place_.assign(top + 1, 0);
    for (size_t i = 0; i < pairs_.size(); i++)
        place_[pairs_[i].first] = uint32_t(i + 1);
}

size_t ClassParents::index_of(uint32_t id) const
{
    if (!place_.empty())
        return id < place_.size() && place_[id] ? place_[id] - 1 : pairs_.size();
    auto it = std::lower_bound(pairs_.begin(), pairs_.end(), id,
                               [](const auto& p, uint32_t v) { return p.first < v; });
    return it != pairs_.end() && it->first == id ? size_t(it - pairs_.begin()) : pairs_.size();
}

uint32_t ClassParents::parent_of(uint32_t id) const
{
    const size_t i = index_of(id);
    return i < pairs_.size() ? pairs_[i].second : 0;
}

TreeFault check_class_tree(const ClassParents& parents)
{
    for (const auto& [id, parent] : parents.ascending())
        if (TreeFault fault = check_chain(id, parent, parents))
            return fault;
    return {};
}

std::string TreeFault::describe() const
{
    switch (kind) {
    case None: return "";
    case MissingParent: return "no class " + std::to_string(chain.back());
    case Cycle: {
        std::string loop;
        for (uint32_t c : chain)
            loop += (loop.empty() ? "" : " -> ") + std::to_string(c);
        return "parents form a cycle (" + loop + ")";
    }
    case TooDeep:
        return "class " + std::to_string(id) + " would be more than " + std::to_string(SHAPER_MAX_DEPTH) +
               " levels deep";
    }
    return "";
}

std::vector<unsigned> class_depths(const ClassParents& parents)
{
    std::vector<unsigned> depth;
    depth.reserve(parents.size());
    for (const auto& [id, parent] : parents.ascending()) {
        unsigned d = 0;
        for (uint32_t up = parent; up && d <= parents.size(); d++)
            up = parents.parent_of(up);
        depth.push_back(d);
    }
    return depth;
}

}  // namespace shaperctl
