#pragma once
// MLCommons Chakra execution traces (ETs), as the trace workload replays
// them. A trace is one file per rank, `<name>.<rank>.et` (gzip allowed:
// `.et.gz`, or a gzip stream under either name): protobuf messages of the
// schema `et_def.proto` (mlcommons/chakra, schema/protobuf; third_party/
// chakra here), each preceded by its length as a varint — a GlobalMetadata,
// then the graph's Nodes. The messages are decoded by the code protoc
// generates from that schema; this header hides it and gives the nodes as
// plain values with the attributes Chakra's own feeder reads (is_cpu_op,
// comm_type, comm_size, comm_src, comm_dst, comm_tag, pg_name) and the
// collective's root where a trace names one (root, root_rank).

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace lanes::scenarios::chakra {

// et_def.proto's NodeType and CollectiveCommType, by their numbers
enum class NodeType : int { invalid = 0, metadata, mem_load, mem_store, comp, comm_send, comm_recv, comm_coll };
enum class CommType : int {
  all_reduce = 0, reduce, all_gather, gather, scatter, broadcast, all_to_all, reduce_scatter, reduce_scatter_block,
  barrier
};
const char* type_name(NodeType t);  // "COMP_NODE", ...
const char* comm_name(CommType t);  // "ALL_REDUCE", ...

struct Node {
  uint64_t id = 0;
  std::string name;
  int type = 0;  // NodeType's number as the file has it (an unknown one kept, for the error)
  std::vector<uint64_t> ctrl_deps, data_deps;
  uint64_t start_us = 0, duration_us = 0;
  bool is_cpu_op = false;  // Chakra's feeder: false unless the node says so
  std::optional<int64_t> comm_type;
  std::optional<int64_t> comm_size;
  std::optional<int64_t> comm_src, comm_dst, comm_tag, root;
  std::string pg_name;
};

struct Trace {
  std::string file;
  std::string version;  // GlobalMetadata's version ("" where the trace leaves it out)
  std::map<std::string, std::string> metadata;  // GlobalMetadata's string and integer attributes
  std::vector<Node> nodes;  // in file order
};

// A trace that cannot be read: "FILE: message K at byte B: why".
struct TraceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads one rank's file (gzip or plain; at most 1 GiB once inflated).
// Checks the framing and the messages only: what a replay needs of the
// nodes is the plan's to check (trace_replay.hpp).
Trace read(const std::string& path);
// The same from BYTES (the file's content), named FILE in errors.
Trace parse(const std::string& bytes, const std::string& file);

// The file's bytes for T (plain, not gzip): its GlobalMetadata (version
// and the string attributes of metadata), then its nodes with the
// attributes read above that they have. parse(serialize(t)) gives t back.
std::string serialize(const Trace& t);

// The rank files of a trace named by PREFIX ("dir/name": dir/name.0.et,
// dir/name.1.et, ... or .et.gz), in rank order. Throws TraceError when
// there is none, or the ranks found are not 0..N-1.
std::vector<std::string> rank_files(const std::string& prefix);

}  // namespace lanes::scenarios::chakra
