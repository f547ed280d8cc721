// Host-only tests of the `train` scenario: the IDX gzip reader and its error messages, the Fashion-MNIST loader,
// and the host pieces of training (He init, parameter packing, per-epoch permutations, and the double-precision
// CPU reference checked against finite differences).
#include "train/dataset.hpp"
#include "train/idx_reader.hpp"
#include "train/parameters.hpp"
#include "train/reference_cpu.hpp"
#include "train/trainer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace conveyor::train;
using bytes = std::vector<std::uint8_t>;

void put_u32(bytes& b, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<std::uint8_t>(v >> shift));
}

bytes images_idx(std::uint32_t count, std::uint32_t rows, std::uint32_t cols, const bytes& pixels,
                 std::uint32_t magic = idx_images_magic) {
  bytes b;
  put_u32(b, magic);
  put_u32(b, count);
  put_u32(b, rows);
  put_u32(b, cols);
  b.insert(b.end(), pixels.begin(), pixels.end());
  return b;
}

bytes labels_idx(std::uint32_t count, const bytes& labels, std::uint32_t magic = idx_labels_magic) {
  bytes b;
  put_u32(b, magic);
  put_u32(b, count);
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

void write_gz(const fs::path& path, const bytes& data) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!data.empty())
    ASSERT_EQ(gzwrite(f, data.data(), static_cast<unsigned>(data.size())), static_cast<int>(data.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

void write_raw(const fs::path& path, const bytes& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(out.good()) << path;
}

bytes read_raw(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bytes sequence(std::size_t n) {
  bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>((i * 7 + 3) % 256);
  return b;
}

// Fresh temporary folder per test, removed afterwards.
class IdxFiles : public ::testing::Test {
protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("conveyor_test_idx_") + info->name() + "_" + std::to_string(static_cast<long>(::getpid())));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  [[nodiscard]] fs::path file(const std::string& name) const { return dir_ / name; }

  // Runs `f`, expects an idx_error whose message contains the file name and every one of `words`.
  template <class F>
  void expect_idx_error(F&& f, const fs::path& path, std::initializer_list<const char*> words) {
    try {
      f();
      ADD_FAILURE() << "no idx_error for " << path;
    } catch (const idx_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path.string()), std::string::npos) << what;
      EXPECT_EQ(e.path(), path);
      for (const char* w : words) EXPECT_NE(what.find(w), std::string::npos) << "missing '" << w << "' in: " << what;
    }
  }

  fs::path dir_;
};

TEST_F(IdxFiles, ReadsImagesAndLabels) {
  const bytes pixels = sequence(3 * 4 * 5);
  write_gz(file("img.gz"), images_idx(3, 4, 5, pixels));
  write_gz(file("lbl.gz"), labels_idx(3, {7, 0, 9}));
  const idx_images images = read_idx_images(file("img.gz"));
  EXPECT_EQ(images.count, 3U);
  EXPECT_EQ(images.rows, 4U);
  EXPECT_EQ(images.cols, 5U);
  EXPECT_EQ(images.pixels, pixels);
  EXPECT_EQ(images.image(2)[0], pixels[40]);
  const idx_labels labels = read_idx_labels(file("lbl.gz"));
  EXPECT_EQ(labels.values, (bytes{7, 0, 9}));
}

TEST_F(IdxFiles, AcceptsUncompressedIdx) {
  const bytes pixels = sequence(2 * 3 * 3);
  write_raw(file("img"), images_idx(2, 3, 3, pixels));
  EXPECT_EQ(read_idx_images(file("img")).pixels, pixels);
}

TEST_F(IdxFiles, MissingFile) {
  expect_idx_error([&] { (void)read_idx_images(file("absent.gz")); }, file("absent.gz"), {"does not exist"});
  expect_idx_error([&] { (void)read_idx_labels(file("absent.gz")); }, file("absent.gz"), {"does not exist"});
}

TEST_F(IdxFiles, TruncatedData) {
  bytes b = images_idx(3, 4, 5, sequence(3 * 4 * 5));
  b.resize(b.size() - 7); // header promises 60 pixel bytes, the file holds 53
  write_gz(file("img.gz"), b);
  expect_idx_error([&] { (void)read_idx_images(file("img.gz")); }, file("img.gz"), {"truncated", "60", "53"});
  write_gz(file("lbl.gz"), labels_idx(5, {1, 2}));
  expect_idx_error([&] { (void)read_idx_labels(file("lbl.gz")); }, file("lbl.gz"), {"truncated"});
}

TEST_F(IdxFiles, TruncatedHeader) {
  write_gz(file("img.gz"), bytes{0, 0, 8, 3, 0, 0});
  expect_idx_error([&] { (void)read_idx_images(file("img.gz")); }, file("img.gz"), {"truncated", "dimension sizes"});
  write_gz(file("empty.gz"), bytes{});
  expect_idx_error([&] { (void)read_idx_images(file("empty.gz")); }, file("empty.gz"), {"truncated"});
}

TEST_F(IdxFiles, TruncatedGzipStream) {
  write_gz(file("full.gz"), images_idx(50, 28, 28, sequence(50 * 28 * 28)));
  bytes gz = read_raw(file("full.gz"));
  gz.resize(gz.size() / 2); // the compressed stream stops in the middle
  write_raw(file("cut.gz"), gz);
  expect_idx_error([&] { (void)read_idx_images(file("cut.gz")); }, file("cut.gz"), {"truncated"});
}

TEST_F(IdxFiles, CorruptGzip) {
  // A valid gzip header followed by a deflate block of the reserved type 3.
  write_raw(file("bad.gz"), bytes{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0});
  expect_idx_error([&] { (void)read_idx_images(file("bad.gz")); }, file("bad.gz"), {"corrupt gzip"});
}

TEST_F(IdxFiles, GzipChecksumMismatch) {
  write_gz(file("good.gz"), labels_idx(4, {1, 2, 3, 4}));
  bytes gz = read_raw(file("good.gz"));
  gz[gz.size() - 8] ^= 0xFFU; // first byte of the CRC-32 in the gzip trailer
  write_raw(file("crc.gz"), gz);
  expect_idx_error([&] { (void)read_idx_labels(file("crc.gz")); }, file("crc.gz"), {"corrupt gzip"});
}

TEST_F(IdxFiles, WrongMagic) {
  write_gz(file("junk.gz"), images_idx(1, 2, 2, sequence(4), 0x12345678));
  expect_idx_error([&] { (void)read_idx_images(file("junk.gz")); }, file("junk.gz"),
                   {"wrong magic", "0x12345678", "not an IDX file"});
  write_gz(file("float.gz"), images_idx(1, 2, 2, sequence(16), 0x00000D03)); // float elements
  expect_idx_error([&] { (void)read_idx_images(file("float.gz")); }, file("float.gz"),
                   {"wrong magic", "element type 0x0d"});
  write_gz(file("dims.gz"), images_idx(1, 2, 2, sequence(4), 0x00000802)); // 2 dimensions
  expect_idx_error([&] { (void)read_idx_images(file("dims.gz")); }, file("dims.gz"), {"wrong magic", "dimension"});
}

TEST_F(IdxFiles, LabelsGivenAsImagesAndImagesAsLabels) {
  write_gz(file("lbl.gz"), labels_idx(3, {1, 2, 3}));
  expect_idx_error([&] { (void)read_idx_images(file("lbl.gz")); }, file("lbl.gz"),
                   {"wrong magic 0x00000801", "expected 0x00000803", "label file"});
  write_gz(file("img.gz"), images_idx(1, 2, 2, sequence(4)));
  expect_idx_error([&] { (void)read_idx_labels(file("img.gz")); }, file("img.gz"),
                   {"wrong magic 0x00000803", "expected 0x00000801", "image file"});
}

TEST_F(IdxFiles, TrailingData) {
  bytes b = images_idx(1, 2, 2, sequence(4));
  b.push_back(42);
  write_gz(file("img.gz"), b);
  expect_idx_error([&] { (void)read_idx_images(file("img.gz")); }, file("img.gz"), {"trailing data"});
}

TEST_F(IdxFiles, ZeroDimension) {
  write_gz(file("img.gz"), images_idx(1, 0, 2, {}));
  expect_idx_error([&] { (void)read_idx_images(file("img.gz")); }, file("img.gz"), {"dimension 1", "is 0"});
}

TEST_F(IdxFiles, LabelOutOfRange) {
  write_gz(file("lbl.gz"), labels_idx(4, {1, 9, 10, 2}));
  expect_idx_error([&] { (void)read_idx_labels(file("lbl.gz")); }, file("lbl.gz"),
                   {"label 10 at index 2", "out of range"});
  EXPECT_EQ(read_idx_labels(file("lbl.gz"), 11).count(), 4U);
}

TEST_F(IdxFiles, LoaderChecksCountsAndShape) {
  write_gz(file("train-images-idx3-ubyte.gz"), images_idx(4, 28, 28, sequence(4 * 784)));
  write_gz(file("train-labels-idx1-ubyte.gz"), labels_idx(3, {1, 2, 3}));
  write_gz(file("t10k-images-idx3-ubyte.gz"), images_idx(2, 28, 28, sequence(2 * 784)));
  write_gz(file("t10k-labels-idx1-ubyte.gz"), labels_idx(2, {4, 5}));
  expect_idx_error([&] { (void)load_fashion_mnist(dir_); }, file("train-labels-idx1-ubyte.gz"),
                   {"3 labels", "4 images"});

  write_gz(file("train-labels-idx1-ubyte.gz"), labels_idx(4, {1, 2, 3, 0}));
  const dataset d = load_fashion_mnist(dir_);
  EXPECT_EQ(d.train_images.count, 4U);
  EXPECT_EQ(d.test_labels.values, (bytes{4, 5}));
  EXPECT_NO_THROW(validate(d));

  write_gz(file("t10k-images-idx3-ubyte.gz"), images_idx(2, 14, 56, sequence(2 * 784)));
  expect_idx_error([&] { (void)load_fashion_mnist(dir_); }, file("t10k-images-idx3-ubyte.gz"), {"expected 28x28"});
}

// ---- limits: memory follows the file, not the header -----------------------------------------------------------

TEST_F(IdxFiles, UncompressedHeaderDeclaringMoreThanTheFileIsRefusedUpFront) {
  // The case: a header declaring 1 GiB (within idx_max_data_bytes) over 784 bytes of pixels.
  write_raw(file("img"), images_idx(1024, 1024, 1024, sequence(784)));
  expect_idx_error([&] { (void)read_idx_images(file("img")); }, file("img"),
                   {"truncated: the header declares 1024 x 1024 x 1024 = 1073741824 bytes of pixel data, but the "
                    "file holds only 784 after the header"});
  write_raw(file("lbl"), labels_idx(1U << 30, {1, 2}));
  expect_idx_error([&] { (void)read_idx_labels(file("lbl")); }, file("lbl"),
                   {"truncated: the header declares 1073741824 bytes of label data, but the file holds "
                    "only 2 after the header"});
}

TEST_F(IdxFiles, GzipHeaderDeclaringMoreThanTheFileCanHoldIsRefusedUpFront) {
  write_gz(file("img.gz"), images_idx(60000, 28, 28, sequence(784)));
  const auto size = fs::file_size(file("img.gz"));
  expect_idx_error([&] { (void)read_idx_images(file("img.gz")); }, file("img.gz"),
                   {"truncated or corrupt: the header declares 60000 x 28 x 28 = 47040000 bytes of pixel data, more "
                    "than this ",
                    ("-byte gzip file can hold (deflate expands at most 1032-fold)"), std::to_string(size).c_str()});
}

TEST_F(IdxFiles, HeaderBeyondTheLimitNamesIt) {
  write_raw(file("img"), images_idx(2048, 1024, 1024, {}));
  expect_idx_error([&] { (void)read_idx_images(file("img")); }, file("img"),
                   {"more than 1073741824 bytes of data declared", "idx_max_data_bytes", "raise it"});
}

TEST_F(IdxFiles, GzipWhoseTrailerDisagreesIsReadAsItComes) {
  // Two gzip members (the header, then the pixels): the trailer's size is the second member's, so the reader
  // grows its buffer with the data, past the first 1 MiB chunk.
  // Random bytes do not compress, so the file's size allows the header; only reading can tell the truth.
  const std::size_t n = 3U << 20;
  std::mt19937 rng(7);
  bytes pixels(n);
  for (auto& p : pixels) p = static_cast<std::uint8_t>(rng());
  write_gz(file("head.gz"), images_idx(3, 1024, 1024, {}));
  write_gz(file("body.gz"), pixels);
  bytes both = read_raw(file("head.gz"));
  const bytes body = read_raw(file("body.gz"));
  both.insert(both.end(), body.begin(), body.end());
  write_raw(file("img.gz"), both);
  EXPECT_EQ(read_idx_images(file("img.gz")).pixels, pixels);
  // The same with a million bytes missing: truncated, after reading what is there.
  write_gz(file("body.gz"), bytes(pixels.begin(), pixels.end() - (1U << 20)));
  both = read_raw(file("head.gz"));
  const bytes short_body = read_raw(file("body.gz"));
  both.insert(both.end(), short_body.begin(), short_body.end());
  write_raw(file("cut.gz"), both);
  expect_idx_error([&] { (void)read_idx_images(file("cut.gz")); }, file("cut.gz"),
                   {"truncated: expected 3145728 bytes of pixel data, got only 2097152"});
}

TEST_F(IdxFiles, DevicesAreNotRead) {
  if (!fs::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
  expect_idx_error([&] { (void)read_idx_images("/dev/zero"); }, "/dev/zero", {"not a regular file"});
}

fs::path fashion_mnist_dir() {
  if (const char* env = std::getenv("CONVEYOR_FASHION_MNIST_DIR"); env != nullptr && *env != '\0') return env;
  return default_data_dir;
}

TEST(FashionMnist, RealFiles) {
  const fs::path dir = fashion_mnist_dir();
  if (!fs::exists(dir / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not found in " << dir << " (install the Debian package or set "
                 << "CONVEYOR_FASHION_MNIST_DIR)";
  const dataset d = load_fashion_mnist(dir);
  EXPECT_EQ(d.train_images.count, 60000U);
  EXPECT_EQ(d.train_labels.count(), 60000U);
  EXPECT_EQ(d.test_images.count, 10000U);
  EXPECT_EQ(d.test_labels.count(), 10000U);
  for (const auto* images : {&d.train_images, &d.test_images}) {
    EXPECT_EQ(images->rows, 28U);
    EXPECT_EQ(images->cols, 28U);
  }
  std::array<int, 10> train_hist{}, test_hist{};
  for (const auto l : d.train_labels.values) {
    ASSERT_LT(l, 10);
    ++train_hist[l];
  }
  for (const auto l : d.test_labels.values) {
    ASSERT_LT(l, 10);
    ++test_hist[l];
  }
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(train_hist[c], 6000) << "class " << c;
    EXPECT_EQ(test_hist[c], 1000) << "class " << c;
  }
  // Images are not blank: some ink in the first image, and the whole range of bytes is used.
  const auto [lo, hi] = std::minmax_element(d.train_images.pixels.begin(), d.train_images.pixels.end());
  EXPECT_EQ(*lo, 0);
  EXPECT_EQ(*hi, 255);
}

// ---- host pieces of training -----------------------------------------------------------------------------------

TEST(TrainHost, RandomDatasetIsValidAndSeeded) {
  const dataset a = make_random_dataset(100, 20, 7);
  EXPECT_NO_THROW(validate(a));
  EXPECT_EQ(a.train_images.pixels, make_random_dataset(100, 20, 7).train_images.pixels);
  EXPECT_NE(a.train_images.pixels, make_random_dataset(100, 20, 8).train_images.pixels);
  EXPECT_THROW((void)make_random_dataset(0, 1, 1), std::invalid_argument);
}

TEST(TrainHost, HeInitIsSeededAndScaled) {
  const host_parameters a = he_init(42);
  const host_parameters b = he_init(42);
  const host_parameters c = he_init(43);
  for (int l = 0; l < num_layers; ++l) {
    EXPECT_EQ(a.weights[l], b.weights[l]);
    EXPECT_NE(a.weights[l], c.weights[l]);
    EXPECT_TRUE(std::all_of(a.biases[l].begin(), a.biases[l].end(), [](float v) { return v == 0.0F; }));
    double sum = 0.0, sum2 = 0.0;
    for (const float w : a.weights[l]) {
      sum += w;
      sum2 += double{w} * w;
    }
    const auto n = static_cast<double>(a.weights[l].size());
    const double expected_var = 2.0 / layer_widths[l];
    EXPECT_NEAR(sum / n, 0.0, 4.0 * std::sqrt(expected_var / n)) << "layer " << l;
    EXPECT_NEAR(sum2 / n / expected_var, 1.0, 0.1) << "layer " << l; // last layer has only 1280 weights
  }
}

TEST(TrainHost, PackUnpackRoundTrip) {
  const host_parameters p = he_init(1);
  const std::vector<float> flat = pack(p);
  constexpr parameter_layout layout = make_parameter_layout();
  ASSERT_EQ(flat.size(), layout.total);
  for (int l = 0; l < num_layers; ++l) {
    EXPECT_EQ(layout.weight_offset[l] % 64, 0U);
    EXPECT_EQ(layout.bias_offset[l] % 64, 0U);
    EXPECT_EQ(flat[layout.weight_offset[l] + 5], p.weights[l][5]);
  }
  const host_parameters q = unpack(flat);
  for (int l = 0; l < num_layers; ++l) {
    EXPECT_EQ(q.weights[l], p.weights[l]);
    EXPECT_EQ(q.biases[l], p.biases[l]);
  }
}

TEST(TrainHost, EpochPermutationsAreSeededPermutations) {
  const std::vector<int> p0 = epoch_permutation(42, 0, 1000);
  std::vector<int> sorted = p0;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(p0, epoch_permutation(42, 0, 1000));
  EXPECT_NE(p0, epoch_permutation(42, 1, 1000));
  EXPECT_NE(p0, epoch_permutation(43, 0, 1000));
  EXPECT_EQ(steps_per_epoch(60000, 128), 469U);
  EXPECT_EQ(steps_per_epoch(60000, 100), 600U);
  EXPECT_EQ(rows_in_step(60000, 128, 0), 128);
  EXPECT_EQ(rows_in_step(60000, 128, 467), 128);
  EXPECT_EQ(rows_in_step(60000, 128, 468), 96);
  EXPECT_THROW((void)rows_in_step(60000, 128, 469), std::invalid_argument);
  EXPECT_THROW((void)steps_per_epoch(100, 0), std::invalid_argument);
}

TEST(TrainHost, ModeNames) {
  for (const auto m : all_execution_modes) EXPECT_EQ(parse_execution_mode(to_string(m)), m);
  EXPECT_THROW((void)parse_execution_mode("fast"), std::invalid_argument);
}

// The CPU reference's gradients agree with central finite differences of its own loss.
TEST(TrainHost, ReferenceGradientsMatchFiniteDifferences) {
  constexpr std::size_t rows = 6;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> pixel(0.0F, 1.0F);
  std::vector<float> x(rows * input_features);
  for (auto& v : x) v = pixel(rng);
  const std::vector<int> labels{0, 3, 9, 3, 7, 1};
  host_parameters p = he_init(11);
  for (auto& b : p.biases)
    for (auto& v : b) v = 0.1F * (pixel(rng) - 0.5F); // non-zero biases exercise the bias gradients
  const reference_gradients g = reference_step(p, x, labels);
  EXPECT_GT(g.loss, 0.0);

  const float h = 0x1.0p-10F; // a power of two: w ± h is exact in float for |w| < 16
  auto check = [&](std::vector<float>& values, const std::vector<double>& grads, std::size_t index, const char* what) {
    const float saved = values[index];
    values[index] = saved + h;
    const double up = reference_step(p, x, labels).loss;
    values[index] = saved - h;
    const double down = reference_step(p, x, labels).loss;
    values[index] = saved;
    const double fd = (up - down) / (2.0 * double{h});
    EXPECT_NEAR(fd, grads[index], 1e-5 + 1e-3 * std::fabs(grads[index])) << what << "[" << index << "]";
  };
  std::uniform_int_distribution<std::size_t> pick(0, 1U << 30);
  for (int l = 0; l < num_layers; ++l) {
    for (int k = 0; k < 12; ++k) check(p.weights[l], g.weights[l], pick(rng) % p.weights[l].size(), "weight");
    for (int k = 0; k < 4; ++k) check(p.biases[l], g.biases[l], pick(rng) % p.biases[l].size(), "bias");
  }
}

} // namespace
