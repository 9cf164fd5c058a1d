// The kernel features the datapath needs: the probes on this kernel, and the refusal's wording.
#include <gtest/gtest.h>

#include <cerrno>

#include "loader/kernel_features.h"

using namespace shaperctl;

namespace {

int present() { return 1; }
int missing() { return 0; }
int cannot_tell() { return -EPERM; }

}  // namespace

TEST(KernelFeatures, EveryProbeFindsItsFeatureOnThisKernel)
{
    // This kernel loads the datapath, so each probe must say present: a probe that fails here
    // would refuse kernels that work.
    for (const KernelFeature& f : datapath_features())
        EXPECT_EQ(f.probe(), 1) << f.name;
}

TEST(KernelFeatures, OnlyAProbeTheKernelRefusedCountsAsMissing)
{
    const std::vector<KernelFeature> features = {
        {"A", "5.12", present}, {"B", "5.12", missing}, {"C", "5.12", cannot_tell}};
    const auto lacking = missing_features(features);
    ASSERT_EQ(lacking.size(), 1u);
    EXPECT_STREQ(lacking[0]->name, "B");
}

TEST(KernelFeatures, TheSentenceNamesEachMissingFeatureAndTheVersionThatHasIt)
{
    const std::vector<KernelFeature> features = {
        {"BPF atomic fetch-and-add", "5.12", missing},
        {"BPF atomic compare-and-exchange", "5.12", missing},
        {"BPF atomic exchange", "5.12", missing},
        {"BPF global functions", "5.6", missing},
    };
    const auto one = std::vector<const KernelFeature*>{&features[0]};
    EXPECT_EQ(lacking_sentence("5.10.0-32-cloud-amd64", one),
              "this kernel (5.10.0-32-cloud-amd64) lacks BPF atomic fetch-and-add (5.12+)");
    EXPECT_EQ(lacking_sentence("5.10.0-32-cloud-amd64", {&features[0], &features[1]}),
              "this kernel (5.10.0-32-cloud-amd64) lacks BPF atomic fetch-and-add and BPF atomic "
              "compare-and-exchange (5.12+)");
    EXPECT_EQ(lacking_sentence("5.4.0", missing_features(features)),
              "this kernel (5.4.0) lacks BPF global functions (5.6+), BPF atomic fetch-and-add, BPF atomic "
              "compare-and-exchange and BPF atomic exchange (5.12+)");
    EXPECT_EQ(version_needed(missing_features(features)), "5.12");
    EXPECT_EQ(lacking_sentence("6.1.0", {}), "");
    EXPECT_EQ(version_needed({}), "");
}

TEST(KernelFeatures, TheDatapathsRefusalOn510ReadsAsTheUserSeesIt)
{
    // What 5.10 lacks, as the probes found on Debian 11's 5.10.0-32-cloud-amd64.
    std::vector<const KernelFeature*> all;
    for (const KernelFeature& f : datapath_features())
        all.push_back(&f);
    EXPECT_EQ(lacking_sentence("5.10.0-32-cloud-amd64", all),
              "this kernel (5.10.0-32-cloud-amd64) lacks BPF atomic fetch-and-add, BPF atomic "
              "compare-and-exchange, BPF atomic exchange and pointer arguments to BPF global functions "
              "(5.12+)");
}
