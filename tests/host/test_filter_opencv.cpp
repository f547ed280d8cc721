// First link of the filter scenario's chain of trust (host only, links OpenCV): the plain CPU implementation of
// the chain in double precision (scenarios/filter/cpu_reference) equals OpenCV's on the real photographs of
// ../shared/data/images: the decoder equals cv::imread, the resize cv::resize(INTER_LINEAR), and every stage
// (cv::transform to grey, cv::GaussianBlur, cv::Sobel, cv::magnitude, cv::threshold, cv::addWeighted), all with
// BORDER_REPLICATE and the same kernel size and sigma. In double the planes agree to rounding (1e-9 grey levels)
// and the 8-bit outputs to at most 1 grey level. OpenCV's float (CV_32F) chain, the precision of the GPU chain, is
// also held to the tolerances the GPU test uses against the same reference.

#include "support/filter_images.hpp"

#include "filter/cpu_reference.hpp"
#include "filter/image_io.hpp"
#include "filter/params.hpp"
#include "filter/resize.hpp"

#include <gtest/gtest.h>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cmath>
#include <string>
#include <vector>

using namespace conveyor::filter;
using conveyor::test::shared_images;

namespace {

// Tolerances of a float (single precision) chain against the double reference, in grey levels: the GPU test uses
// the same values (tests/gpu/test_filter.cu). See docs/filter.md for the error estimate behind them.
constexpr double float_tolerance_smooth = 2e-3;   // grey, blurred, colour blurred (values in [0, 255])
constexpr double float_tolerance_gradient = 1e-2; // Sobel x, y and magnitude (values up to 4 * 255 * sqrt(2))
constexpr double edge_margin = 0.05;              // edges may flip only this close to the threshold

cv::Mat as_mat(const image& img) {
  return cv::Mat(img.height, img.width, img.channels == 3 ? CV_8UC3 : CV_8UC1,
                 const_cast<std::uint8_t*>(img.pixels.data()))
      .clone();
}

std::vector<double> values_of(const cv::Mat& m) {
  cv::Mat d;
  m.convertTo(d, CV_MAKETYPE(CV_64F, m.channels()));
  const cv::Mat flat = d.reshape(1, 1);
  return {flat.ptr<double>(0), flat.ptr<double>(0) + flat.total()};
}

std::vector<std::uint8_t> bytes_of(const cv::Mat& m) {
  const cv::Mat flat = m.clone().reshape(1, 1);
  return {flat.ptr<std::uint8_t>(0), flat.ptr<std::uint8_t>(0) + flat.total()};
}

//! OpenCV's version of the chain, in `depth` (CV_64F or CV_32F).
struct opencv_chain {
  cv::Mat grey, blurred, gx, gy, mag, colour_blurred, edges8, sharp8;
};

opencv_chain run_opencv(const image& rgb, const filter_params& p, int depth) {
  opencv_chain c;
  cv::Mat rgb_f;
  as_mat(rgb).convertTo(rgb_f, CV_MAKETYPE(depth, 3));
  cv::transform(rgb_f, c.grey, cv::Matx13d(0.299, 0.587, 0.114));
  const int k = 2 * gaussian_radius(p.sigma) + 1;
  cv::GaussianBlur(c.grey, c.blurred, cv::Size(k, k), p.sigma, p.sigma, cv::BORDER_REPLICATE);
  cv::Sobel(c.blurred, c.gx, depth, 1, 0, 3, 1.0, 0.0, cv::BORDER_REPLICATE);
  cv::Sobel(c.blurred, c.gy, depth, 0, 1, 3, 1.0, 0.0, cv::BORDER_REPLICATE);
  cv::magnitude(c.gx, c.gy, c.mag);
  cv::Mat edges;
  cv::threshold(c.mag, edges, p.threshold, 255.0, cv::THRESH_BINARY);
  edges.convertTo(c.edges8, CV_8U);
  const int kc = 2 * gaussian_radius(p.unsharp_sigma) + 1;
  cv::GaussianBlur(rgb_f, c.colour_blurred, cv::Size(kc, kc), p.unsharp_sigma, p.unsharp_sigma, cv::BORDER_REPLICATE);
  cv::Mat sharp;
  cv::addWeighted(rgb_f, 1.0 + p.unsharp_amount, c.colour_blurred, -p.unsharp_amount, 0.0, sharp);
  sharp.convertTo(c.sharp8, CV_8UC3);
  return c;
}

//! Counts the edge pixels that differ, split by whether the reference magnitude is within `margin` of t.
std::pair<std::size_t, std::size_t> edge_flips(const std::vector<std::uint8_t>& a, const chain_reference& ref, double t,
                                               double margin) {
  std::size_t near = 0;
  std::size_t far = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != ref.edges.pixels[i]) (std::fabs(ref.magnitude.values[i] - t) <= margin ? near : far) += 1;
  return {near, far};
}

const filter_params parameter_sets[] = {
    filter_params{},                                                                             // the defaults
    filter_params{.sigma = 2.5, .threshold = 40.0, .unsharp_sigma = 1.0, .unsharp_amount = 1.5}, // other radii
};

} // namespace

TEST(FilterOpenCV, GaussianKernelEqualsGetGaussianKernel) {
  for (const double sigma : {0.3, 0.8, 1.0, 1.5, 2.0, 2.5, 4.0, 10.0}) {
    const std::vector<double> ours = gaussian_kernel(sigma);
    const cv::Mat theirs = cv::getGaussianKernel(static_cast<int>(ours.size()), sigma, CV_64F);
    ASSERT_EQ(theirs.total(), ours.size());
    for (std::size_t i = 0; i < ours.size(); ++i)
      EXPECT_NEAR(ours[i], theirs.at<double>(static_cast<int>(i)), 1e-15) << "sigma " << sigma << " tap " << i;
  }
  EXPECT_THROW((void)gaussian_kernel(11.0), std::invalid_argument);
  EXPECT_THROW((void)gaussian_kernel(0.0), std::invalid_argument);
}

TEST(FilterOpenCV, DecoderEqualsImread) {
  CONVEYOR_REQUIRE_IMAGES();
  for (const auto& s : conveyor::test::shared_image_list) {
    const auto path = shared_images() / s.file;
    const image ours = read_image(path);
    cv::Mat bgr = cv::imread(path.string(), cv::IMREAD_COLOR);
    ASSERT_FALSE(bgr.empty()) << s.file;
    cv::Mat rgb;
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    EXPECT_EQ(bytes_of(rgb), ours.pixels) << s.file;
  }
}

TEST(FilterOpenCV, BilinearResizeWithinOneGreyLevelOfCvResize) {
  CONVEYOR_REQUIRE_IMAGES();
  for (const auto& s : conveyor::test::shared_image_list) {
    const image src = read_image(shared_images() / s.file);
    for (const auto [w, h] : {std::pair{512, 512}, std::pair{1920, 1080}, std::pair{333, 777}}) {
      const image ours = resize_bilinear(src, w, h);
      cv::Mat theirs;
      cv::resize(as_mat(src), theirs, cv::Size(w, h), 0, 0, cv::INTER_LINEAR);
      const auto d = max_abs_difference(ours.pixels, bytes_of(theirs));
      EXPECT_LE(d.value, 1.0) << s.file << " to " << w << "x" << h << " at sample " << d.index;
    }
  }
}

TEST(FilterOpenCV, CpuReferenceEqualsOpenCvOnTheRealImages) {
  CONVEYOR_REQUIRE_IMAGES();
  for (const auto& p : parameter_sets) {
    for (const auto& s : conveyor::test::shared_image_list) {
      SCOPED_TRACE(std::string(s.file) + " sigma " + std::to_string(p.sigma) + " threshold " +
                   std::to_string(p.threshold));
      const image rgb = read_image(shared_images() / s.file);
      const chain_reference ref = run_reference(rgb, p);
      const opencv_chain cv64 = run_opencv(rgb, p, CV_64F);
      // Double against double: the same computation up to summation order.
      const struct {
        const char* name;
        const cv::Mat& theirs;
        const plane& ours;
      } planes[] = {
          {"grey", cv64.grey, ref.grey},          {"blurred", cv64.blurred, ref.blurred},
          {"sobel x", cv64.gx, ref.gradient_x},   {"sobel y", cv64.gy, ref.gradient_y},
          {"magnitude", cv64.mag, ref.magnitude}, {"colour blurred", cv64.colour_blurred, ref.colour_blurred}};
      for (const auto& pl : planes) {
        const auto d = max_abs_difference(values_of(pl.theirs), pl.ours.values);
        EXPECT_LE(d.value, 1e-9) << pl.name << " at sample " << d.index;
      }
      // 8-bit outputs: at most 1 grey level (edges: only where the magnitude is at the threshold to rounding).
      EXPECT_LE(max_abs_difference(bytes_of(cv64.sharp8), ref.sharp.pixels).value, 1.0) << "sharpened";
      cv::Mat blurred8;
      cv64.blurred.convertTo(blurred8, CV_8U);
      EXPECT_LE(max_abs_difference(bytes_of(blurred8), to_image(ref.blurred).pixels).value, 1.0) << "blurred 8-bit";
      cv::Mat mag8;
      cv64.mag.convertTo(mag8, CV_8U);
      EXPECT_LE(max_abs_difference(bytes_of(mag8), to_image(ref.magnitude).pixels).value, 1.0) << "magnitude 8-bit";
      const auto [near, far] = edge_flips(bytes_of(cv64.edges8), ref, p.threshold, 1e-9);
      EXPECT_EQ(far, 0U) << "edges differ away from the threshold";
      EXPECT_LE(near, ref.edges.pixels.size() / 10000) << "edges equal to the threshold to rounding";
    }
  }
}

TEST(FilterOpenCV, FloatChainStaysWithinTheGpuTolerancesOfTheReference) {
  CONVEYOR_REQUIRE_IMAGES();
  for (const auto& s : conveyor::test::shared_image_list) {
    SCOPED_TRACE(s.file);
    const filter_params p;
    const image rgb = read_image(shared_images() / s.file);
    const chain_reference ref = run_reference(rgb, p);
    const opencv_chain cv32 = run_opencv(rgb, p, CV_32F);
    const struct {
      const char* name;
      const cv::Mat& theirs;
      const plane& ours;
      double tolerance;
    } planes[] = {{"grey", cv32.grey, ref.grey, float_tolerance_smooth},
                  {"blurred", cv32.blurred, ref.blurred, float_tolerance_smooth},
                  {"sobel x", cv32.gx, ref.gradient_x, float_tolerance_gradient},
                  {"sobel y", cv32.gy, ref.gradient_y, float_tolerance_gradient},
                  {"magnitude", cv32.mag, ref.magnitude, float_tolerance_gradient},
                  {"colour blurred", cv32.colour_blurred, ref.colour_blurred, float_tolerance_smooth}};
    for (const auto& pl : planes) {
      const auto d = max_abs_difference(values_of(pl.theirs), pl.ours.values);
      EXPECT_LE(d.value, pl.tolerance) << pl.name << " at sample " << d.index;
      std::printf("  %-22s %-15s float vs double: max |difference| %.3g grey levels\n", s.file, pl.name, d.value);
    }
    const output_check c =
        check_outputs(image{rgb.width, rgb.height, 1, bytes_of(cv32.edges8)},
                      image{rgb.width, rgb.height, 3, bytes_of(cv32.sharp8)}, ref, p.threshold, edge_margin);
    EXPECT_TRUE(c.ok()) << c.summary();
  }
}
