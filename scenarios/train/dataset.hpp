#pragma once
//! \file dataset.hpp
//! The Fashion-MNIST data set on the host: loading from IDX gzip files, validation, and a random stand-in for
//! tests.

#include "train/idx_reader.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace conveyor::train {

//! Where the Debian package puts Fashion-MNIST.
inline constexpr const char* default_data_dir = "/usr/share/datasets/fashion-mnist";

//! Training and test splits: 28x28 byte images and labels in [0, 10).
struct dataset {
  idx_images train_images; //!< 60000 x 28 x 28 for Fashion-MNIST
  idx_labels train_labels; //!< 60000
  idx_images test_images;  //!< 10000 x 28 x 28
  idx_labels test_labels;  //!< 10000
};

//! Reads train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
//! t10k-labels-idx1-ubyte.gz from `dir` and checks them with validate().
//! \throws idx_error naming the file for anything read_idx_images / read_idx_labels reject, for images that are
//!         not 28x28, and for a label file whose count differs from its image file's.
[[nodiscard]] dataset load_fashion_mnist(const std::filesystem::path& dir = default_data_dir);

//! Checks that both splits hold at least one sample, 28x28 images, as many labels as images, labels < 10.
//! \throws std::invalid_argument saying which split and what is wrong.
void validate(const dataset& d);

//! A random data set of the same shape (uniform pixel bytes, uniform labels) from std::mt19937_64(seed), for tests
//! and for machines without the real files.
//! \throws std::invalid_argument when a count is 0.
[[nodiscard]] dataset make_random_dataset(std::size_t train_count, std::size_t test_count, std::uint64_t seed);

} // namespace conveyor::train
