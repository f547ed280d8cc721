// Writes the graph files the command-line checks read (no GPU): sample.cgf (tests/support/sample_graph_file.hpp),
// sample-changed.cgf (the first kernel's scalar argument changed), sample-priority.cgf (its priority
// changed: a new instantiation), newer.cgf (a header from format version 2), truncated.cgf. Usage: make_graph_files FOLDER.
#include "support/sample_graph_file.hpp"

#include <conveyor/keep/graph_file.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_graph_files FOLDER\n");
    return 2;
  }
  const std::filesystem::path folder = argv[1];
  std::filesystem::create_directories(folder);
  conveyor::write_graph_file(folder / "sample.cgf", conveyor::test::sample_graph_file(3, 4));
  conveyor::write_graph_file(folder / "sample-changed.cgf", conveyor::test::sample_graph_file(5, 4));
  conveyor::graph_file priority = conveyor::test::sample_graph_file(3, 4);
  std::get<conveyor::saved_kernel_node>(priority.graphs[0].graph.nodes[0].parameters).attributes[0].values = {-4};
  conveyor::write_graph_file(folder / "sample-priority.cgf", priority);
  auto bytes = conveyor::to_bytes(conveyor::test::sample_graph_file());
  auto write = [&](const char* name, const std::vector<unsigned char>& b) {
    std::ofstream out(folder / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  };
  auto newer = bytes;
  newer[8] = 2;
  write("newer.cgf", newer);
  auto truncated = bytes;
  truncated.resize(bytes.size() / 2);
  write("truncated.cgf", truncated);
  return 0;
}
