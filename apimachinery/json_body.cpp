#include "apimachinery/json_body.hpp"

#include "apimachinery/stored_json.hpp"

#include <boost/json/basic_parser_impl.hpp>

#include <set>

namespace kwatch::apimachinery {

namespace json = boost::json;

ApiResult<json::value> parse_json_body(std::string_view body, json::storage_ptr sp) {
  if (body.empty()) return api_error(Errc::bad_request, "request body is empty");
  std::string problem;
  auto value = apimachinery::parse_json(body, &problem, std::move(sp));
  if (!value) {
    return api_error(Errc::bad_request, "couldn't get version/kind; json parse error: " + problem);
  }
  return std::move(*value);
}

namespace {

// Walks a body's structure without building it, remembering each object's member names.
struct DuplicateFinder {
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  struct Frame {
    bool array = false;
    std::size_t index = 0;       // arrays: the element being read
    std::string segment;         // how the parent names this value: ".key" or "[i]"
    std::string key;             // objects: the member being read
    std::set<std::string, std::less<>> keys;
  };
  std::vector<Frame> stack;
  std::string key_part;
  std::vector<std::string> found;

  std::string child_segment() const {
    if (stack.empty()) return {};
    const Frame& top = stack.back();
    if (top.array) return "[" + std::to_string(top.index) + "]";
    return "." + top.key;
  }
  std::string path_to(std::string_view last) const {
    std::string out;
    for (const auto& f : stack) out += f.segment;
    out += '.';
    out.append(last);
    return out.substr(out.starts_with('.') ? 1 : 0);
  }
  void value_done() {
    if (!stack.empty() && stack.back().array) ++stack.back().index;
  }
  bool open(bool array) {
    Frame f;
    f.array = array;
    f.segment = child_segment();
    stack.push_back(std::move(f));
    return true;
  }
  bool close() {
    stack.pop_back();
    value_done();
    return true;
  }

  using ec = boost::system::error_code;
  bool on_document_begin(ec&) { return true; }
  bool on_document_end(ec&) { return true; }
  bool on_object_begin(ec&) { return open(false); }
  bool on_object_end(std::size_t, ec&) { return close(); }
  bool on_array_begin(ec&) { return open(true); }
  bool on_array_end(std::size_t, ec&) { return close(); }
  bool on_key_part(json::string_view s, std::size_t, ec&) {
    key_part.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, ec&) {
    key_part.append(s.data(), s.size());
    Frame& top = stack.back();
    if (!top.keys.insert(key_part).second) found.push_back(path_to(key_part));
    top.key = std::move(key_part);
    key_part.clear();
    return true;
  }
  bool on_string_part(json::string_view, std::size_t, ec&) { return true; }
  bool on_string(json::string_view, std::size_t, ec&) { return scalar(); }
  bool on_number_part(json::string_view, ec&) { return true; }
  bool on_int64(std::int64_t, json::string_view, ec&) { return scalar(); }
  bool on_uint64(std::uint64_t, json::string_view, ec&) { return scalar(); }
  bool on_double(double, json::string_view, ec&) { return scalar(); }
  bool on_bool(bool, ec&) { return scalar(); }
  bool on_null(ec&) { return scalar(); }
  bool on_comment_part(json::string_view, ec&) { return true; }
  bool on_comment(json::string_view, ec&) { return true; }
  bool scalar() {
    value_done();
    return true;
  }
};

// Counts member names without remembering them.
struct KeyCounter {
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);
  std::size_t keys = 0;

  using ec = boost::system::error_code;
  bool on_document_begin(ec&) { return true; }
  bool on_document_end(ec&) { return true; }
  bool on_object_begin(ec&) { return true; }
  bool on_object_end(std::size_t, ec&) { return true; }
  bool on_array_begin(ec&) { return true; }
  bool on_array_end(std::size_t, ec&) { return true; }
  bool on_key_part(json::string_view, std::size_t, ec&) { return true; }
  bool on_key(json::string_view, std::size_t, ec&) {
    ++keys;
    return true;
  }
  bool on_string_part(json::string_view, std::size_t, ec&) { return true; }
  bool on_string(json::string_view, std::size_t, ec&) { return true; }
  bool on_number_part(json::string_view, ec&) { return true; }
  bool on_int64(std::int64_t, json::string_view, ec&) { return true; }
  bool on_uint64(std::uint64_t, json::string_view, ec&) { return true; }
  bool on_double(double, json::string_view, ec&) { return true; }
  bool on_bool(bool, ec&) { return true; }
  bool on_null(ec&) { return true; }
  bool on_comment_part(json::string_view, ec&) { return true; }
  bool on_comment(json::string_view, ec&) { return true; }
};

std::size_t members_of(const json::value& v) {
  std::size_t n = 0;
  if (const json::object* o = v.if_object()) {
    n += o->size();
    for (const auto& [key, member] : *o) n += members_of(member);
  } else if (const json::array* a = v.if_array()) {
    for (const auto& item : *a) n += members_of(item);
  }
  return n;
}

}  // namespace

std::vector<std::string> duplicate_fields(std::string_view body, const json::object& parsed) {
  // A parsed value keeps one member per name: as many members as names in the text means none
  // was repeated, which two passes without allocation tell (the usual case).
  json::parse_options options;
  options.max_depth = apimachinery::kMaxJsonDepth;
  json::basic_parser<KeyCounter> counter(options);
  boost::system::error_code ec;
  counter.write_some(false, body.data(), body.size(), ec);
  if (ec) return {};
  std::size_t members = parsed.size();
  for (const auto& [key, member] : parsed) members += members_of(member);
  if (counter.handler().keys == members) return {};
  return duplicate_fields(body);
}

std::vector<std::string> duplicate_fields(std::string_view body) {
  json::parse_options options;
  options.max_depth = apimachinery::kMaxJsonDepth;
  json::basic_parser<DuplicateFinder> parser(options);
  boost::system::error_code ec;
  parser.write_some(false, body.data(), body.size(), ec);
  if (ec) return {};
  return std::move(parser.handler().found);
}

}  // namespace kwatch::apimachinery
