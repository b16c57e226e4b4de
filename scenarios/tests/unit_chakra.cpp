// The Chakra reader on the traces lanes ships: astra-sim's microbenchmarks
// (every rank's file, every field of every node) and the real PyTorch
// job's trace from mlcommons/chakra (gzip), and what it refuses: a file cut
// short, a gzip stream cut short, a length that runs past the end, bytes
// that are no trace, and rank files with a gap.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <zlib.h>

#include "lanes/scenarios/chakra.hpp"
#include "support.hpp"

using namespace lanes::scenarios;

namespace {

const std::string kTraces = LANES_TRACES_DIR;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string gzip(const std::string& in) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string error_of(const std::string& bytes, const std::string& name = "t.0.et") {
  try {
    chakra::parse(bytes, name);
  } catch (const chakra::TraceError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("chakra: astra-sim's microbenchmarks, every rank, every node read as written", "[unit]") {
  const std::map<std::string, chakra::CommType> colls = {{"all_reduce", chakra::CommType::all_reduce},
                                                         {"all_gather", chakra::CommType::all_gather},
                                                         {"all_to_all", chakra::CommType::all_to_all},
                                                         {"reduce_scatter", chakra::CommType::reduce_scatter}};
  for (const auto& [name, type] : colls)
    for (int n : {4, 8, 16}) {
      std::string dir = kTraces + "/astra-sim/" + name + "/" + std::to_string(n) + "npus_1MB";
      INFO(dir);
      auto files = chakra::rank_files(dir + "/" + name);
      REQUIRE(files.size() == static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        CHECK(files[static_cast<size_t>(r)] == dir + "/" + name + "." + std::to_string(r) + ".et");
        auto t = chakra::read(files[static_cast<size_t>(r)]);
        CHECK(t.version == "0.0.4");
        CHECK(t.metadata.empty());
        REQUIRE(t.nodes.size() == 1);
        const auto& node = t.nodes[0];
        // the generator numbers its nodes across the ranks' files
        CHECK(node.id == static_cast<uint64_t>(r));
        CHECK(node.name == name + "_" + std::to_string(n) + "npus_1MB");
        CHECK(node.type == static_cast<int>(chakra::NodeType::comm_coll));
        CHECK_FALSE(node.is_cpu_op);
        CHECK(node.comm_type == static_cast<int64_t>(type));
        CHECK(node.comm_size == 1048576);
        CHECK(node.ctrl_deps.empty());
        CHECK(node.data_deps.empty());
        CHECK(node.duration_us == 0);
        CHECK_FALSE(node.root);
        CHECK_FALSE(node.comm_src);
      }
    }
}

TEST_CASE("chakra: the real PyTorch job's trace (gzip): its nodes, collectives and dependencies", "[unit]") {
  auto files = chakra::rank_files(kTraces + "/chakra-feeder/chakra");
  REQUIRE(files.size() == 1);
  auto t = chakra::read(files[0]);
  CHECK(t.metadata.at("schema") == "1.0.1");
  CHECK(t.metadata.at("pid") == "114598");
  REQUIRE(t.nodes.size() == 3664);
  std::map<int, int> types;
  int with_size = 0, all_reduce = 0, broadcast = 0, cpu = 0, deps = 0;
  int64_t bytes = 0;
  uint64_t gpu_us = 0;
  std::map<uint64_t, bool> ids;
  for (const auto& n : t.nodes) {
    ++types[n.type];
    ids[n.id] = true;
    cpu += n.is_cpu_op;
    deps += static_cast<int>(n.ctrl_deps.size() + n.data_deps.size());
    if (n.type == static_cast<int>(chakra::NodeType::comp) && !n.is_cpu_op) gpu_us += n.duration_us;
    if (n.comm_size) {
      ++with_size;
      bytes += *n.comm_size;
      all_reduce += n.comm_type == static_cast<int64_t>(chakra::CommType::all_reduce);
      broadcast += n.comm_type == static_cast<int64_t>(chakra::CommType::broadcast);
    }
  }
  CHECK(ids.size() == t.nodes.size());  // every id once
  CHECK(types[static_cast<int>(chakra::NodeType::comp)] == 3643);
  CHECK(types[static_cast<int>(chakra::NodeType::comm_coll)] == 21);
  CHECK(with_size == 7);  // the NCCL kernels; the other 14 are the CPU-side c10d calls
  CHECK(all_reduce == 5);
  CHECK(broadcast == 2);
  CHECK(bytes == 102441032);
  CHECK(cpu == 2448);
  CHECK(deps > 0);
  CHECK(gpu_us > 0);
}

TEST_CASE("chakra: a file cut short, a gzip cut short, a length past the end and bytes that are no trace are refused",
          "[unit]") {
  std::string good = slurp(kTraces + "/astra-sim/all_reduce/4npus_1MB/all_reduce.1.et");
  REQUIRE(good.size() > 40);
  CHECK_NOTHROW(chakra::parse(good, "t.1.et"));
  CHECK_NOTHROW(chakra::parse(gzip(good), "t.1.et.gz"));  // gzip under any name

  // cut inside the node: its length says more than is left
  auto cut = error_of(good.substr(0, good.size() - 5), "t.1.et");
  CHECK_THAT(cut, Catch::Contains("t.1.et: message 1 at byte"));
  CHECK_THAT(cut, Catch::Contains("(truncated)"));
  // cut inside a length varint
  std::string metadata_only = good.substr(0, static_cast<size_t>(good[0]) + 1);
  CHECK_THAT(error_of(metadata_only + "\xff"), Catch::Contains("message 1 at byte"));
  CHECK_THAT(error_of(metadata_only + "\xff"), Catch::Contains("cut off or malformed"));
  std::string gz = gzip(good);
  CHECK_THAT(error_of(gz.substr(0, gz.size() / 2), "t.1.et.gz"), Catch::Contains("ends early"));
  CHECK_THAT(error_of(""), Catch::Contains("empty"));
  // a node whose bytes are no protobuf message: field 0 is never valid
  std::string junk = metadata_only + std::string("\x04\x00\x00\x00\x00", 5);
  CHECK_THAT(error_of(junk), Catch::Contains("is not a Chakra Node"));
  CHECK_THAT(error_of("\x0a\x01", "x.0.et"), Catch::Contains("x.0.et: message 0 at byte 0: 10 bytes long, 1 left"));
}

TEST_CASE("chakra: rank files must be 0..N-1, each once", "[unit]") {
  lanes::test::TempDir dir;
  std::string good = slurp(kTraces + "/astra-sim/all_reduce/4npus_1MB/all_reduce.0.et");
  auto put = [&](const std::string& f) { std::ofstream(dir.path() + "/" + f, std::ios::binary) << good; };
  put("job.0.et");
  put("job.2.et");
  put("jobs.1.et");  // another trace's
  try {
    chakra::rank_files(dir.path() + "/job");
    FAIL("a gap taken");
  } catch (const chakra::TraceError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("rank 1 has no file"));
  }
  put("job.1.et.gz");
  CHECK(chakra::rank_files(dir.path() + "/job").size() == 3);
  put("job.1.et");
  CHECK_THROWS_WITH(chakra::rank_files(dir.path() + "/job"), Catch::Contains("rank 1 has two files"));
  CHECK_THROWS_WITH(chakra::rank_files(dir.path() + "/none"), Catch::Contains("no file none.<rank>.et"));
  CHECK_THROWS_WITH(chakra::rank_files(dir.path() + "/nodir/job"), Catch::Contains("no such folder"));
}
