// SharedBytes: an immutable byte range kept alive by a shared owner. Copying a SharedBytes copies
// a pointer (and bumps a reference count), never the bytes, so one received network buffer or
// one proposed payload can be held by a log, a send queue and a delivery callback at once.
//
// Immutability is what makes sharing across threads safe: there is no mutable access. A view
// into part of a larger buffer (Substr) keeps the whole buffer alive: holders of long-lived
// slices of big buffers should know that. Compares by content.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace qrstore {

class SharedBytes {
 public:
  SharedBytes() = default;
  // Takes ownership of the string (implicit on purpose: bytes are just bytes).
  SharedBytes(std::string bytes)  // NOLINT(google-explicit-constructor)
  {
    if (bytes.empty()) return;
    auto owner = std::make_shared<const std::string>(std::move(bytes));
    view_ = *owner;
    owner_ = std::move(owner);
  }
  SharedBytes(const char* bytes) : SharedBytes(std::string(bytes)) {}  // NOLINT
  // A view that `owner` keeps alive (the caller vouches that it does).
  SharedBytes(std::shared_ptr<const void> owner, std::string_view view)
      : owner_(view.empty() ? nullptr : std::move(owner)), view_(view) {}

  size_t size() const { return view_.size(); }
  bool empty() const { return view_.empty(); }
  const char* data() const { return view_.data(); }
  std::string_view view() const { return view_; }
  operator std::string_view() const { return view_; }  // NOLINT(google-explicit-constructor)
  std::string ToString() const { return std::string(view_); }
  // Bytes [pos, pos + n) (clamped), sharing this owner.
  SharedBytes Substr(size_t pos, size_t n = std::string_view::npos) const {
    if (pos >= view_.size()) return SharedBytes();
    return SharedBytes(owner_, view_.substr(pos, n));
  }

  bool operator==(const SharedBytes& other) const { return view_ == other.view_; }
  bool operator==(std::string_view other) const { return view_ == other; }
  bool operator==(const std::string& other) const { return view_ == other; }
  bool operator==(const char* other) const { return view_ == other; }

 private:
  std::shared_ptr<const void> owner_;  // null when empty
  std::string_view view_;
};

}  // namespace qrstore
