// Label selectors as kubectl -l and client-go's labels.Parse read them, for the Lister's
// list(selector): `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` (has it), `!k`
// (lacks it), joined by commas (all must hold). `k!=v` and `notin` also match objects without k.
// The empty selector matches everything.
//
// Immutable after parse; safe from any thread.
#pragma once

#include <boost/json/object.hpp>

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::client {

class LabelSelector {
 public:
  // "" when `text` parsed into `out`, else what is wrong with it.
  static std::string parse(std::string_view text, LabelSelector& out);

  bool matches(const boost::json::object& object) const;  // by its metadata.labels
  bool empty() const { return requirements_.empty(); }

 private:
  enum class Op { in, not_in, exists, not_exists };
  struct Requirement {
    std::string key;
    Op op;
    std::set<std::string> values;
  };
  std::vector<Requirement> requirements_;
};

}  // namespace kwatch::client
