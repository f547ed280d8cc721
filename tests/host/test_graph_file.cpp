// Graph files without a GPU (docs/graph-files.md): the format round-trips every node kind, is deterministic, refuses
// each kind of bad input with the offset or node and what was expected, and survives thousands of mutated files
// (reader, summary, DOT/JSON, diff) with no crash, hang or memory blow-up; offline describe and diff.
#include "support/sample_graph_file.hpp"

#include <conveyor/keep/graph_file.hpp>
#include <conveyor/keep/inspect.hpp>
#include <conveyor/observe/export.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zstd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <sys/resource.h>

namespace {

using conveyor::graph_file;
using conveyor::graph_file_error;
using conveyor::test::sample_graph_file;

// The message from_bytes throws for `bytes`, or "" when it reads them.
std::string refusal(const std::vector<unsigned char>& bytes, const conveyor::graph_file_limits& limits = {}) {
  try {
    (void)conveyor::from_bytes(bytes, limits);
  } catch (const graph_file_error& e) {
    return e.what();
  }
  return {};
}

std::string check_refusal(const graph_file& f) {
  try {
    conveyor::graph_file_check(f);
  } catch (const graph_file_error& e) {
    return e.what();
  }
  return {};
}

// A file whose payload is `document` (any bytes) compressed, with a consistent header.
std::vector<unsigned char> with_document(const std::vector<unsigned char>& document, std::uint32_t version = 1) {
  std::vector<unsigned char> frame(ZSTD_compressBound(document.size()));
  frame.resize(ZSTD_compress(frame.data(), frame.size(), document.data(), document.size(), 3));
  std::vector<unsigned char> out = {0x89, 'C', 'N', 'V', 'G', 'R', 'F', '\n'};
  auto put = [&](std::uint64_t v, int width) {
    for (int i = 0; i < width; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
  };
  put(version, 4);
  put(0, 4);
  put(frame.size(), 8);
  put(document.size(), 8);
  out.insert(out.end(), frame.begin(), frame.end());
  return out;
}

// The CBOR document of a file's bytes.
std::vector<unsigned char> document_of(const std::vector<unsigned char>& bytes) {
  std::uint64_t size = 0;
  for (int i = 0; i < 8; ++i) size |= std::uint64_t{bytes[24 + i]} << (8 * i);
  std::vector<unsigned char> doc(size);
  doc.resize(ZSTD_decompress(doc.data(), doc.size(), bytes.data() + 32, bytes.size() - 32));
  return doc;
}

TEST(GraphFile, EveryNodeKindRoundTripsExactly) {
  const graph_file f = sample_graph_file();
  const auto bytes = conveyor::to_bytes(f);
  const graph_file back = conveyor::from_bytes(bytes);
  EXPECT_EQ(back, f);
  ASSERT_EQ(back.graphs.size(), 2U);
  EXPECT_EQ(back.graphs[0].graph.nodes.size(), 15U);
  std::set<conveyor::node_kind> kinds;
  for (const auto& n : back.graphs[0].graph.nodes) kinds.insert(n.kind);
  EXPECT_EQ(kinds.size(), 11U); // kernel, memcpy, memset, host, child, empty, event x2, alloc, free, conditional
  EXPECT_EQ(std::get<conveyor::saved_kernel_node>(back.graphs[0].graph.nodes[0].parameters).attributes.at(0).values,
            std::vector<std::int64_t>{-2});
  EXPECT_EQ(back.graphs[1].key->entries.at(0).address.buffer, 0U);
}

TEST(GraphFile, TheSameGraphsGiveTheSameBytes) {
  EXPECT_EQ(conveyor::to_bytes(sample_graph_file()), conveyor::to_bytes(sample_graph_file()));
  EXPECT_NE(conveyor::to_bytes(sample_graph_file(3)), conveyor::to_bytes(sample_graph_file(4)));
}

TEST(GraphFile, HeaderRefusalsNameTheOffsetAndWhatWasExpected) {
  const auto good = conveyor::to_bytes(sample_graph_file());
  auto bytes = good;
  bytes[1] = 'X';
  EXPECT_NE(refusal(bytes).find("byte 0: not a Conveyor graph file"), std::string::npos) << refusal(bytes);
  bytes = good;
  bytes[8] = 2;
  EXPECT_NE(refusal(bytes).find("byte 8: format version 2, and this Conveyor reads versions 1 to 1"), std::string::npos)
      << refusal(bytes);
  EXPECT_NE(refusal(bytes).find("newer"), std::string::npos);
  bytes = good;
  bytes[12] = 1;
  EXPECT_NE(refusal(bytes).find("byte 12: flags 0x1"), std::string::npos) << refusal(bytes);
  bytes = good;
  bytes.resize(20);
  EXPECT_NE(refusal(bytes).find("byte 20: the file ends inside its 32-byte header"), std::string::npos);
  bytes = good;
  bytes.push_back(0);
  EXPECT_NE(refusal(bytes).find("byte 16: a compressed payload of"), std::string::npos) << refusal(bytes);
  conveyor::graph_file_limits small;
  small.max_document_bytes = 100;
  EXPECT_NE(refusal(good, small).find("byte 24: a document of"), std::string::npos) << refusal(good, small);
  EXPECT_NE(refusal(good, small).find("above the reader's limit of 100"), std::string::npos);
}

TEST(GraphFile, APayloadThatIsNotWhatTheHeaderSaysIsRefused) {
  const auto good = conveyor::to_bytes(sample_graph_file());
  auto bytes = good;
  bytes[bytes.size() - 2] ^= 0x55; // inside the frame's checksum or last block
  EXPECT_NE(refusal(bytes).find("the compressed payload is corrupt"), std::string::npos) << refusal(bytes);
  bytes = good;
  for (int i = 0; i < 8; ++i) bytes[24 + i] = 0;
  bytes[24] = 10; // a document shorter than the frame holds
  EXPECT_NE(refusal(bytes).find("longer than the 10 bytes the header gives"), std::string::npos) << refusal(bytes);
  bytes = good;
  bytes[25] ^= 0x01; // a document longer than the frame holds
  EXPECT_NE(refusal(bytes).find("but the frame holds"), std::string::npos) << refusal(bytes);
}

TEST(GraphFile, ADocumentThatIsNotCborOrNestsTooDeeplyIsRefusedWithoutRecursingIntoIt) {
  EXPECT_NE(refusal(with_document({0xff, 0x00, 0x13})).find("CBOR document is malformed"), std::string::npos);
  std::vector<unsigned char> deep(200000, 0x81); // arrays of one element, nested 200,000 deep
  deep.push_back(0x00);
  EXPECT_NE(refusal(with_document(deep)).find("nests deeper than"), std::string::npos) << refusal(with_document(deep));
}

TEST(GraphFile, SchemaRefusalsNameTheFieldAndTheNode) {
  auto doc = nlohmann::json::from_cbor(document_of(conveyor::to_bytes(sample_graph_file())));
  doc["graphs"][0]["graph"]["nodes"][0]["grid"] = "four";
  auto text = refusal(with_document(nlohmann::json::to_cbor(doc)));
  EXPECT_NE(text.find("graph 'step' node 0 (kernel): 'grid': expected an array of 3 unsigned integers, got string"),
            std::string::npos)
      << text;
  doc = nlohmann::json::from_cbor(document_of(conveyor::to_bytes(sample_graph_file())));
  doc["graphs"][0]["graph"]["nodes"][2].erase("source");
  text = refusal(with_document(nlohmann::json::to_cbor(doc)));
  EXPECT_NE(text.find("graph 'step' node 2 (memcpy): missing field 'source'"), std::string::npos) << text;
  doc = nlohmann::json::from_cbor(document_of(conveyor::to_bytes(sample_graph_file())));
  doc["version"] = 7;
  EXPECT_NE(refusal(with_document(nlohmann::json::to_cbor(doc))).find("the document says version 7, the header 1"),
            std::string::npos);
  doc = nlohmann::json::from_cbor(document_of(conveyor::to_bytes(sample_graph_file())));
  doc["graphs"][0]["graph"]["nodes"][0]["kind"] = "ext_semaphore_wait";
  text = refusal(with_document(nlohmann::json::to_cbor(doc)));
  EXPECT_NE(text.find("which no graph file holds"), std::string::npos) << text;
}

TEST(GraphFile, TextThatIsNotUtf8IsRefused) {
  auto doc = nlohmann::json::from_cbor(document_of(conveyor::to_bytes(sample_graph_file())));
  doc["graphs"][0]["graph"]["nodes"][0]["label"] = std::string("ax\xffpy");
  const auto text = refusal(with_document(nlohmann::json::to_cbor(doc)));
  EXPECT_NE(text.find("graph 'step' node 0 (kernel): 'label': expected a string of valid UTF-8"), std::string::npos)
      << text;
}

// RFC 3629 case by case: well-formed sequences of 1 to 4 bytes load; a lone continuation byte, an overlong form, a
// surrogate, a code point above U+10FFFF, a sequence cut short and a bad continuation byte are refused.
TEST(GraphFile, Utf8IsCheckedByRfc3629) {
  const std::vector<std::pair<std::string, bool>> cases{{"plain", true},
                                                        {"caf\xC3\xA9", true},
                                                        {"\xE2\x82\xAC", true},
                                                        {"\xF0\x9F\x98\x80", true},
                                                        {"\xF4\x8F\xBF\xBF", true},
                                                        {"\x80", false},
                                                        {"\xC0\x80", false},
                                                        {"\xE0\x80\xAF", false},
                                                        {"\xED\xA0\x80", false},
                                                        {"\xF4\x90\x80\x80", false},
                                                        {"ab\xE2\x82", false},
                                                        {"\xE2\x28\xA1", false},
                                                        {"\xF8\x88\x80\x80", false}};
  for (const auto& [label, valid] : cases) {
    auto doc = nlohmann::json::from_cbor(document_of(conveyor::to_bytes(sample_graph_file())));
    doc["graphs"][0]["graph"]["nodes"][0]["label"] = label;
    const auto text = refusal(with_document(nlohmann::json::to_cbor(doc)));
    if (valid) EXPECT_EQ(text, "") << "refused a well-formed label: " << text;
    else EXPECT_NE(text.find("expected a string of valid UTF-8"), std::string::npos) << "accepted: " << text;
  }
}

TEST(GraphFile, EveryRuleALoaderReliesOnIsChecked) {
  struct rule {
    const char* expected;
    void (*mutate)(graph_file&);
  };
  auto step = [](graph_file& f) -> conveyor::saved_graph& { return f.graphs[0].graph; };
  const rule rules[] = {
      {"a dependency on node 99", [](graph_file& f) { f.graphs[0].graph.nodes[3].dependencies[0].from = 99; }},
      {"its dependencies make a cycle",
       [](graph_file& f) {
         f.graphs[0].graph.nodes[0].dependencies.push_back({14, 0, 0, 0});
       }},
      {"relocation at argument offset 8: expected the word zero",
       [](graph_file& f) {
         std::get<conveyor::saved_kernel_node>(f.graphs[0].graph.nodes[0].parameters).arguments[9] = 1;
       }},
      {"bytes [4000, 5024) of buffer 'x', which holds 4096 bytes",
       [](graph_file& f) {
         std::get<conveyor::saved_memcpy_node>(f.graphs[0].graph.nodes[2].parameters).destination.address.offset = 4000;
       }},
      {"kernel 9 of a table of 3",
       [](graph_file& f) { std::get<conveyor::saved_kernel_node>(f.graphs[0].graph.nodes[0].parameters).kernel = 9; }},
      {"8 argument bytes for kernel '_Z4axpyfPKfPfi', whose parameters take 32",
       [](graph_file& f) { std::get<conveyor::saved_kernel_node>(f.graphs[0].graph.nodes[1].parameters).kernel = 0; }},
      {"a kind CUDA does not allow in a conditional body",
       [](graph_file& f) {
         f.graphs[0].graph.nodes[12].bodies[0].nodes.push_back(
             conveyor::test::simple_node(conveyor::node_kind::host, conveyor::saved_reference{0}, {}));
       }},
      {"both ends must be kernel nodes",
       [](graph_file& f) {
         f.graphs[0].graph.nodes[2].dependencies[0] = {0, 1, 0, 1};
       }},
      {"condition 5 of 2",
       [](graph_file& f) {
         std::get<conveyor::saved_conditional_node>(f.graphs[0].graph.nodes[12].parameters).condition = 5;
       }},
      {"made by a second allocation node",
       [](graph_file& f) { f.graphs[0].graph.nodes.push_back(f.graphs[0].graph.nodes[10]); }},
      {"value 4660 wider than its 1-byte elements",
       [](graph_file& f) {
         std::get<conveyor::saved_memset_node>(f.graphs[0].graph.nodes[4].parameters).value = 0x1234;
       }},
      {"expected a name unique in the file", [](graph_file& f) { f.buffers[1].name = "x"; }},
      {"contents of 3 bytes for a buffer of 4096",
       [](graph_file& f) { f.buffers[0].contents = std::vector<unsigned char>(3); }},
      {"host function 4 of a table of 1",
       [](graph_file& f) { std::get<conveyor::saved_reference>(f.graphs[0].graph.nodes[5].parameters).index = 4; }},
      {"2 nested graphs: expected 1", [](graph_file& f) { f.graphs[0].graph.nodes[6].bodies.push_back({}); }},
      {"a kind CUDA does not allow in a child graph",
       [](graph_file& f) {
         f.graphs[0].graph.nodes[6].bodies[0].nodes.push_back(
             conveyor::test::simple_node(conveyor::node_kind::mem_free, conveyor::saved_mem_free_node{}, {}));
       }},
      {"parameters of another kind than the node's",
       [](graph_file& f) { f.graphs[0].graph.nodes[0].parameters = conveyor::saved_reference{0}; }},
      {"a graph name unique in the file", [](graph_file& f) { f.graphs[1].name = "step"; }},
  };
  for (const auto& r : rules) {
    graph_file f = sample_graph_file();
    (void)step;
    r.mutate(f);
    const std::string text = check_refusal(f);
    EXPECT_NE(text.find(r.expected), std::string::npos) << "expected '" << r.expected << "', got '" << text << "'";
    EXPECT_THROW((void)conveyor::to_bytes(f), graph_file_error) << r.expected; // nothing invalid is written either
  }
}

TEST(GraphFile, NestingBeyondTheLimitIsRefusedNamingTheNode) {
  graph_file f = sample_graph_file();
  conveyor::saved_graph inner;
  inner.nodes.push_back(conveyor::test::simple_node(conveyor::node_kind::empty, std::monostate{}, {}));
  for (int d = 0; d < 30; ++d) {
    conveyor::saved_graph outer;
    auto child = conveyor::test::simple_node(conveyor::node_kind::child_graph, std::monostate{}, {});
    child.bodies.push_back(inner);
    outer.nodes.push_back(child);
    inner = outer;
  }
  f.graphs[1].graph = inner;
  const std::string text = check_refusal(f);
  EXPECT_NE(text.find("graphs nested deeper than 24 levels"), std::string::npos) << text;
  EXPECT_NE(text.find("graph 'bucket' node 0 (child_graph) body 0"), std::string::npos) << text;
}

TEST(GraphFileOffline, DescribeGivesKernelNamesShapesAndNestedGraphsForExports) {
  const graph_file f = sample_graph_file();
  const conveyor::graph_description d = conveyor::describe(f, "step");
  ASSERT_EQ(d.nodes.size(), 15U);
  EXPECT_EQ(d.nodes[0].kernel_name, "axpy");
  EXPECT_EQ(d.nodes[0].label, "axpy");
  EXPECT_EQ(d.nodes[0].attributes, std::vector<std::string>{"priority -2"});
  EXPECT_EQ(d.nodes[2].copy_kind, "HtoD"); // a default copy from pinned host to device memory
  EXPECT_EQ(d.nodes[2].bytes, 1024U);
  EXPECT_EQ(d.nodes[6].bodies.size(), 1U);
  EXPECT_EQ(d.nodes[12].conditional_type, "while");
  EXPECT_EQ(d.nodes[13].bodies.size(), 2U);
  EXPECT_EQ(d.edge_type_of(0), conveyor::edge_type::programmatic);
  const std::string dot = conveyor::to_dot(d, "step");
  EXPECT_NE(dot.find("axpy"), std::string::npos);
  EXPECT_NE(dot.find("dashed"), std::string::npos); // the programmatic edge
  const auto json = nlohmann::json::parse(conveyor::to_json(d));
  EXPECT_EQ(json["nodes"].size(), 15U);
  const std::string summary = conveyor::summary(f);
  EXPECT_NE(summary.find("'step': 15 nodes (20 with nested graphs:"), std::string::npos) << summary;
  EXPECT_NE(summary.find("6 typed and 1 scanned relocations"), std::string::npos) << summary;
  EXPECT_NE(summary.find("step: 1 parameters, resolved through the registry at load"), std::string::npos) << summary;
  const auto whole = nlohmann::json::parse(conveyor::to_json(f));
  EXPECT_EQ(whole["buffers"][0]["contents"]["bytes"], 4096);
}

TEST(GraphFileOffline, DiffSaysWhatChangedAndWhatCouldApplyIt) {
  const graph_file a = sample_graph_file(3, 4);
  EXPECT_TRUE(conveyor::diff(a, "step", a, "step").identical());
  EXPECT_EQ(conveyor::update_verdict(conveyor::diff(a, "step", a, "step")), "identical: nothing to apply");
  const graph_file b = sample_graph_file(5, 4);
  auto d = conveyor::diff(a, "step", b, "step");
  ASSERT_EQ(d.changed.size(), 1U);
  EXPECT_EQ(d.changed[0].position, 0U);
  EXPECT_EQ(d.changed[0].what, "arguments 0");
  EXPECT_TRUE(d.changed[0].settable);
  EXPECT_EQ(conveyor::update_verdict(d), "per-node setters (1 node), or a whole-graph update");
  graph_file c = sample_graph_file(3, 8);
  std::get<conveyor::saved_kernel_node>(c.graphs[0].graph.nodes[0].parameters).attributes[0].values = {-4};
  d = conveyor::diff(a, "step", c, "step");
  ASSERT_EQ(d.changed.size(), 1U);
  EXPECT_NE(d.changed[0].what.find("launch shape grid 4x1x1 block 128x1x1 -> grid 8x1x1"), std::string::npos)
      << d.changed[0].what;
  EXPECT_NE(d.changed[0].what.find("attributes: [priority -2] -> [priority -4]"), std::string::npos)
      << d.changed[0].what;
  EXPECT_NE(conveyor::update_verdict(d).find("a new instantiation: node 0 (axpy)"), std::string::npos);
  graph_file e = sample_graph_file();
  std::get<conveyor::saved_memcpy_node>(e.graphs[0].graph.nodes[2].parameters).destination.address = {1, 0};
  d = conveyor::diff(a, "step", e, "step");
  ASSERT_EQ(d.changed.size(), 1U);
  EXPECT_EQ(d.changed[0].what,
            "copy: destination 'x' pitch 1024 size 1024x1 at 0,0,0 -> 'y' pitch 1024 size 1024x1 at 0,0,0");
  graph_file t = sample_graph_file();
  t.graphs[0].graph.nodes[4].dependencies.clear();
  d = conveyor::diff(a, "step", t, "step");
  EXPECT_FALSE(d.same_topology);
  EXPECT_NE(d.topology_reason.find("node 4 (memset): its dependencies"), std::string::npos) << d.topology_reason;
  EXPECT_THROW((void)conveyor::diff(a, "nope", a, "step"), std::out_of_range);
}

// Runs everything `conveyor graph show` and `graph diff` run on a file.
void read_and_show(const std::vector<unsigned char>& bytes, const graph_file& seed) {
  graph_file f;
  try {
    f = conveyor::from_bytes(bytes);
  } catch (const graph_file_error&) {
    return;
  }
  (void)conveyor::summary(f);
  (void)conveyor::to_json(f);
  for (const auto& g : f.graphs) {
    (void)conveyor::to_dot(conveyor::describe(f, g.name), g.name);
    if (seed.find(g.name) != nullptr) (void)conveyor::update_verdict(conveyor::diff(seed, g.name, f, g.name));
  }
}

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

TEST(GraphFileFuzz, ThousandsOfMutatedFilesNeverCrashHangOrBlowUpMemory) {
  const graph_file seed = sample_graph_file();
  const auto good = conveyor::to_bytes(seed);
  const auto document = document_of(good);
  std::mt19937_64 rng(20261205);
  const long rss_before = peak_rss_kib();
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t read = 0;
  constexpr int raw = 10000;
  constexpr int structured = 10000;
  for (int i = 0; i < raw + structured; ++i) {
    std::vector<unsigned char> bytes = i < raw ? good : document;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      const std::size_t at = rng() % bytes.size();
      switch (rng() % 5) {
      case 0: bytes[at] ^= static_cast<unsigned char>(1U << (rng() % 8)); break;
      case 1: bytes[at] = static_cast<unsigned char>(rng()); break;
      case 2: bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(at)); break;
      case 3: bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at), static_cast<unsigned char>(rng())); break;
      default: bytes.resize(std::max<std::size_t>(at, 1)); break;
      }
    }
    if (i >= raw) bytes = with_document(bytes);
    try {
      read_and_show(bytes, seed);
      ++read;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "mutant " << i << " threw something other than graph_file_error: " << e.what();
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(read, static_cast<std::size_t>(raw + structured));
  EXPECT_LT(seconds, 120.0) << "20,000 files should take seconds";
  EXPECT_LT(peak_rss_kib() - rss_before, 256L * 1024) << "peak memory grew by more than 256 MiB";
  std::cout << "fuzz: " << raw + structured << " mutated files in " << seconds << " s, peak RSS growth "
            << (peak_rss_kib() - rss_before) << " KiB\n";
}

} // namespace
