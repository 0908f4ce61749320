// Error handling: nexus::Error for broken invariants (thrown), Status / Result<T> for expected
// failures (bad files, bad requests) that callers turn into a clear message and exit code.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace nexus {

// Thrown when an invariant is violated (a bug or a misuse of the API). The message names the op and
// the values involved, e.g. "[matmul] k mismatch: a is 64x128, b is 96x32".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Outcome of an operation that can fail for expected reasons. Empty message means success.
class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }

  bool is_ok() const { return message_.empty(); }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {
    if (message_.empty()) message_ = "unknown error";
  }
  std::string message_;
};

// A value or the Status explaining why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {    // NOLINT: implicit by design
    if (std::get<Status>(v_).is_ok()) throw Error("[Result] constructed from an ok Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  // The error; only valid when !is_ok().
  const Status& status() const { return std::get<Status>(v_); }
  // The value; throws nexus::Error carrying the status message when there is none.
  T& value() & {
    if (!is_ok()) throw Error(status().message());
    return std::get<T>(v_);
  }
  T&& value() && {
    if (!is_ok()) throw Error(status().message());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

// Throws nexus::Error with `message` unless `cond` holds.
#define NEXUS_CHECK(cond, message)                         \
  do {                                                     \
    if (!(cond)) throw ::nexus::Error(message);            \
  } while (0)

// Returns the Status of `expr` from the enclosing function when it is an error.
#define NEXUS_RETURN_IF_ERROR(expr)               \
  do {                                            \
    ::nexus::Status nexus_st_ = (expr);           \
    if (!nexus_st_.is_ok()) return nexus_st_;     \
  } while (0)

}  // namespace nexus
