// Readable names for the text reports (profile/readable.hpp) and the doctor's brief text: host only.
#include "conveyor/profile/readable.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using conveyor::profile::fold_names;
using conveyor::profile::short_name;
using conveyor::profile::shorten_names;

TEST(Readable, ShortNameDropsTemplatesNamespacesAndParameters) {
  EXPECT_EQ(short_name("void cublasLt::splitKreduce_kernel<32, 16, int, float>(float*, int)"), "splitKreduce_kernel");
  EXPECT_EQ(short_name("conveyor::train::kernels::(anonymous namespace)::relu_forward(float*, int)"), "relu_forward");
  EXPECT_EQ(short_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                       "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"),
            "vectorized_elementwise_kernel");
  EXPECT_EQ(short_name("ns::axpy(const double*, double*, unsigned long)"), "axpy");
  EXPECT_EQ(short_name("gemv2T_kernel_val<int, int, float, 128, 16>"), "gemv2T_kernel_val");
}

TEST(Readable, AWrapperKernelKeepsTheArgumentThatNamesTheWork) {
  EXPECT_EQ(short_name("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"
                       "(cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)"),
            "Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>");
  EXPECT_EQ(short_name("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int>, "
                       "float>, 3>(cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int>, float>::Params)"),
            "device_kernel<GemmUniversal>");
  EXPECT_EQ(short_name("void cutlass::Kernel(int)"), "Kernel");
}

TEST(Readable, ShortNameLeavesLabelsThatAreNotKernelNames) {
  EXPECT_EQ(short_name("step 1 (f0 -> f1)"), "step 1 (f0 -> f1)");
  EXPECT_EQ(short_name("memcpy HtoD 4096 B"), "memcpy HtoD 4096 B");
  EXPECT_EQ(short_name("a < b > c"), "a < b > c");
  EXPECT_EQ(short_name(""), "");
}

TEST(Readable, ShortenNamesInsideASentence) {
  EXPECT_EQ(shorten_names("'void cub::DeviceReduceKernel<Policy, float*>(float*, int)' takes 80% of the time; "
                          "'conveyor::solve::(anonymous namespace)::spmv' 10%"),
            "'DeviceReduceKernel' takes 80% of the time; 'spmv' 10%");
  EXPECT_EQ(shorten_names("chain: void a<1>(int*), void b(float (*)(int), int) and c"), "chain: a, b and c");
  EXPECT_EQ(shorten_names("no names here: 3 < 4 and 5 > 2"), "no names here: 3 < 4 and 5 > 2");
}

TEST(Readable, FoldsRunsThatDifferOnlyInNumbers) {
  std::vector<std::string> names;
  for (int i = 1; i <= 100; ++i) names.push_back("step " + std::to_string(i) + " (f" + std::to_string(i % 2) + ")");
  const auto folded = fold_names(names);
  ASSERT_EQ(folded.size(), 1u);
  EXPECT_EQ(folded[0], "step 1 (f1) … step 100 (f0): 100 nodes");
}

TEST(Readable, KeepsShortRunsAndDistinctNamesAsTheyAre) {
  EXPECT_EQ(fold_names({"a1", "a2", "b"}), (std::vector<std::string>{"a1", "a2", "b"}));
  EXPECT_EQ(fold_names({"x", "x", "x"}), (std::vector<std::string>{"x × 3"}));
  EXPECT_EQ(fold_names({}), std::vector<std::string>{});
  EXPECT_EQ(fold_names({"void k<1>(int)", "void k<2>(int)", "k2"}), (std::vector<std::string>{"k × 2", "k2"}));
  EXPECT_EQ(fold_names({"a1", "a1", "a2"}), (std::vector<std::string>{"a1 … a2: 3 nodes"}));
}

TEST(Readable, CapsTheEntriesAndSaysHowManyMore) {
  const std::vector<std::string> names{"alpha", "beta", "gamma", "delta", "epsilon", "zeta"};
  EXPECT_EQ(fold_names(names, 4), (std::vector<std::string>{"alpha", "beta", "gamma", "delta", "and 2 more"}));
  EXPECT_EQ(fold_names(names, 6), names);
  std::vector<std::string> mixed{"log"};
  for (int i = 0; i < 5; ++i) mixed.push_back("copy " + std::to_string(i));
  mixed.push_back("log");
  EXPECT_EQ(fold_names(mixed, 2), (std::vector<std::string>{"log", "copy 0 … copy 4: 5 nodes", "and 1 more"}));
}

namespace {

// Node paths inside conditional bodies, as the doctor names them: each long label cut to its first word, the node's
// own name shortened; names outside bodies as short_name gives them.
TEST(Readable, ANodePathInsideConditionalBodiesIsShortened) {
  using conveyor::profile::short_path;
  EXPECT_EQ(short_path("while rel_res > tol && iterations < max_iter/body 0/void vector_scalar_multiply_kernel"),
            "while…/body 0/vector_scalar_multiply_kernel");
  EXPECT_EQ(short_path("loop/body 1/ns::axpy(double*, int)"), "loop/body 1/axpy");
  EXPECT_EQ(short_path("switch on the mode/body 2/inner while loop/body 0/step 3"),
            "switch…/body 2/inner…/body 0/step 3");
  EXPECT_EQ(short_path("void ns::relu(float*)"), "relu");
  EXPECT_EQ(short_path("rgb8 to float"), "rgb8 to float");
}

TEST(Readable, ASentenceQuotingNodePathsGetsTheirShortForms) {
  const std::vector<std::string> nodes{"while rel_res > tol && iterations < max_iter/body 0/void scale_kernel",
                                       "cg_check"};
  const std::string text = "gap 24.8 µs after cg_check before while rel_res > tol && iterations < max_iter/body 0/void "
                           "scale_kernel; while rel_res > tol && iterations < max_iter/body 0/cg_alpha 1.0 µs";
  EXPECT_EQ(conveyor::profile::shorten_paths(text, nodes),
            "gap 24.8 µs after cg_check before while…/body 0/scale_kernel; while…/body 0/cg_alpha 1.0 µs");
}

} // namespace
