#pragma once
// libbpf's messages, for every BPF object lanes loads (the datapath, the
// impairment program, the feature probe): one place says where they go.

namespace lanes::testbed {

// libbpf's messages go to lanes' log: its warnings as warnings, the rest
// as debug lines. Each loader calls it before it opens a skeleton; calling
// it again changes nothing.
void libbpf_to_log();

// While one lives, libbpf's warnings on its thread are debug lines too:
// the kernel's words on a refusal lanes expects (the feature probe's load,
// a clsact qdisc that is there already, a filter that is not) are not
// warnings. Nests.
class QuietLibbpf {
 public:
  QuietLibbpf();
  ~QuietLibbpf();
  QuietLibbpf(const QuietLibbpf&) = delete;
  QuietLibbpf& operator=(const QuietLibbpf&) = delete;
};

}  // namespace lanes::testbed
