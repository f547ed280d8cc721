//! \file dataset.cpp
//! Loading and checking Fashion-MNIST.

#include "train/dataset.hpp"

#include "train/parameters.hpp"

#include <fmt/format.h>

#include <random>
#include <stdexcept>

namespace conveyor::train {
namespace {

constexpr std::size_t image_side = 28;

void check_split(const idx_images& images, const idx_labels& labels, const char* split) {
  if (images.count == 0) throw std::invalid_argument(fmt::format("{} split: no images", split));
  if (images.rows != image_side || images.cols != image_side)
    throw std::invalid_argument(
        fmt::format("{} split: images are {}x{}, expected 28x28", split, images.rows, images.cols));
  if (images.pixels.size() != images.count * images.pixels_per_image())
    throw std::invalid_argument(fmt::format("{} split: pixel buffer size does not match the count", split));
  if (labels.count() != images.count)
    throw std::invalid_argument(fmt::format("{} split: {} images but {} labels", split, images.count, labels.count()));
  for (std::size_t i = 0; i < labels.count(); ++i)
    if (labels.values[i] >= num_classes)
      throw std::invalid_argument(
          fmt::format("{} split: label {} at index {} is not below {}", split, labels.values[i], i, num_classes));
}

void load_split(const std::filesystem::path& dir, const char* prefix, idx_images& images, idx_labels& labels) {
  const auto image_path = dir / fmt::format("{}-images-idx3-ubyte.gz", prefix);
  const auto label_path = dir / fmt::format("{}-labels-idx1-ubyte.gz", prefix);
  images = read_idx_images(image_path);
  if (images.rows != image_side || images.cols != image_side)
    throw idx_error(image_path, fmt::format("images are {}x{}, expected 28x28", images.rows, images.cols));
  labels = read_idx_labels(label_path, num_classes);
  if (labels.count() != images.count)
    throw idx_error(label_path, fmt::format("holds {} labels but '{}' holds {} images", labels.count(),
                                            image_path.string(), images.count));
}

} // namespace

dataset load_fashion_mnist(const std::filesystem::path& dir) {
  dataset d;
  load_split(dir, "train", d.train_images, d.train_labels);
  load_split(dir, "t10k", d.test_images, d.test_labels);
  return d;
}

void validate(const dataset& d) {
  check_split(d.train_images, d.train_labels, "training");
  check_split(d.test_images, d.test_labels, "test");
}

dataset make_random_dataset(std::size_t train_count, std::size_t test_count, std::uint64_t seed) {
  if (train_count == 0 || test_count == 0) throw std::invalid_argument("make_random_dataset: counts must be > 0");
  std::mt19937_64 rng(seed);
  auto fill = [&rng](idx_images& images, idx_labels& labels, std::size_t count) {
    images.count = count;
    images.rows = image_side;
    images.cols = image_side;
    images.pixels.resize(count * image_side * image_side);
    for (auto& p : images.pixels) p = static_cast<std::uint8_t>(rng() >> 56);
    labels.values.resize(count);
    for (auto& l : labels.values) l = static_cast<std::uint8_t>(rng() % num_classes);
  };
  dataset d;
  fill(d.train_images, d.train_labels, train_count);
  fill(d.test_images, d.test_labels, test_count);
  return d;
}

} // namespace conveyor::train
