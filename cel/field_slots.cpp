#include "cel/field_slots.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>

#include <boost/json.hpp>

#include "cel/functions.hpp"
#include "cel/json_value.hpp"

namespace kwatch::cel {

std::uint8_t FieldSlots::slot(const Type* owner, std::string_view json_name) {
  if (owner_ == nullptr) owner_ = owner;
  // A name fill() would pass over (its length has no bit) gets no slot.
  if (owner != owner_ || json_name.empty() || json_name.size() >= 64) return kNone;
  if (const std::uint8_t known = find(json_name); known != kNone) return known;
  if (names_.size() == kMaxSlots) return kNone;
  names_.emplace_back(json_name);
  lengths_ |= std::uint64_t{1} << json_name.size();
  return static_cast<std::uint8_t>(names_.size() - 1);
}

std::uint8_t FieldSlots::find(std::string_view json_name) const {
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == json_name) return static_cast<std::uint8_t>(i);
  }
  return kNone;
}

bool FieldSlots::fill(const boost::json::object& object,
                      std::span<const boost::json::value*> out) const {
  if (object.size() > kMaxMembers) return false;
  for (auto& m : out) m = nullptr;
  std::uint32_t seen = 0;  // kMaxSlots bits
  for (const auto& kv : object) {
    const auto key = kv.key();
    // Most members are no slot's: a name of that length is rare, the same first byte rarer.
    if (key.empty() || key.size() >= 64 || (lengths_ & (std::uint64_t{1} << key.size())) == 0) {
      continue;
    }
    for (std::size_t i = 0; i < names_.size(); ++i) {
      const std::string& name = names_[i];
      if (name.size() != key.size() || name[0] != key[0] ||
          !same_bytes(name.data(), key.data(), key.size())) {
        continue;
      }
      // The first member of a name is the one a lookup finds.
      const std::uint32_t bit = std::uint32_t{1} << i;
      if ((seen & bit) == 0 && !kv.value().is_null()) out[i] = &kv.value();
      seen |= bit;
      break;
    }
  }
  return true;
}

std::uint8_t FieldSlots::test(std::uint8_t slot, bool in,
                              std::span<const std::string_view> constants) {
  for (std::size_t i = 0; i < tests_.size(); ++i) {
    const Test& t = tests_[i];
    if (t.slot != slot || t.in != in || t.constants.size() != constants.size()) continue;
    if (std::equal(constants.begin(), constants.end(), t.constants.begin())) {
      return static_cast<std::uint8_t>(i);
    }
  }
  if (tests_.size() == kMaxTests) return kNone;
  tests_.push_back(Test{slot, in, std::vector<std::string>(constants.begin(), constants.end())});
  return static_cast<std::uint8_t>(tests_.size() - 1);
}

std::uint64_t SelfFields::code_points(std::uint8_t i, std::string_view text) {
  if ((counted_ >> i & 1) == 0) {
    code_points_[i] = code_point_count(text);
    counted_ |= std::uint32_t{1} << i;
  }
  return code_points_[i];
}

SelfFields::~SelfFields() {
  auto* values = reinterpret_cast<Value*>(values_);
  for (std::uint32_t m = made_; m != 0; m &= m - 1) {
    std::destroy_at(values + std::countr_zero(m));
  }
}

bool SelfFields::fill(const FieldSlots& slots, const boost::json::object& object,
                      JsonArena& arena) {
  if (!slots.fill(object, std::span(members_, slots.size()))) return false;
  arena_ = &arena;
  return true;
}

const Value& SelfFields::value(std::uint8_t i, const Type* type) {
  auto* values = reinterpret_cast<Value*>(values_);
  const std::uint32_t bit = std::uint32_t{1} << i;
  if ((made_ & bit) == 0) {
    std::construct_at(values + i, json_view(*members_[i], type, *arena_));
    made_ |= bit;
  }
  return values[i];
}

}  // namespace kwatch::cel
