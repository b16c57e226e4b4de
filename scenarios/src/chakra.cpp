#include "lanes/scenarios/chakra.hpp"

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "et_def.pb.h"

namespace lanes::scenarios::chakra {

namespace {

constexpr uint64_t kMaxInflated = 1ull << 30;

const char* const kNodeTypes[] = {"INVALID_NODE",   "METADATA_NODE",  "MEM_LOAD_NODE",  "MEM_STORE_NODE",
                                  "COMP_NODE",      "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE"};
const char* const kCommTypes[] = {"ALL_REDUCE", "REDUCE",    "ALL_GATHER",     "GATHER",
                                  "SCATTER",    "BROADCAST", "ALL_TO_ALL",     "REDUCE_SCATTER",
                                  "REDUCE_SCATTER_BLOCK", "BARRIER"};

std::string inflate_gzip(const std::string& in, const std::string& file) {
  z_stream z{};
  if (::inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw TraceError(file + ": zlib would not start");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (out.size() >= kMaxInflated) {
      ::inflateEnd(&z);
      throw TraceError(fmt::format("{}: more than {} MiB once inflated", file, kMaxInflated >> 20));
    }
    size_t at = out.size();
    out.resize(at + (1 << 20));
    z.next_out = reinterpret_cast<Bytef*>(out.data() + at);
    z.avail_out = 1 << 20;
    rc = ::inflate(&z, Z_NO_FLUSH);
    out.resize(at + (1 << 20) - z.avail_out);
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK) {
      std::string why = rc == Z_BUF_ERROR ? "the gzip stream ends early (a truncated file)"
                                          : fmt::format("not a valid gzip stream ({})", z.msg ? z.msg : "zlib error");
      ::inflateEnd(&z);
      throw TraceError(file + ": " + why);
    }
  }
  ::inflateEnd(&z);
  return out;
}

std::optional<int64_t> int_attr(const ChakraProtoMsg::AttributeProto& a) {
  using A = ChakraProtoMsg::AttributeProto;
  switch (a.value_case()) {
    case A::kInt32Val: return a.int32_val();
    case A::kInt64Val: return a.int64_val();
    case A::kUint32Val: return a.uint32_val();
    case A::kUint64Val: return static_cast<int64_t>(a.uint64_val());
    case A::kSint32Val: return a.sint32_val();
    case A::kSint64Val: return a.sint64_val();
    case A::kFixed32Val: return a.fixed32_val();
    case A::kFixed64Val: return static_cast<int64_t>(a.fixed64_val());
    case A::kSfixed32Val: return a.sfixed32_val();
    case A::kSfixed64Val: return a.sfixed64_val();
    default: return std::nullopt;
  }
}

Node node_of(const ChakraProtoMsg::Node& m) {
  Node n;
  n.id = m.id();
  n.name = m.name();
  n.type = static_cast<int>(m.type());
  n.ctrl_deps.assign(m.ctrl_deps().begin(), m.ctrl_deps().end());
  n.data_deps.assign(m.data_deps().begin(), m.data_deps().end());
  n.start_us = m.start_time_micros();
  n.duration_us = m.duration_micros();
  for (const auto& a : m.attr()) {
    const std::string& k = a.name();
    if (k == "is_cpu_op") n.is_cpu_op = a.value_case() == ChakraProtoMsg::AttributeProto::kBoolVal && a.bool_val();
    else if (k == "comm_type") n.comm_type = int_attr(a);
    else if (k == "comm_size") n.comm_size = int_attr(a);
    else if (k == "comm_src") n.comm_src = int_attr(a);
    else if (k == "comm_dst") n.comm_dst = int_attr(a);
    else if (k == "comm_tag") n.comm_tag = int_attr(a);
    else if (k == "root" || k == "root_rank") n.root = int_attr(a);
    else if (k == "pg_name") n.pg_name = a.string_val();
  }
  return n;
}

}  // namespace

const char* type_name(NodeType t) {
  auto i = static_cast<size_t>(t);
  return i < std::size(kNodeTypes) ? kNodeTypes[i] : "an unknown node type";
}

const char* comm_name(CommType t) {
  auto i = static_cast<size_t>(t);
  return i < std::size(kCommTypes) ? kCommTypes[i] : "an unknown collective";
}

Trace parse(const std::string& raw, const std::string& file) {
  const std::string bytes =
      raw.size() >= 2 && static_cast<uint8_t>(raw[0]) == 0x1f && static_cast<uint8_t>(raw[1]) == 0x8b
          ? inflate_gzip(raw, file)
          : raw;
  Trace t;
  t.file = file;
  if (bytes.empty()) throw TraceError(file + ": empty (a trace starts with its GlobalMetadata)");
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(std::min<size_t>(bytes.size(), INT32_MAX)));
  in.SetTotalBytesLimit(INT32_MAX);
  for (size_t k = 0; in.CurrentPosition() < static_cast<int>(bytes.size()); ++k) {
    int at = in.CurrentPosition();
    uint32_t len = 0;
    if (!in.ReadVarint32(&len))
      throw TraceError(fmt::format("{}: message {} at byte {}: its length (a varint) is cut off or malformed", file, k, at));
    int body = in.CurrentPosition();
    size_t left = bytes.size() - static_cast<size_t>(body);
    if (len > left)
      throw TraceError(fmt::format("{}: message {} at byte {}: {} bytes long, {} left in the file (truncated)", file, k,
                                   at, len, left));
    auto limit = in.PushLimit(static_cast<int>(len));
    bool ok;
    if (k == 0) {
      ChakraProtoMsg::GlobalMetadata g;
      ok = g.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
      if (ok) {
        t.version = g.version();
        for (const auto& a : g.attr()) {
          if (a.value_case() == ChakraProtoMsg::AttributeProto::kStringVal) t.metadata[a.name()] = a.string_val();
          else if (auto v = int_attr(a)) t.metadata[a.name()] = std::to_string(*v);
        }
      }
    } else {
      ChakraProtoMsg::Node m;
      ok = m.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
      if (ok) t.nodes.push_back(node_of(m));
    }
    in.PopLimit(limit);
    if (!ok)
      throw TraceError(fmt::format("{}: message {} at byte {} ({} bytes) is not a Chakra {}", file, k, at, len,
                                   k == 0 ? "GlobalMetadata" : "Node"));
    if (in.CurrentPosition() != body + static_cast<int>(len))
      throw TraceError(fmt::format("{}: message {} at byte {}: not read to its end", file, k, at));
  }
  return t;
}

namespace {
void put_message(std::string& out, const google::protobuf::MessageLite& m) {
  std::string body = m.SerializeAsString();
  uint64_t len = body.size();
  do {  // the length as a varint
    uint8_t b = len & 0x7f;
    len >>= 7;
    out.push_back(static_cast<char>(len ? b | 0x80 : b));
  } while (len);
  out += body;
}
void int_attr_of(ChakraProtoMsg::Node& m, const char* name, const std::optional<int64_t>& v) {
  if (!v) return;
  auto* a = m.add_attr();
  a->set_name(name);
  a->set_int64_val(*v);
}
}  // namespace

std::string serialize(const Trace& t) {
  std::string out;
  ChakraProtoMsg::GlobalMetadata g;
  g.set_version(t.version);
  for (const auto& [k, v] : t.metadata) {
    auto* a = g.add_attr();
    a->set_name(k);
    a->set_string_val(v);
  }
  put_message(out, g);
  for (const auto& n : t.nodes) {
    ChakraProtoMsg::Node m;
    m.set_id(n.id);
    m.set_name(n.name);
    m.set_type(static_cast<ChakraProtoMsg::NodeType>(n.type));
    for (auto d : n.ctrl_deps) m.add_ctrl_deps(d);
    for (auto d : n.data_deps) m.add_data_deps(d);
    m.set_start_time_micros(n.start_us);
    m.set_duration_micros(n.duration_us);
    if (n.is_cpu_op) {
      auto* a = m.add_attr();
      a->set_name("is_cpu_op");
      a->set_bool_val(true);
    }
    int_attr_of(m, "comm_type", n.comm_type);
    int_attr_of(m, "comm_size", n.comm_size);
    int_attr_of(m, "comm_src", n.comm_src);
    int_attr_of(m, "comm_dst", n.comm_dst);
    int_attr_of(m, "comm_tag", n.comm_tag);
    int_attr_of(m, "root", n.root);
    if (!n.pg_name.empty()) {
      auto* a = m.add_attr();
      a->set_name("pg_name");
      a->set_string_val(n.pg_name);
    }
    put_message(out, m);
  }
  return out;
}

Trace read(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) throw TraceError(fmt::format("{}: cannot read it: {}", path, ec.message()));
  if (size > kMaxInflated) throw TraceError(fmt::format("{}: {} bytes, more than a trace may have", path, size));
  std::ifstream f(path, std::ios::binary);
  std::string bytes(size, '\0');
  if (!f.read(bytes.data(), static_cast<std::streamsize>(size)))
    throw TraceError(fmt::format("{}: cannot read it", path));
  return parse(bytes, path);
}

std::vector<std::string> rank_files(const std::string& prefix) {
  namespace fs = std::filesystem;
  fs::path p(prefix);
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::string name = p.filename().string();
  std::error_code ec;
  if (name.empty() || !fs::is_directory(dir, ec))
    throw TraceError(fmt::format("{}: no such folder for the trace {}", dir.string(), prefix));
  std::map<int, std::string> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string f = e.path().filename().string();
    if (f.size() <= name.size() + 1 || f.compare(0, name.size() + 1, name + ".") != 0) continue;
    std::string rest = f.substr(name.size() + 1);  // "R.et" or "R.et.gz"
    size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos) continue;
    std::string num = rest.substr(0, dot), ext = rest.substr(dot);
    if (ext != ".et" && ext != ".et.gz") continue;
    if (!std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; }) || num.size() > 6) continue;
    int r = std::stoi(num);
    if (found.count(r))
      throw TraceError(fmt::format("{}: rank {} has two files ({} and {})", prefix, r, found[r], e.path().string()));
    found[r] = e.path().string();
  }
  if (found.empty()) throw TraceError(fmt::format("{}: no file {}.<rank>.et or .et.gz in {}", prefix, name, dir.string()));
  std::vector<std::string> out;
  for (const auto& [r, f] : found) {
    if (r != static_cast<int>(out.size()))
      throw TraceError(fmt::format("{}: rank {} has no file ({}.{}.et), though rank {} has", prefix, out.size(), name,
                                   out.size(), r));
    out.push_back(f);
  }
  return out;
}

}  // namespace lanes::scenarios::chakra
