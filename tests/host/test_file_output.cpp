// Host-only tests of scenarios/common's file output: atomic writes and the PNG writer the cavity and filter
// scenarios share (read back with libpng's simplified API).
#include "common/file_output.hpp"

#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using conveyor::scenarios::file_error;

class FileOutput : public ::testing::Test {
protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("conveyor-file-output-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Files in the folder, hidden ones (temporary files) included.
  [[nodiscard]] std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    return out;
  }
  fs::path dir_;
};

std::vector<std::uint8_t> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(byte(rng));
  return v;
}

// Reads a PNG back as `format` (PNG_FORMAT_GRAY or PNG_FORMAT_RGB) with libpng.
std::vector<std::uint8_t> read_back(const fs::path& file, png_uint_32 format, int* width, int* height) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  EXPECT_NE(png_image_begin_read_from_file(&img, file.c_str()), 0) << img.message;
  img.format = format;
  std::vector<std::uint8_t> pixels(PNG_IMAGE_SIZE(img));
  EXPECT_NE(png_image_finish_read(&img, nullptr, pixels.data(), 0, nullptr), 0) << img.message;
  *width = static_cast<int>(img.width);
  *height = static_cast<int>(img.height);
  return pixels;
}

TEST_F(FileOutput, PngRoundTripsGreyAndRgbPixels) {
  for (const int channels : {1, 3}) {
    const int w = 37, h = 23;
    const auto pixels = random_bytes(static_cast<std::size_t>(w * h * channels), 90 + channels);
    const fs::path file = dir_ / ("image" + std::to_string(channels) + ".png");
    conveyor::scenarios::write_png(file, w, h, channels, pixels);
    int rw = 0, rh = 0;
    const auto back = read_back(file, channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY, &rw, &rh);
    EXPECT_EQ(rw, w);
    EXPECT_EQ(rh, h);
    EXPECT_EQ(back, pixels) << channels << " channel(s)";
  }
  EXPECT_EQ(entries().size(), 2U); // no temporary file left
}

TEST_F(FileOutput, PngRefusesInconsistentSizes) {
  const std::vector<std::uint8_t> six(6, 1);
  EXPECT_THROW(conveyor::scenarios::write_png(dir_ / "a.png", 2, 2, 3, six), std::invalid_argument);
  EXPECT_THROW(conveyor::scenarios::write_png(dir_ / "b.png", 0, 6, 1, six), std::invalid_argument);
  EXPECT_THROW(conveyor::scenarios::write_png(dir_ / "c.png", 3, 1, 2, six), std::invalid_argument);
  EXPECT_TRUE(entries().empty()); // nothing written
}

TEST_F(FileOutput, FailedWriteNamesTheFileAndKeepsTheOldContent) {
  const fs::path file = dir_ / "keep.txt";
  conveyor::scenarios::write_file_atomically(file, "old\n");
  try {
    conveyor::scenarios::write_atomically(file, [](std::FILE* fp) -> std::string {
      std::fputs("half", fp);
      return "the producer gave up";
    });
    ADD_FAILURE() << "no file_error";
  } catch (const file_error& e) {
    EXPECT_EQ(e.file(), file);
    EXPECT_EQ(e.reason(), "the producer gave up");
    EXPECT_EQ(std::string(e.what()), file.string() + ": the producer gave up");
  }
  std::ifstream in(file);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "old\n");
  EXPECT_EQ(entries().size(), 1U); // the temporary file was removed
  EXPECT_THROW(conveyor::scenarios::write_file_atomically(dir_ / "missing" / "x.txt", "x"), file_error);
}

} // namespace
