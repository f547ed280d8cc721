// Library kernels in graph files: a cuBLAS GEMM captured into a graph is saved with the images CUPTI's module-load
// callback recorded (profile::module_images, made before cuBLAS loads its modules) and loads, in buffers load
// allocates, into a graph that computes the same bits, with no registry; without the recorder its kernels have no
// image, and load refuses them by name with the fix.
#include "gpu_test_util.hpp"

#include <conveyor/conveyor.hpp>
#include <conveyor/keep/inspect.hpp>
#include <conveyor/keep/load.hpp>
#include <conveyor/keep/round_trip.hpp>
#include <conveyor/keep/save.hpp>
#include <conveyor/libraries/cublas.hpp>
#include <conveyor/profile/module_images.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <random>

namespace {

using conveyor::test::device_array;

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0F, 1.0F);
  std::vector<float> out(n);
  for (auto& v : out) v = d(rng);
  return out;
}

struct gemm_case {
  static constexpr int m = 256;
  device_array<float> a{random_floats(m * m, 1)};
  device_array<float> b{random_floats(m * m, 2)};
  device_array<float> c{std::vector<float>(m * m, 0.0F)};
  conveyor::stream s;
  conveyor::libraries::cublas_handle handle{s};
  conveyor::graph g;
  gemm_case() {
    g = conveyor::capture(s, [&](const conveyor::stream& cs) {
      handle.bind(cs);
      const float one = 1.0F;
      const float zero = 0.0F;
      conveyor::libraries::check_cublas(
          cublasSgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a.get(), m, b.get(), m, &zero, c.get(), m),
          "cublasSgemm");
    });
  }
};

TEST(GraphFileLibraries, CublasKernelsSaveWithTheImagesCuptiRecordedAndReplayBitwiseEqual) {
  CONVEYOR_REQUIRE_GPU();
  const auto t0 = std::chrono::steady_clock::now();
  // before cuBLAS loads its modules; skips under another CUPTI tool (compute-sanitizer)
  CONVEYOR_START_CUPTI_SUBSCRIBER(conveyor::profile::module_images, recorder);
  gemm_case g;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  conveyor::save_options o;
  o.images = {&recorder};
  const conveyor::graph_file f = conveyor::to_graph_file({{"gemm", &g.g, nullptr}}, o);
  std::size_t with_image = 0;
  for (const auto& k : f.kernels) with_image += k.image ? 1 : 0;
  std::cout << "module_images: " << recorder.modules() << " modules, " << recorder.bytes() << " bytes recorded; "
            << f.kernels.size() << " kernels in the GEMM graph, " << with_image << " with an image; set-up " << seconds
            << " s\n"
            << conveyor::summary(f);
  EXPECT_EQ(with_image, f.kernels.size()) << conveyor::summary(f);
  const auto report = conveyor::check_round_trip({"gemm", &g.g, nullptr}, o, g.s.get());
  EXPECT_TRUE(report.bitwise_equal()) << report.first_difference;
}

TEST(GraphFileLibraries, WithoutTheRecorderLibraryKernelsAreRefusedAtLoadByName) {
  CONVEYOR_REQUIRE_GPU();
  gemm_case g;
  const conveyor::graph_file f = conveyor::to_graph_file({{"gemm", &g.g, nullptr}});
  try {
    (void)conveyor::load(f);
    ADD_FAILURE() << "loaded library kernels with no image and no registry";
  } catch (const conveyor::load_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be found"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("profile::module_images"), std::string::npos) << e.what();
  }
}

} // namespace
