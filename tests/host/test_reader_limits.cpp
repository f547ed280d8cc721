// Every input reader (Matrix Market, IDX, PNG/JPEG, Ghia CSV) on hostile files of about a hundred bytes, and on
// unbounded devices, under a memory limit: each runs in a forked child whose address space and data segment may
// grow by at most 64 MiB beyond what the test process already holds (setrlimit RLIMIT_AS and RLIMIT_DATA), and must
// fail cleanly with its own error naming the problem, not with std::bad_alloc or a crash. The harness itself is
// tested to report an allocation beyond the limit, and valid inputs of 38-40 MB must still read within it (the
// pixels and elements are held once).

#include "support/hostile_images.hpp"

#include "cavity/ghia.hpp"
#include "filter/image_io.hpp"
#include "solve/csr.hpp"
#include "solve/matrix_market.hpp"
#include "train/dataset.hpp"
#include "train/idx_reader.hpp"

#include <cxxabi.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <typeinfo>
#include <vector>

namespace {

namespace fs = std::filesystem;

//! What a reader may allocate beyond what the process holds when it starts.
constexpr rlim_t memory_limit = rlim_t{64} << 20;

//! How the child ended.
enum class ending { returned = 0, threw = 1, bad_alloc = 2, other = 3, killed = 4 };

struct child_result {
  ending how = ending::other;
  std::string message; //!< what the function returned, or "<exception type>: <what()>"
};

//! A field of /proc/self/status in bytes (e.g. "VmData"), 0 when absent.
rlim_t status_bytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(key + ":"))
      return static_cast<rlim_t>(std::strtoull(line.c_str() + key.size() + 1, nullptr, 10)) * 1024;
  return 0;
}

std::string demangle(const char* name) {
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && d ? d.get() : name;
}

//! Runs `f` in a forked child limited to memory_limit more than it holds at the fork, and says how it ended.
child_result run_limited(const std::function<std::string()>& f) {
  int fds[2];
  if (::pipe(fds) != 0) return {ending::other, "pipe failed"};
  const pid_t pid = ::fork();
  if (pid < 0) return {ending::other, "fork failed"};
  if (pid == 0) {
    ::close(fds[0]);
    const rlim_t data = status_bytes("VmData") + memory_limit;
    const rlim_t as = status_bytes("VmSize") + memory_limit;
    const rlimit data_limit{data, data};
    const rlimit as_limit{as, as};
    ending how = ending::other;
    std::string message;
    if (::setrlimit(RLIMIT_DATA, &data_limit) != 0 || ::setrlimit(RLIMIT_AS, &as_limit) != 0) {
      message = "setrlimit failed";
    } else {
      try {
        message = f();
        how = ending::returned;
      } catch (const std::bad_alloc& e) {
        how = ending::bad_alloc;
        message = demangle(typeid(e).name());
      } catch (const std::exception& e) {
        how = ending::threw;
        message = demangle(typeid(e).name()) + ": " + e.what();
      } catch (...) {
        message = "an exception not derived from std::exception";
      }
    }
    for (std::size_t done = 0; done < message.size();) {
      const ssize_t n = ::write(fds[1], message.data() + done, message.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::_exit(static_cast<int>(how));
  }
  ::close(fds[1]);
  child_result r;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) r.message.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) r.how = static_cast<ending>(WEXITSTATUS(status));
  else {
    r.how = ending::killed;
    r.message += fmt::format(" (killed by signal {})", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  }
  return r;
}

std::string describe(ending how) {
  switch (how) {
  case ending::returned: return "returned";
  case ending::threw: return "threw";
  case ending::bad_alloc: return "std::bad_alloc";
  case ending::other: return "other";
  case ending::killed: return "killed";
  }
  return "?";
}

//! Expects `r` to be a clean refusal: an exception of `type` whose message contains `part`.
void expect_refused(const child_result& r, const std::string& type, const std::string& part) {
  EXPECT_EQ(describe(r.how), describe(ending::threw)) << r.message;
  EXPECT_TRUE(r.message.starts_with(type + ": ")) << "expected a " << type << ", got: " << r.message;
  EXPECT_NE(r.message.find(part), std::string::npos) << "message: " << r.message << "\nexpected to contain: " << part;
}

class ReaderLimits : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "conveyor-limits-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  //! Writes `bytes` to `name` in the test's folder; hostile files stay about a hundred bytes.
  fs::path write(const std::string& name, const std::string& bytes, std::size_t at_most = 128) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_LE(bytes.size(), at_most) << name;
    return p;
  }
  fs::path dir_;
};

std::string be32(std::uint32_t v) {
  std::string out;
  conveyor::test::put_be(out, v, 4);
  return out;
}

std::string gzip(const std::string& data) {
  std::string out(compressBound(static_cast<uLong>(data.size())) + 32, '\0');
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END ? out : std::string();
}

// ---- the harness -----------------------------------------------------------------------------------------------

TEST_F(ReaderLimits, HarnessReportsAnAllocationBeyondTheLimit) {
  const child_result r = run_limited([] {
    std::vector<char> big(std::size_t{128} << 20, 1);
    return std::to_string(big[12345]);
  });
  EXPECT_EQ(describe(r.how), describe(ending::bad_alloc)) << r.message;
}

TEST_F(ReaderLimits, HarnessAllowsWorkWithinTheLimit) {
  const child_result r = run_limited([] {
    std::vector<char> some(std::size_t{40} << 20, 1);
    return std::to_string(some[12345]);
  });
  EXPECT_EQ(describe(r.how), describe(ending::returned)) << r.message;
  EXPECT_EQ(r.message, "1");
}

// ---- Matrix Market, through the solve command's steps (read, require_symmetric, to_csr) ------------------------

TEST_F(ReaderLimits, MatrixMarket) {
  using namespace conveyor::solve;
  auto solve_input = [](const fs::path& p) {
    return [p] {
      const coo_matrix m = read_matrix_market(p);
      require_symmetric(m);
      const csr_matrix a = to_csr(m);
      return fmt::format("{} rows", a.rows);
    };
  };
  const std::string sym = "%%MatrixMarket matrix coordinate real symmetric\n";
  const std::string gen = "%%MatrixMarket matrix coordinate real general\n";
  struct hostile {
    const char* name;
    std::string text;
    const char* part;
  };
  for (const hostile& h : {
           hostile{"diagonal.mtx", sym + "2147483647 2147483647 1\n1 1 1\n",
                   ":2: 1 entries cannot hold the 2147483647 diagonal entries"},
           hostile{"entries.mtx", gen + "2147483647 2147483647 2147483647\n1 1 1\n",
                   ":2: the size line announces 2147483647 entries, but the 6 bytes after it can hold at most 1"},
           hostile{"reserve.mtx", sym + "16777216 16777216 16777216\n1 1 1\n2 2 1\n",
                   ":2: the size line announces 16777216 entries, but the 12 bytes after it can hold at most 2"},
           hostile{"tall.mtx", gen + "2147483647 1 1\n1 1 1\n", "a symmetric matrix must be square"},
           hostile{"long.mtx", std::string(100, 'x'), ":1: missing Matrix Market banner"},
       }) {
    SCOPED_TRACE(h.name);
    expect_refused(run_limited(solve_input(write(h.name, h.text))), "conveyor::solve::matrix_market_error", h.part);
  }
  // A file of the entries it announces still reads, within the limit.
  const child_result ok = run_limited(solve_input(write("ok.mtx", sym + "2 2 3\n1 1 4\n2 1 -1\n2 2 4\n")));
  EXPECT_EQ(describe(ok.how), describe(ending::returned)) << ok.message;
  EXPECT_EQ(ok.message, "2 rows");
  if (fs::exists("/dev/zero"))
    expect_refused(run_limited(solve_input("/dev/zero")), "conveyor::solve::matrix_market_error",
                   "/dev/zero:1: the line is longer than 65536 bytes");
}

// ---- IDX -------------------------------------------------------------------------------------------------------

TEST_F(ReaderLimits, Idx) {
  using namespace conveyor::train;
  const std::string gib_of_images = be32(idx_images_magic) + be32(1024) + be32(1024) + be32(1024);
  const std::string gib_of_labels = be32(idx_labels_magic) + be32(1U << 30);
  auto images = [](const fs::path& p) { return [p] { return std::to_string(read_idx_images(p).pixels.size()); }; };
  auto labels = [](const fs::path& p) { return [p] { return std::to_string(read_idx_labels(p).count()); }; };
  const std::string type = "conveyor::train::idx_error";
  expect_refused(run_limited(images(write("img", gib_of_images + std::string(84, '\x7f')))), type,
                 "truncated: the header declares 1024 x 1024 x 1024 = 1073741824 bytes of pixel data, but the file "
                 "holds only 84 after the header");
  expect_refused(run_limited(images(write("img.gz", gzip(gib_of_images + std::string(84, '\x7f'))))), type,
                 "truncated or corrupt: the header declares 1024 x 1024 x 1024 = 1073741824 bytes of pixel data");
  expect_refused(run_limited(labels(write("lbl", gib_of_labels + std::string(92, '\x01')))), type,
                 "truncated: the header declares 1073741824 bytes of label data");
  expect_refused(run_limited(labels(write("lbl.gz", gzip(gib_of_labels)))), type,
                 "truncated or corrupt: the header declares 1073741824 bytes of label data");
  expect_refused(run_limited(images(
                     write("max", be32(idx_images_magic) + be32(0xFFFFFFFFU) + be32(0xFFFFFFFFU) + be32(0xFFFFFFFFU)))),
                 type, "idx_max_data_bytes");
  if (fs::exists("/dev/zero")) expect_refused(run_limited(images("/dev/zero")), type, "not a regular file");
  // The data set loader on a folder whose training images are hostile.
  write("train-images-idx3-ubyte.gz", gzip(gib_of_images));
  expect_refused(run_limited([&] { return std::to_string(load_fashion_mnist(dir_).train_images.count); }), type,
                 "train-images-idx3-ubyte.gz': truncated or corrupt");
  // 40 MB of real elements (gzip trailer confirming the size) read within the limit: allocated once.
  const std::string big =
      gzip(be32(idx_images_magic) + be32(1000) + be32(200) + be32(200) + std::string(40000000, '\0'));
  const child_result ok = run_limited(images(write("big.gz", big, 1U << 20)));
  EXPECT_EQ(describe(ok.how), describe(ending::returned)) << ok.message;
  EXPECT_EQ(ok.message, "40000000");
}

// ---- PNG and JPEG ----------------------------------------------------------------------------------------------

TEST_F(ReaderLimits, Images) {
  using conveyor::test::jpeg_file;
  using conveyor::test::png_file;
  auto read = [](const fs::path& p) {
    return [p] {
      const auto img = conveyor::filter::read_image(p);
      return fmt::format("{}x{}", img.width, img.height);
    };
  };
  const std::string type = "conveyor::filter::image_error";
  expect_refused(run_limited(read(write("rgba16.png", png_file(32768, 32768, 16, 6, 64)))), type,
                 "truncated or corrupt PNG: its header declares 32768x32768 pixels");
  expect_refused(run_limited(read(write("bits.png", png_file(32768, 32768, 1, 0, 64)))), type,
                 "truncated or corrupt PNG: its header declares 32768x32768 pixels");
  expect_refused(run_limited(read(write("base.jpg", jpeg_file(32768, 32768)))), type,
                 "truncated or corrupt JPEG: its header declares 32768x32768 pixels");
  expect_refused(run_limited(read(write("prog.jpg", jpeg_file(32768, 32768, true)))), type,
                 "truncated or corrupt JPEG: its header declares 32768x32768 pixels");
  expect_refused(run_limited(read(write("soi.jpg", std::string("\xFF\xD8", 2)))), type, "truncated JPEG data");
  if (fs::exists("/dev/zero")) expect_refused(run_limited(read("/dev/zero")), type, "neither PNG nor JPEG");
  // A valid 4096 x 3072 RGB PNG of 36 MiB of pixels decodes within the limit only if its pixels are held once.
  const child_result ok =
      run_limited(read(write("big.png", png_file(4096, 3072, 8, 2, std::size_t{3072} * (1 + 4096 * 3)), 1U << 20)));
  EXPECT_EQ(describe(ok.how), describe(ending::returned)) << ok.message;
  EXPECT_EQ(ok.message, "4096x3072");
}

// ---- Ghia CSV --------------------------------------------------------------------------------------------------

TEST_F(ReaderLimits, GhiaCsv) {
  using namespace conveyor::cavity;
  auto read = [](const fs::path& p) { return [p] { return std::to_string(read_ghia_csv(p).position.size()); }; };
  const std::string type = "conveyor::cavity::ghia_error";
  expect_refused(run_limited(read(write("nul.csv", std::string(100, '\0')))), type,
                 ":1: a NUL byte at column 1: binary data, not CSV text");
  expect_refused(run_limited(read(write("junk.csv", "y,Re100\n" + std::string(92, '\xff')))), type,
                 ":2: 1 fields, expected 2");
  if (fs::exists("/dev/zero"))
    expect_refused(run_limited(read("/dev/zero")), type, "is longer than 1048576 bytes (ghia_max_file_bytes");
}

} // namespace
