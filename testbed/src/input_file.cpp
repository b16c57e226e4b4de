#include "lanes/testbed/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <pugixml.hpp>
#include <set>

#include "lanes/testbed/handle.hpp"
#include "lanes/testbed/topology_loader.hpp"

namespace lanes::testbed {

std::string read_input_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError({fmt::format("{}: cannot read the {}: {}", path, what, std::strerror(errno))});
  if (S_ISDIR(st.st_mode)) throw InputError({fmt::format("{}: is a directory, not a {}", path, what)});
  auto too_big = [&] {
    return InputError({fmt::format("{}: larger than {} MiB: not a {} (lanes reads at most that much)", path,
                                   kMaxInputBytes >> 20, what)});
  };
  if (S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) > kMaxInputBytes) throw too_big();
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) throw InputError({fmt::format("{}: cannot read the {}: {}", path, what, std::strerror(errno))});
  // a device or pipe is read like a file, up to the same bound
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError({fmt::format("{}: cannot read the {}: {}", path, what, std::strerror(errno))});
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > kMaxInputBytes) throw too_big();
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

int line_at(const std::string& text, std::ptrdiff_t offset) {
  if (offset < 0) return 0;
  auto end = text.begin() + std::min<std::ptrdiff_t>(offset, static_cast<std::ptrdiff_t>(text.size()));
  return static_cast<int>(std::count(text.begin(), end, '\n')) + 1;
}

std::vector<std::string> xml_shape_problems(const pugi::xml_document& doc, const std::string& text,
                                            const std::string& file) {
  std::vector<std::string> out;
  int roots = 0;
  for (auto c : doc.children()) {
    if (c.type() != pugi::node_element) continue;
    if (++roots == 2)
      out.push_back(fmt::format("{}:{}: a second root element <{}>: a file holds one <{}>", file,
                                line_at(text, c.offset_debug()), c.name(), doc.document_element().name()));
  }
  // every element below the document (handles are copies: nothing changes)
  std::vector<pugi::xml_node> todo;
  for (auto c : doc.children()) todo.push_back(c);
  while (!todo.empty()) {
    pugi::xml_node n = todo.back();
    todo.pop_back();
    if (n.type() != pugi::node_element) continue;
    std::set<std::string> seen;
    for (auto a : n.attributes())
      if (!seen.insert(a.name()).second)
        out.push_back(fmt::format("{}:{}: <{}>: attribute '{}' is given twice", file,
                                  line_at(text, n.offset_debug()), n.name(), a.name()));
    for (auto c : n.children()) todo.push_back(c);
  }
  std::sort(out.begin(), out.end(), [&](const std::string& x, const std::string& y) {
    auto line = [&](const std::string& s) { return std::atoi(s.c_str() + file.size() + 1); };
    return line(x) < line(y);
  });
  return out;
}

}  // namespace lanes::testbed
