#pragma once
// Test support shared by the training tests: where the Fashion-MNIST files are, and the data set when present.

#include "train/dataset.hpp"

#include <cstdlib>
#include <filesystem>
#include <optional>

namespace conveyor::test {
//! The Fashion-MNIST folder: $CONVEYOR_FASHION_MNIST_DIR when set, else the Debian package's.
inline std::filesystem::path fashion_mnist_dir() {
  if (const char* env = std::getenv("CONVEYOR_FASHION_MNIST_DIR"); env != nullptr && *env != '\0') return env;
  return conveyor::train::default_data_dir;
}

//! The real data set when its files are present, otherwise nothing.
inline std::optional<conveyor::train::dataset> real_data() {
  const std::filesystem::path dir = fashion_mnist_dir();
  if (!std::filesystem::exists(dir / "train-images-idx3-ubyte.gz")) return std::nullopt;
  return conveyor::train::load_fashion_mnist(dir);
}

} // namespace conveyor::test
