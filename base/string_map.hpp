// Hash maps keyed by std::string that are searched with a string_view without making a string
// (C++20 heterogeneous lookup). Here because every other folder may include storage/.
// Thread-safety: as std::unordered_map.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kwatch::base {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

}  // namespace kwatch::base
