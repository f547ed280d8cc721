// Host tests of the NCCL layer: nccl_error's message, result names and hints, the element type and
// reduction mappings, and the argument checks that need no GPU (empty communicators, bad device lists, span sizes).
#include <conveyor/nccl.hpp>
#include <conveyor/runtime/device.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using conveyor::nccl::nccl_error;
using conveyor::nccl::nccl_error_info;

std::string message_of(nccl_error_info info) { return nccl_error(std::move(info)).what(); }

TEST(NcclError, CarriesCallRankDeviceNcclTextAsyncErrorAndHint) {
  nccl_error_info info;
  info.result = ncclRemoteError;
  info.call = "ncclAllReduce";
  info.rank = 1;
  info.device = 3;
  info.last_error = "socket closed by peer";
  info.async_result = ncclSystemError;
  info.aborted = true;
  info.detail = "NCCL refused the call";
  const nccl_error e(info);
  const std::string m = e.what();
  EXPECT_EQ(e.result(), ncclRemoteError);
  EXPECT_EQ(e.call(), "ncclAllReduce");
  EXPECT_EQ(e.rank(), 1);
  EXPECT_EQ(e.device(), 3);
  EXPECT_FALSE(e.timed_out());
  EXPECT_TRUE(e.aborted());
  EXPECT_EQ(e.async_result(), ncclSystemError);
  EXPECT_EQ(e.last_error(), "socket closed by peer");
  const std::string expected_start = std::string("conveyor::nccl: ncclAllReduce failed on rank 1 (device 3): "
                                                 "ncclRemoteError (") +
                                     ncclGetErrorString(ncclRemoteError) +
                                     "): NCCL refused the call; NCCL says: "
                                     "socket closed by peer; asynchronous "
                                     "error: ncclSystemError (" +
                                     ncclGetErrorString(ncclSystemError) + "); the communicator was aborted. Hint: ";
  EXPECT_EQ(m.substr(0, expected_start.size()), expected_start) << m;
  EXPECT_NE(m.find("a peer (another rank, process or node) failed or disconnected"), std::string::npos) << m;
}

TEST(NcclError, TimeoutNamesRankDeviceWhatDidNotFinishAndTheAbort) {
  nccl_error_info info;
  info.result = ncclInProgress;
  info.call = "conveyor::nccl::communicator::synchronize";
  info.rank = 0;
  info.device = 0;
  info.timed_out = true;
  info.aborted = true;
  info.detail = "all work on the stream did not finish within 5000 ms";
  const nccl_error e(info);
  EXPECT_TRUE(e.timed_out());
  EXPECT_EQ(e.result(), ncclInProgress);
  const std::string expected = "conveyor::nccl: conveyor::nccl::communicator::synchronize timed out on rank 0 "
                               "(device 0): all work on the stream did not finish within 5000 ms; a peer may have "
                               "failed or not called the same collectives; the communicator was aborted. Hint: ";
  EXPECT_EQ(std::string(e.what()).substr(0, expected.size()), expected) << e.what();
  EXPECT_NE(std::string(e.what()).find("raise comm_options::timeout"), std::string::npos);
}

TEST(NcclError, LeavesOutWhatIsUnknownAndTakesAnOwnHint) {
  nccl_error_info info;
  info.result = ncclInvalidArgument;
  info.call = "conveyor::nccl::communicator::init_all";
  info.detail = "no devices given";
  info.hint = "name at least one device";
  EXPECT_EQ(message_of(info), std::string("conveyor::nccl: conveyor::nccl::communicator::init_all failed: "
                                          "ncclInvalidArgument (") +
                                  ncclGetErrorString(ncclInvalidArgument) +
                                  "): no devices given. Hint: name at least one device");
  info.device = 2;
  EXPECT_NE(message_of(info).find("init_all failed on device 2: "), std::string::npos);
  info.device = -1;
  info.rank = 4;
  EXPECT_NE(message_of(info).find("init_all failed on rank 4: "), std::string::npos);
}

TEST(NcclError, EveryResultHasItsNameAndEveryErrorAHint) {
  const std::pair<ncclResult_t, std::string_view> names[] = {
      {ncclSuccess, "ncclSuccess"},
      {ncclUnhandledCudaError, "ncclUnhandledCudaError"},
      {ncclSystemError, "ncclSystemError"},
      {ncclInternalError, "ncclInternalError"},
      {ncclInvalidArgument, "ncclInvalidArgument"},
      {ncclInvalidUsage, "ncclInvalidUsage"},
      {ncclRemoteError, "ncclRemoteError"},
      {ncclInProgress, "ncclInProgress"},
  };
  for (const auto& [result, name] : names) {
    EXPECT_EQ(conveyor::nccl::result_name(result), name);
    const bool is_error = result != ncclSuccess && result != ncclInProgress;
    EXPECT_EQ(!conveyor::nccl::hint_for(result).empty(), is_error) << name;
    EXPECT_FALSE(conveyor::nccl::hint_for(result, true).empty()) << name;
  }
  EXPECT_EQ(conveyor::nccl::result_name(static_cast<ncclResult_t>(99)), "unknown ncclResult_t");
}

TEST(NcclTypes, ElementTypesMapToNcclDataTypes) {
  using conveyor::nccl::data_type_of;
  static_assert(data_type_of<float>() == ncclFloat32);
  static_assert(data_type_of<double>() == ncclFloat64);
  static_assert(data_type_of<std::int32_t>() == ncclInt32);
  static_assert(data_type_of<std::int64_t>() == ncclInt64);
  static_assert(data_type_of<std::uint8_t>() == ncclUint8);
  static_assert(conveyor::nccl::is_element_type_v<float>);
  static_assert(!conveyor::nccl::is_element_type_v<unsigned>);
  static_assert(!conveyor::nccl::is_element_type_v<char>);
  static_assert(!conveyor::nccl::is_element_type_v<std::uint64_t>);
  EXPECT_EQ(data_type_of<std::int64_t>(), ncclInt64);
}

TEST(NcclTypes, ReductionsMapToNcclOps) {
  using conveyor::nccl::reduce_op;
  using conveyor::nccl::to_nccl;
  EXPECT_EQ(to_nccl(reduce_op::sum), ncclSum);
  EXPECT_EQ(to_nccl(reduce_op::prod), ncclProd);
  EXPECT_EQ(to_nccl(reduce_op::max), ncclMax);
  EXPECT_EQ(to_nccl(reduce_op::min), ncclMin);
  EXPECT_EQ(to_nccl(reduce_op::avg), ncclAvg);
}

TEST(NcclOptions, DefaultTimeoutIsOneMinute) {
  EXPECT_EQ(conveyor::nccl::comm_options{}.timeout, std::chrono::seconds(60));
}

// ---- checks that need no GPU --------------------------------------------------------------------------------------

TEST(NcclChecks, AnEmptyCommunicatorRefusesEveryUseAndSaysWhy) {
  conveyor::nccl::communicator empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_FALSE(empty.aborted());
  EXPECT_EQ(empty.get(), nullptr);
  EXPECT_EQ(empty.options().timeout, std::chrono::seconds(60));
  empty.abort(); // nothing to abort: no effect, no throw
  try {
    (void)empty.rank();
    FAIL() << "rank() of an empty communicator";
  } catch (const nccl_error& e) {
    EXPECT_EQ(e.result(), ncclInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("the communicator is empty"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)empty.size(), nccl_error);
  EXPECT_THROW((void)empty.device(), nccl_error);
  EXPECT_THROW(empty.check(), nccl_error);
  auto s = conveyor::stream::adopt(nullptr); // never used: the communicator check comes first
  float* p = nullptr;
  try {
    conveyor::nccl::all_reduce(empty, p, p, 0, conveyor::nccl::reduce_op::sum, s);
    FAIL() << "all_reduce on an empty communicator";
  } catch (const nccl_error& e) {
    EXPECT_EQ(e.call(), "ncclAllReduce");
    EXPECT_NE(std::string(e.what()).find("the communicator is empty (default-made or moved from)"), std::string::npos);
  }
  EXPECT_THROW(conveyor::nccl::broadcast(empty, p, p, 0, 0, s), nccl_error);
  EXPECT_THROW(conveyor::nccl::send(empty, p, 0, 0, s), nccl_error);
  EXPECT_THROW(empty.synchronize(s), nccl_error);
  // Moves keep it empty on both sides.
  conveyor::nccl::communicator moved(std::move(empty));
  EXPECT_FALSE(moved.valid());
  empty = std::move(moved);
  EXPECT_FALSE(empty.valid());
}

TEST(NcclChecks, SpansOfDifferentLengthsAndNullStreamsAreRefused) {
  std::vector<conveyor::nccl::communicator> comms(2);
  auto s = conveyor::stream::adopt(nullptr);
  const conveyor::stream* one[] = {&s};
  const conveyor::stream* with_null[] = {&s, nullptr};
  try {
    conveyor::nccl::synchronize(comms, one);
    FAIL() << "2 communicators, 1 stream";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("2 communicators but 1 streams"), std::string::npos) << e.what();
  }
  EXPECT_THROW(conveyor::nccl::agree_on_capture(comms, one, 0), std::invalid_argument);
  EXPECT_THROW(conveyor::nccl::synchronize(comms, with_null), std::invalid_argument);
  // Nothing to wait for: no error.
  conveyor::nccl::synchronize({}, {});
}

TEST(NcclChecks, InitAllRefusesNoDevicesDuplicatesAndDevicesThatDoNotExist) {
  using conveyor::nccl::communicator;
  try {
    (void)communicator::init_all({});
    FAIL() << "no devices";
  } catch (const nccl_error& e) {
    EXPECT_EQ(e.result(), ncclInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("no devices given"), std::string::npos) << e.what();
  }
  const int twice[] = {5, 7, 5};
  try {
    (void)communicator::init_all(twice);
    FAIL() << "device 5 twice";
  } catch (const nccl_error& e) {
    EXPECT_NE(std::string(e.what()).find("device 5 is listed twice (ranks 0 and 2)"), std::string::npos) << e.what();
  }
  const int missing[] = {1000};
  try {
    (void)communicator::init_all(missing);
    FAIL() << "device 1000";
  } catch (const nccl_error& e) {
    EXPECT_EQ(e.rank(), 0);
    EXPECT_NE(std::string(e.what()).find("device 1000 does not exist: "), std::string::npos) << e.what();
  }
}

TEST(NcclChecks, InitRankRefusesBadRanksAndDevices) {
  using conveyor::nccl::communicator;
  const conveyor::nccl::unique_id id{}; // never used: the checks come first
  try {
    (void)communicator::init_rank(0, 0, id, 0);
    FAIL() << "0 ranks";
  } catch (const nccl_error& e) {
    EXPECT_NE(std::string(e.what()).find("0 ranks: a communicator has at least one"), std::string::npos);
  }
  try {
    (void)communicator::init_rank(2, 2, id, 0);
    FAIL() << "rank 2 of 2";
  } catch (const nccl_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 is outside [0, 2)"), std::string::npos) << e.what();
  }
  try {
    (void)communicator::init_rank(2, 1, id, -1);
    FAIL() << "device -1";
  } catch (const nccl_error& e) {
    EXPECT_EQ(e.rank(), 1);
    EXPECT_NE(std::string(e.what()).find("device -1 does not exist"), std::string::npos) << e.what();
  }
}

TEST(NcclChecks, AGroupEndsOnceAndAnEmptyGroupIsNoError) {
  conveyor::nccl::group g;
  g.end();
  EXPECT_THROW(g.end(), std::logic_error);
  { conveyor::nccl::group unended; } // the destructor ends it
}

TEST(NcclChecks, ARefusedCallFailsItsGroup) {
  conveyor::nccl::communicator empty;
  auto s = conveyor::stream::adopt(nullptr);
  conveyor::nccl::group g;
  float* p = nullptr;
  EXPECT_THROW(conveyor::nccl::all_reduce(empty, p, p, 0, conveyor::nccl::reduce_op::sum, s), nccl_error);
  try {
    g.end();
    FAIL() << "a group with a refused call ended without error";
  } catch (const nccl_error& e) {
    EXPECT_EQ(e.call(), "ncclGroupEnd");
    EXPECT_NE(std::string(e.what()).find("a call in the group failed or was refused"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the communicator is empty"), std::string::npos) << e.what();
  }
  // The next group starts clean.
  conveyor::nccl::group next;
  next.end();
}

TEST(NcclChecks, AnExceptionLeavingAGroupOpenFailsTheGroupAroundIt) {
  conveyor::nccl::group outer;
  try {
    conveyor::nccl::group inner;
    throw std::runtime_error("user code failed inside the group");
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "user code failed inside the group"); // the user's exception, not the group's
  }
  try {
    outer.end();
    FAIL() << "a group left open by an exception ended without error";
  } catch (const nccl_error& e) {
    EXPECT_EQ(e.call(), "ncclGroupEnd");
    EXPECT_NE(std::string(e.what()).find("an exception left the group open"), std::string::npos) << e.what();
  }
  // A group opened and ended while no exception leaves it is no error; the next group starts clean.
  conveyor::nccl::group next;
  next.end();
}

} // namespace
