/* The two maps lanes fills in every egress object, lanes' own or a user's
 * (<job program=...>): include after <bpf/bpf_helpers.h> and
 * hostnet_abi.h. lanes refuses an object whose config or nics map differs
 * from these in type, key or value size. */
#ifndef LANES_HOSTNET_MAPS_H
#define LANES_HOSTNET_MAPS_H

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct lanes_config);
} config SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, LANES_MAX_NICS);
  __type(key, __u32);
  __type(value, struct lanes_nic);
} nics SEC(".maps");

#endif
