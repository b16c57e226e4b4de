#pragma once
// Result type for OS-facing calls: a value or a std::system_error that says
// what was being done ("creating veth swp1 in lanes-3f2a-tor: File exists").

#include <cerrno>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

namespace lanes::testbed {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(std::system_error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  T& value() & {
    throw_if_error();
    return std::get<T>(v_);
  }
  const T& value() const& {
    throw_if_error();
    return std::get<T>(v_);
  }
  T&& value() && {
    throw_if_error();
    return std::get<T>(std::move(v_));
  }
  const std::system_error& error() const { return std::get<std::system_error>(v_); }
  void throw_if_error() const {
    if (!ok()) throw std::get<std::system_error>(v_);
  }

 private:
  std::variant<T, std::system_error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(std::system_error error) : err_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::system_error& error() const { return err_; }
  void value() const { throw_if_error(); }
  void throw_if_error() const {
    if (!ok_) throw err_;
  }

 private:
  std::system_error err_{std::error_code{}, ""};
  bool ok_ = true;
};

using Status = Result<void>;

inline std::system_error os_error(int err, const std::string& what) {
  return std::system_error(err, std::generic_category(), what);
}
inline std::system_error errno_error(const std::string& what) { return os_error(errno, what); }

// E's message without the words of its code that system_error appends
// (": Connection timed out"): what to wrap, or to keep apart from its code.
inline std::string message_of(const std::system_error& e) {
  std::string what = e.what(), reason = ": " + e.code().message();
  if (what.size() >= reason.size() && what.compare(what.size() - reason.size(), reason.size(), reason) == 0)
    what.resize(what.size() - reason.size());
  return what;
}

// E with CONTEXT in front of its message ("CONTEXT: what: reason"), its
// error code (and category: libnl's stay libnl's) kept.
inline std::system_error in_context(const std::string& context, const std::system_error& e) {
  return std::system_error(e.code(), context + ": " + message_of(e));
}

}  // namespace lanes::testbed
