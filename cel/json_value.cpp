#include "cel/json_value.hpp"

#include <boost/json.hpp>

namespace kwatch::cel {

Value value_from_json(const boost::json::value& json) {
  switch (json.kind()) {
    case boost::json::kind::null: return Value();
    case boost::json::kind::bool_: return Value::boolean(json.get_bool());
    case boost::json::kind::int64: return Value::int64(json.get_int64());
    case boost::json::kind::uint64: {
      // Beyond int64 a JSON integer cannot be a CEL int; it reads as the nearest double.
      return Value::float64(static_cast<double>(json.get_uint64()));
    }
    case boost::json::kind::double_: return Value::float64(json.get_double());
    case boost::json::kind::string: return Value::string(std::string(json.get_string()));
    case boost::json::kind::array: {
      std::vector<Value> items;
      items.reserve(json.get_array().size());
      for (const auto& e : json.get_array()) items.push_back(value_from_json(e));
      return Value::list(std::move(items));
    }
    case boost::json::kind::object: {
      auto m = std::make_shared<OwnedMap>();
      for (const auto& [k, v] : json.get_object()) {
        m->insert(Value::string(std::string(k)), value_from_json(v));
      }
      return Value::map(std::shared_ptr<const MapValue>(std::move(m)));
    }
  }
  return Value();
}

}  // namespace kwatch::cel
