// Result<T>: a value or an Error, for per-request code that must not throw.
//
// GCC 12 has no std::expected under C++20, so this is a small type of the same
// shape. An OK result holds only the value (no allocation); an error carries a
// code and a human-readable message. Results must not be ignored.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace sluice {

enum class ErrorCode {
  kInvalidArgument,   // a limit spec or request that can never be valid
  kCostExceedsLimit,  // cost > capacity/limit: would never be allowed, however long one waits
  kStoreUnavailable,  // the store could not answer (Redis down, timeout)
  kInternal,
};

struct Error {
  ErrorCode code;
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  static Status Ok() { return Status(); }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_{ErrorCode::kInternal, {}};
  bool ok_ = true;
};

}  // namespace sluice
