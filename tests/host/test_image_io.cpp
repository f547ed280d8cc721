// Image I/O of the `filter` scenario: real PNG and JPEG files decode to the documented sizes; truncated, corrupt,
// empty and unsupported files fail with the file name and a clear reason; PNG writes are atomic (a failed write
// leaves neither a half-written file nor a temporary one).

#include "support/filter_images.hpp"
#include "support/hostile_images.hpp"

#include "filter/image_io.hpp"
#include "filter/resize.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using conveyor::filter::image;
using conveyor::filter::image_error;
using conveyor::test::shared_images;

namespace {

std::vector<char> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const char* data, std::size_t n) {
  std::ofstream out(p, std::ios::binary);
  out.write(data, static_cast<std::streamsize>(n));
}

std::vector<std::string> folder_entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

image test_pattern(int w, int h, int channels) {
  image img;
  img.width = w;
  img.height = h;
  img.channels = channels;
  img.pixels.resize(img.samples());
  for (std::size_t i = 0; i < img.pixels.size(); ++i)
    img.pixels[i] = static_cast<std::uint8_t>((i * 37 + i / 7) & 0xFF);
  return img;
}

//! The message of the image_error `f` throws (fails the test when it throws nothing or something else).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const image_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected conveyor::filter::image_error";
  return {};
}

class ImageIo : public ::testing::Test {
protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "conveyor-image-io-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

void write_text(const fs::path& p, const std::string& bytes) { write_bytes(p, bytes.data(), bytes.size()); }

} // namespace

TEST_F(ImageIo, ReadsTheRealImagesAsRgbOfTheirDocumentedSizes) {
  CONVEYOR_REQUIRE_IMAGES();
  for (const auto& s : conveyor::test::shared_image_list) {
    const image img = conveyor::filter::read_image(shared_images() / s.file);
    EXPECT_EQ(img.width, s.width) << s.file;
    EXPECT_EQ(img.height, s.height) << s.file;
    EXPECT_EQ(img.channels, 3) << s.file;
    EXPECT_TRUE(img.valid()) << s.file;
  }
  // camera.png is 8-bit grey: expanded to RGB with three equal samples.
  const image camera = conveyor::filter::read_image(shared_images() / "camera.png");
  for (std::size_t i = 0; i < camera.pixels.size(); i += 3) {
    ASSERT_EQ(camera.pixels[i], camera.pixels[i + 1]);
    ASSERT_EQ(camera.pixels[i], camera.pixels[i + 2]);
  }
}

TEST_F(ImageIo, ListsTheImagesOfAFolderSortedAndSkipsOtherFiles) {
  CONVEYOR_REQUIRE_IMAGES();
  const auto files = conveyor::filter::list_images(shared_images());
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"astronaut.png", "camera.png", "chelsea.png", "coffee.png",
                                             "hubble_deep_field.jpg"}));
  EXPECT_EQ(conveyor::filter::list_images(shared_images() / "coffee.png").size(), 1U);
  EXPECT_NE(error_of([&] { (void)conveyor::filter::list_images(dir_); }).find("no .png, .jpg or .jpeg"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)conveyor::filter::list_images(dir_ / "nope"); }).find("no such file"),
            std::string::npos);
}

TEST_F(ImageIo, PngRoundTripIsExactForRgbAndGrey) {
  const image rgb = test_pattern(37, 23, 3);
  conveyor::filter::write_png(dir_ / "rgb.png", rgb);
  EXPECT_EQ(conveyor::filter::read_image(dir_ / "rgb.png"), rgb);

  const image grey = test_pattern(19, 41, 1);
  conveyor::filter::write_png(dir_ / "grey.png", grey);
  const image back = conveyor::filter::read_image(dir_ / "grey.png");
  ASSERT_EQ(back.channels, 3);
  for (std::size_t i = 0; i < grey.pixels.size(); ++i) ASSERT_EQ(back.pixels[3 * i + 1], grey.pixels[i]);
  EXPECT_EQ(folder_entries(dir_), (std::vector<std::string>{"grey.png", "rgb.png"})) << "no temporary file left";
}

TEST_F(ImageIo, TruncatedPngFailsNamingTheFile) {
  CONVEYOR_REQUIRE_IMAGES();
  const auto bytes = read_bytes(shared_images() / "astronaut.png");
  for (const std::size_t keep : {bytes.size() / 2, std::size_t{100}, std::size_t{5}}) {
    const fs::path cut = dir_ / "cut.png";
    write_bytes(cut, bytes.data(), keep);
    const std::string what = error_of([&] { (void)conveyor::filter::read_image(cut); });
    EXPECT_NE(what.find(cut.string()), std::string::npos) << what;
    EXPECT_NE(what.find("truncated PNG"), std::string::npos) << "kept " << keep << " bytes: " << what;
  }
}

TEST_F(ImageIo, TruncatedJpegFailsInsteadOfReturningAPaddedImage) {
  CONVEYOR_REQUIRE_IMAGES();
  const auto bytes = read_bytes(shared_images() / "hubble_deep_field.jpg");
  const fs::path cut = dir_ / "cut.jpg";
  write_bytes(cut, bytes.data(), bytes.size() / 2);
  const std::string what = error_of([&] { (void)conveyor::filter::read_image(cut); });
  EXPECT_NE(what.find(cut.string()), std::string::npos) << what;
  EXPECT_NE(what.find("truncated JPEG"), std::string::npos) << what;
}

TEST_F(ImageIo, CorruptPngDataFails) {
  CONVEYOR_REQUIRE_IMAGES();
  auto bytes = read_bytes(shared_images() / "coffee.png");
  for (std::size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) bytes[i] = static_cast<char>(~bytes[i]);
  const fs::path bad = dir_ / "bad.png";
  write_bytes(bad, bytes.data(), bytes.size());
  const std::string what = error_of([&] { (void)conveyor::filter::read_image(bad); });
  EXPECT_NE(what.find("PNG"), std::string::npos) << what;
}

TEST_F(ImageIo, UnsupportedEmptyAndMissingFilesFailWithTheReason) {
  const fs::path text = dir_ / "notes.png";
  write_bytes(text, "hello, not an image\n", 20);
  EXPECT_NE(error_of([&] { (void)conveyor::filter::read_image(text); }).find("unsupported format"), std::string::npos);
  const fs::path gif = dir_ / "anim.gif";
  write_bytes(gif, "GIF89a\x01\x00\x01\x00", 10);
  EXPECT_NE(error_of([&] { (void)conveyor::filter::read_image(gif); }).find("neither PNG nor JPEG"), std::string::npos);
  const fs::path empty = dir_ / "empty.jpg";
  write_bytes(empty, "", 0);
  EXPECT_NE(error_of([&] { (void)conveyor::filter::read_image(empty); }).find("empty file"), std::string::npos);
  const std::string missing = error_of([&] { (void)conveyor::filter::read_image(dir_ / "missing.png"); });
  EXPECT_NE(missing.find("missing.png"), std::string::npos) << missing;
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;
  EXPECT_NE(error_of([&] { (void)conveyor::filter::read_image(dir_); }).find("folder"), std::string::npos);
}

TEST_F(ImageIo, FailedWritesLeaveNoHalfWrittenOrTemporaryFile) {
  const image rgb = test_pattern(16, 8, 3);
  // The target is a folder: rename() fails after the data were written to the temporary file.
  fs::create_directory(dir_ / "taken.png");
  const std::string what = error_of([&] { conveyor::filter::write_png(dir_ / "taken.png", rgb); });
  EXPECT_NE(what.find("taken.png"), std::string::npos) << what;
  EXPECT_EQ(folder_entries(dir_), std::vector<std::string>{"taken.png"});
  EXPECT_TRUE(fs::is_directory(dir_ / "taken.png"));
  // The folder does not exist.
  EXPECT_NE(error_of([&] { conveyor::filter::write_png(dir_ / "nowhere" / "x.png", rgb); }).find("temporary"),
            std::string::npos);
  // An inconsistent image is refused before anything is created.
  image broken = rgb;
  broken.pixels.pop_back();
  EXPECT_NE(error_of([&] { conveyor::filter::write_png(dir_ / "broken.png", broken); }).find("invalid image"),
            std::string::npos);
  EXPECT_EQ(folder_entries(dir_), std::vector<std::string>{"taken.png"});
}

TEST_F(ImageIo, WriteReplacesAnExistingFileWhole) {
  const fs::path file = dir_ / "out.png";
  conveyor::filter::write_png(file, test_pattern(64, 64, 3));
  const image second = test_pattern(8, 4, 1);
  conveyor::filter::write_png(file, second);
  const image back = conveyor::filter::read_image(file);
  EXPECT_EQ(back.width, 8);
  EXPECT_EQ(back.height, 4);
  conveyor::filter::write_file_atomically(dir_ / "graph.dot", "digraph g {}\n");
  EXPECT_EQ(read_bytes(dir_ / "graph.dot").size(), 13U);
  EXPECT_EQ(folder_entries(dir_), (std::vector<std::string>{"graph.dot", "out.png"}));
}

TEST(Resize, KeepsSizeAndConstantsAndRefusesBadSizes) {
  const image src = test_pattern(13, 7, 3);
  EXPECT_EQ(conveyor::filter::resize_bilinear(src, 13, 7), src);
  image flat;
  flat.width = 5;
  flat.height = 3;
  flat.channels = 1;
  flat.pixels.assign(15, 77);
  const image big = conveyor::filter::resize_bilinear(flat, 41, 29);
  EXPECT_EQ(big.width, 41);
  EXPECT_EQ(big.height, 29);
  EXPECT_TRUE(std::all_of(big.pixels.begin(), big.pixels.end(), [](std::uint8_t v) { return v == 77; }));
  EXPECT_THROW((void)conveyor::filter::resize_bilinear(src, 0, 5), std::invalid_argument);
  EXPECT_THROW((void)conveyor::filter::resize_bilinear(image{}, 5, 5), std::invalid_argument);
}

// ---- limits: a header is checked against the file's size before the pixels are allocated ------------------------

TEST_F(ImageIo, CraftedSmallFilesDecodeOrFailForTheirOwnReason) {
  // The hostile files below are well-formed up to their sizes: a small one decodes (PNG) or reads its header (JPEG).
  const fs::path png = dir_ / "small.png";
  write_text(png, conveyor::test::png_file(4, 3, 8, 2, 3 * (1 + 4 * 3)));
  const image img = conveyor::filter::read_image(png);
  EXPECT_EQ(img.width, 4);
  EXPECT_EQ(img.height, 3);
  EXPECT_EQ(img.pixels, std::vector<std::uint8_t>(36, 0));
  const fs::path jpg = dir_ / "small.jpg";
  write_text(jpg, conveyor::test::jpeg_file(16, 16));
  const std::string what = error_of([&] { (void)conveyor::filter::read_image(jpg); });
  EXPECT_NE(what.find("unreadable JPEG (libjpeg: "), std::string::npos) << what;
}

TEST_F(ImageIo, PngHeaderDeclaringMoreThanTheFileCanHoldIsRefused) {
  const fs::path rgba = dir_ / "rgba16.png";
  const std::string bytes = conveyor::test::png_file(32768, 32768, 16, 6, 64);
  write_text(rgba, bytes);
  EXPECT_EQ(error_of([&] { (void)conveyor::filter::read_image(rgba); }),
            rgba.string() +
                ": truncated or corrupt PNG: its header declares 32768x32768 pixels (8589934592 bytes of "
                "image data at 64 bits per pixel), more than this " +
                std::to_string(bytes.size()) + "-byte file can hold (deflate expands at most 1032-fold)");
  const fs::path bits = dir_ / "bits.png";
  write_text(bits, conveyor::test::png_file(32768, 32768, 1, 0, 64));
  const std::string what = error_of([&] { (void)conveyor::filter::read_image(bits); });
  EXPECT_NE(what.find("(134217728 bytes of image data at 1 bits per pixel)"), std::string::npos) << what;
}

TEST_F(ImageIo, JpegHeaderDeclaringMoreThanTheFileCanHoldIsRefused) {
  for (const bool progressive : {false, true}) {
    const fs::path jpg = dir_ / "big.jpg";
    const std::string bytes = conveyor::test::jpeg_file(32768, 32768, progressive);
    write_text(jpg, bytes);
    EXPECT_EQ(error_of([&] { (void)conveyor::filter::read_image(jpg); }),
              jpg.string() + ": truncated or corrupt JPEG: its header declares 32768x32768 pixels, more than this " +
                  std::to_string(bytes.size()) +
                  "-byte file can hold (at most 8192 pixels per byte: jpeg_max_pixels_per_byte in "
                  "scenarios/filter/image_io.hpp)")
        << (progressive ? "progressive" : "baseline");
  }
}

TEST_F(ImageIo, SidesBeyondTheLimitNameIt) {
  const fs::path png = dir_ / "wide.png";
  write_text(png, conveyor::test::png_file(40000, 1, 8, 0, 40001));
  EXPECT_EQ(error_of([&] { (void)conveyor::filter::read_image(png); }),
            png.string() + ": unsupported image size 40000x1 (each side must be 1 to 32768 pixels: max_image_side in "
                           "scenarios/filter/image_io.hpp)");
  const fs::path jpg = dir_ / "wide.jpg";
  write_text(jpg, conveyor::test::jpeg_file(40000, 8));
  EXPECT_EQ(error_of([&] { (void)conveyor::filter::read_image(jpg); }),
            jpg.string() + ": unsupported image size 40000x8 (each side must be 1 to 32768 pixels: max_image_side in "
                           "scenarios/filter/image_io.hpp)");
}

// ---- message faults --------------------------------------------------------------------------------------------

TEST_F(ImageIo, AJpegStartOfImageAloneIsATruncatedJpeg) {
  const fs::path soi = dir_ / "soi.jpg";
  write_bytes(soi, "\xFF\xD8", 2);
  const std::string what = error_of([&] { (void)conveyor::filter::read_image(soi); });
  EXPECT_NE(what.find(soi.string() + ": truncated JPEG data (libjpeg: "), std::string::npos) << what;
  EXPECT_EQ(what.find("neither"), std::string::npos) << what;
  const fs::path half = dir_ / "half.jpg";
  write_bytes(half, "\xFF", 1);
  EXPECT_EQ(error_of([&] { (void)conveyor::filter::read_image(half); }),
            half.string() + ": truncated JPEG data (file ends inside the start-of-image marker FF D8)");
  // A start-of-image marker followed by garbage is a JPEG (libjpeg skips the garbage, then meets the end).
  const fs::path junk = dir_ / "junk.jpg";
  write_bytes(junk, "\xFF\xD8\x00\x01\x02", 5);
  const std::string junk_what = error_of([&] { (void)conveyor::filter::read_image(junk); });
  EXPECT_NE(junk_what.find(junk.string() + ": truncated JPEG data (libjpeg: "), std::string::npos) << junk_what;
}

TEST_F(ImageIo, DevZeroIsReadForItsFirstBytesOnly) {
  if (!fs::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
  EXPECT_EQ(error_of([] { (void)conveyor::filter::read_image("/dev/zero"); }),
            "/dev/zero: unsupported format: neither PNG nor JPEG (first bytes 00 00 00 00 00 00 00 00)");
}

TEST_F(ImageIo, APipeIsReadIntoMemoryAndDecoded) {
  ::signal(SIGPIPE, SIG_IGN); // the writer must not die if the reader gives up early
  const image rgb = test_pattern(29, 17, 3);
  conveyor::filter::write_png(dir_ / "rgb.png", rgb);
  const auto png = read_bytes(dir_ / "rgb.png");
  const fs::path fifo = dir_ / "pipe.png";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto through_pipe = [&](const std::vector<char>& bytes) {
    std::thread writer([&] {
      const int fd = ::open(fifo.c_str(), O_WRONLY);
      if (fd < 0) return;
      for (std::size_t done = 0; done < bytes.size();) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
      }
      ::close(fd);
    });
    image got;
    std::string error;
    try {
      got = conveyor::filter::read_image(fifo);
    } catch (const image_error& e) {
      error = e.what();
    }
    writer.join();
    return std::pair{got, error};
  };
  const auto [img, error] = through_pipe(png);
  EXPECT_EQ(error, "");
  EXPECT_EQ(img, rgb);
  const auto [none, soi_error] = through_pipe({'\xFF', '\xD8'});
  EXPECT_NE(soi_error.find("truncated JPEG data"), std::string::npos) << soi_error;
}
