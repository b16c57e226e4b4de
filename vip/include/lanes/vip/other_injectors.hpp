#pragma once
// ExaBGP and BIRD 2 as the VIP injector (<job injector="exabgp|bird">):
// the same plan lanes' speaker runs from (SpeakerConfig: task IPs, each
// NIC's address, the sessions, ASNs, hold time, VIP mode) rendered into
// each program's own configuration. Per NIC: one session from each NIC's
// address to its switch port's peer address, announcing the task IPs with
// that NIC's address as next hop. ADD-PATH (ExaBGP only): two sessions,
// each carrying one path per NIC, told apart by path identifiers 1..N.

#include <string>

#include "lanes/vip/speaker.hpp"

namespace lanes::vip {

// bird.conf: a static blackhole route per task IP (what is exported), and
// a BGP protocol per session: multihop from the NIC's address, next hop
// self with that NIC's addresses, quick reconnects. Throws
// std::invalid_argument for ADD-PATH, which lanes does not render for BIRD.
std::string render_bird_config(const SpeakerConfig& c);

// exabgp.conf: a neighbor per session with its static routes.
std::string render_exabgp_config(const SpeakerConfig& c);

// The environment ExaBGP 4.2 runs with under lanes' supervisor: in the
// foreground, logging to stdout, as root (it binds each NIC's address),
// no CLI pipes (there is no /run/exabgp in the job's view).
std::vector<std::pair<std::string, std::string>> exabgp_environment();

}  // namespace lanes::vip
