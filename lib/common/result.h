// SPDX-License-Identifier: BSD-3-Clause
//
// Result<T>: the return type of internal calls that can fail. It carries either a value or a
// negative libfabric error code (-FI_E*) with a human-readable message. Nothing in libdpfab throws
// across a component boundary; every fi_* entry point turns a Result into an integer return.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace dpfab {

/// An error: a negative -FI_E* code and a message for the log or the user.
struct Error {
  int code = 0;         ///< negative libfabric error code, e.g. -FI_EINVAL
  std::string message;  ///< what went wrong, naming the file/key/port where there is one
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error err) : v_(std::move(err)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

  const Error& error() const { return std::get<1>(v_); }
  int code() const noexcept { return ok() ? 0 : std::get<1>(v_).code; }

 private:
  std::variant<T, Error> v_;
};

/// Result of a call that returns nothing on success.
struct Ok {};
using Status = Result<Ok>;

inline Error make_error(int code, std::string message) { return Error{code, std::move(message)}; }

}  // namespace dpfab
