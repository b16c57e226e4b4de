#pragma once
// lanes without root: every namespace, link, qdisc and daemon of an
// ordinary user's runs lives in that user's *world* — a user, mount and
// network namespace of the user's own, in which the user is root. A small
// keeper process (`lanes keep-world`) holds the world while anything runs
// in it; each lanes command of the user joins it (or makes it) before it
// does anything else, so a second shell finds the runs of the first. The
// keeper leaves when it is alone in the world: after the last run is down,
// or after kill -9 and `lanes clean`, nothing of it remains.
//
// Inside the world the user's files live under one base directory
// ($XDG_RUNTIME_DIR, else ~/.local/state): runs in lanes/, owner records in
// lanes-owners/, the namespaces' mount points in lanes-netns/ (mounted in
// the world's mount namespace only). The environment variable
// LANES_ROOTLESS names the base for every process started inside.
//
// What a user namespace cannot grant: BPF (the bpf egress modes fall back
// to ecmp, link impairments are refused).

#include <optional>
#include <string>

#include "lanes/testbed/result.hpp"

namespace lanes::testbed::rootless {

inline constexpr const char* kEnv = "LANES_ROOTLESS";

// The base directory of this process's world, when it runs in one.
std::optional<std::string> world_base();
// The base directory an ordinary user's lanes uses: $XDG_RUNTIME_DIR, else
// ~/.local/state; empty when neither can be found.
std::string user_base();
// Where runs, owner records and namespace mount points go: the world's
// directories inside one, for an ordinary user outside one (so listing
// works without entering), otherwise empty (root's defaults apply).
std::string state_dir();
std::string owners_dir();
std::string netns_dir();

// Joins this user's world, making it (and its keeper, the executable SELF)
// when there is none. Must be called while the process has one thread.
// Afterwards the process is root in the world and LANES_ROOTLESS is set.
Status enter_world(const std::string& self);
// `lanes keep-world`: makes the world and holds it. READY_FD gets "ok\n"
// when the world stands, or the reason it could not be made.
int keep_world(int ready_fd);

// Why unprivileged user namespaces fail here, and what to do about it,
// for a failure with errno ERR (EPERM or EACCES usually).
std::string userns_refusal(int err);

}  // namespace lanes::testbed::rootless
