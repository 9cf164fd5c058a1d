#include "loader/class_tree.h"

#include "shaper_abi.h"

namespace shaperctl {

TreeFault check_class_tree(const ClassParents& parents)
{
    for (const auto& [id, parent] : parents) {
        if (!parent)
            continue;
        TreeFault fault{TreeFault::None, id, {id}};
        if (!parents.count(parent)) {
            fault.kind = TreeFault::MissingParent;
            fault.chain.push_back(parent);
            return fault;
        }
        // find, not []: a missing ancestor is its child's fault, found in its turn.
        for (uint32_t up = parent; up; up = parents.count(up) ? parents.at(up) : 0) {
            fault.chain.push_back(up);
            if (up == id) {
                fault.kind = TreeFault::Cycle;
                return fault;
            }
            if (fault.chain.size() > SHAPER_MAX_DEPTH) {
                fault.kind = TreeFault::TooDeep;
                return fault;
            }
        }
    }
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

std::map<uint32_t, unsigned> class_depths(const ClassParents& parents)
{
    std::map<uint32_t, unsigned> depth;
    for (const auto& [id, parent] : parents) {
        unsigned d = 0;
        for (uint32_t up = parent; up && d <= parents.size(); d++) {
            auto it = parents.find(up);
            up = it == parents.end() ? 0 : it->second;
        }
        depth[id] = d;
    }
    return depth;
}

}  // namespace shaperctl
