// The class tree and apply's plan on their own: the same answers whether class ids are compact
// (looked up in a table by id) or far apart (searched), and of an id given twice the last.
#include <gtest/gtest.h>

#include "core/class_tree.h"
#include "core/plan.h"
#include "shaper_abi.h"

using shaperctl::ClassParents;
using shaperctl::TreeFault;

namespace {

// The same tree with its ids spread `stride` apart: 1 -> stride, 2 -> 2 * stride, ...
ClassParents spread(const std::vector<std::pair<uint32_t, uint32_t>>& tree, uint32_t stride)
{
    std::vector<std::pair<uint32_t, uint32_t>> out;
    for (const auto& [id, parent] : tree)
        out.push_back({id * stride, parent * stride});
    return ClassParents(out);
}

const uint32_t kStrides[] = {1, 1'000'000};  // a table by id; a search (ids up to 4e9)

TEST(ClassTree, DepthsFaultsAndLookupsAlikeForCompactAndSparseIds)
{
    for (const uint32_t s : kStrides) {
        // Given out of order: 3 under 2 under 1, 4 at the top.
        const ClassParents tree = spread({{3, 2}, {1, 0}, {4, 0}, {2, 1}}, s);
        ASSERT_EQ(tree.size(), 4u);
        EXPECT_EQ(tree.ascending().front().first, 1 * s) << "ascending id";
        EXPECT_EQ(tree.parent_of(3 * s), 2 * s);
        EXPECT_EQ(tree.parent_of(5 * s), 0u) << "unknown: no parent";
        EXPECT_FALSE(tree.has(5 * s));
        EXPECT_EQ(tree.index_of(5 * s), tree.size());
        EXPECT_EQ(shaperctl::class_depths(tree), (std::vector<unsigned>{0, 1, 2, 0})) << s;
        EXPECT_FALSE(check_class_tree(tree));

        const TreeFault missing = check_class_tree(spread({{1, 0}, {2, 7}}, s));
        EXPECT_EQ(missing.kind, TreeFault::MissingParent);
        EXPECT_EQ(missing.chain, (std::vector<uint32_t>{2 * s, 7 * s}));
        const TreeFault cycle = check_class_tree(spread({{1, 2}, {2, 1}}, s));
        EXPECT_EQ(cycle.kind, TreeFault::Cycle);
        EXPECT_EQ(cycle.id, 1 * s);
        std::vector<std::pair<uint32_t, uint32_t>> chain{{1, 0}};
        for (uint32_t id = 2; id <= SHAPER_MAX_DEPTH + 1; id++)
            chain.push_back({id, id - 1});
        EXPECT_EQ(check_class_tree(spread(chain, s)).kind, TreeFault::TooDeep);
        chain.pop_back();
        EXPECT_FALSE(check_class_tree(spread(chain, s))) << SHAPER_MAX_DEPTH << " levels are allowed";
    }
}

TEST(ClassTree, OfAnIdGivenTwiceTheLastCounts)
{
    for (const uint32_t s : kStrides) {
        const ClassParents tree = spread({{2, 0}, {1, 0}, {2, 1}, {3, 2}, {2, 0}}, s);
        EXPECT_EQ(tree.size(), 3u);
        EXPECT_EQ(tree.parent_of(2 * s), 0u);
        EXPECT_EQ(shaperctl::class_depths(tree), (std::vector<unsigned>{0, 0, 1}));
    }
}

// Classes added parents first and deleted children first, each in ascending id within a depth,
// whatever order the configurations list them in; unchanged classes make no step.
TEST(ConfigPlan, ClassesInTreeOrderAndOnlyWhatChanged)
{
    using Kind = shaperctl::ConfigStep::Kind;
    for (const uint32_t s : kStrides) {
        auto cls = [&](uint32_t id, uint32_t parent, uint64_t rate = 1'000'000) {
            shaperctl::ClassSpec c;
            c.id = id * s;
            c.parent = parent * s;
            c.rate_bps = rate;
            return c;
        };
        shaperctl::ShaperConfig current, desired;
        current.classes = {cls(1, 0), cls(2, 1), cls(3, 2), cls(4, 0), cls(8, 0)};
        desired.classes = {cls(7, 6), cls(5, 4), cls(6, 1), cls(4, 0, 2'000'000), cls(1, 0), cls(8, 0)};
        const auto steps = shaperctl::plan_config(current, desired);
        std::vector<std::pair<Kind, uint32_t>> got;
        for (const auto& step : steps)
            got.push_back({step.kind, (step.kind == Kind::DeleteClass ? step.before : step.after).id / s});
        const std::vector<std::pair<Kind, uint32_t>> want{
            {Kind::ChangeClass, 4}, {Kind::AddClass, 5}, {Kind::AddClass, 6}, {Kind::AddClass, 7},
            {Kind::DeleteClass, 3}, {Kind::DeleteClass, 2}};
        EXPECT_EQ(got, want) << "stride " << s;
        EXPECT_EQ(steps[0].before.rate_bps, 1'000'000u);
        EXPECT_TRUE(shaperctl::plan_config(desired, desired).empty());
    }
}

}  // namespace
