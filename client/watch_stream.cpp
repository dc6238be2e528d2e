#include "client/watch_stream.hpp"

#include "client/object_meta.hpp"

#include <boost/json/parse.hpp>

#include <algorithm>

namespace kwatch::client {

namespace json = boost::json;

namespace {

constexpr std::size_t kMaxLine = 8 * 1024;  // a chunk-size or trailer line

// Text of a bad event for an error message: at most 200 bytes of it.
std::string excerpt(std::string_view text) {
  constexpr std::size_t kMax = 200;
  std::string out(text.substr(0, kMax));
  if (text.size() > kMax) out += "...";
  return out;
}

// Appends bytes up to and including the next LF to `line`; true when the LF was reached.
bool take_line(std::string_view& bytes, std::string& line) {
  const auto nl = bytes.find('\n');
  const auto n = nl == std::string_view::npos ? bytes.size() : nl + 1;
  line.append(bytes.substr(0, n));
  bytes.remove_prefix(n);
  return nl != std::string_view::npos;
}

std::string_view without_eol(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

DecodeResult ChunkedDecoder::feed(std::string_view bytes, std::string& out) {
  auto fail = [this](std::string why) -> DecodeResult {
    state_ = State::failed;
    return why;
  };
  while (!bytes.empty()) {
    switch (state_) {
      case State::failed:
        return std::string("the chunked stream is broken already");
      case State::done:
        return fail("data after the last chunk");
      case State::size: {
        const bool complete = take_line(bytes, line_);
        if (line_.size() > kMaxLine) return fail("a chunk-size line longer than 8 KiB");
        if (!complete) break;
        std::string_view size = without_eol(line_);
        size = size.substr(0, size.find(';'));  // chunk extensions are ignored
        while (!size.empty() && (size.back() == ' ' || size.back() == '\t')) size.remove_suffix(1);
        std::uint64_t n = 0;
        if (size.empty() || size.size() > 16) return fail("an invalid chunk size \"" + excerpt(size) + "\"");
        for (char c : size) {
          int digit = c >= '0' && c <= '9' ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
          if (digit < 0) return fail("an invalid chunk size \"" + excerpt(size) + "\"");
          n = n * 16 + static_cast<std::uint64_t>(digit);
        }
        if (n > max_chunk_) {
          return fail("a chunk of " + std::to_string(n) + " bytes, over the limit of " +
                      std::to_string(max_chunk_));
        }
        line_.clear();
        remaining_ = n;
        state_ = n == 0 ? State::trailer : State::data;
        break;
      }
      case State::data: {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, bytes.size()));
        out.append(bytes.substr(0, n));
        bytes.remove_prefix(n);
        remaining_ -= n;
        if (remaining_ == 0) state_ = State::data_end;
        break;
      }
      case State::data_end: {
        const bool complete = take_line(bytes, line_);
        if (!without_eol(line_).empty() || line_.size() > 2) {
          return fail("a chunk's data is longer than its size says");
        }
        if (!complete) break;
        line_.clear();
        state_ = State::size;
        break;
      }
      case State::trailer: {
        const bool complete = take_line(bytes, line_);
        if (line_.size() > kMaxLine) return fail("a trailer line longer than 8 KiB");
        if (!complete) break;
        const bool last = without_eol(line_).empty();
        line_.clear();
        if (last) state_ = State::done;
        break;
      }
    }
  }
  return {};
}

std::string ChunkedDecoder::truncation() const {
  switch (state_) {
    case State::done: return "";
    case State::failed: return "the chunked stream was malformed";
    case State::size:
      return line_.empty() ? "the connection closed without the last chunk"
                           : "the connection closed in a chunk-size line";
    case State::data:
      return "the connection closed in the middle of a chunk (" + std::to_string(remaining_) +
             " bytes missing)";
    case State::data_end: return "the connection closed at the end of a chunk";
    case State::trailer: return "the connection closed in the trailer";
  }
  return "";
}

namespace {

constexpr std::pair<std::string_view, EventType> kEventTypes[] = {
    {"ADDED", EventType::added},     {"MODIFIED", EventType::modified},
    {"DELETED", EventType::deleted}, {"BOOKMARK", EventType::bookmark},
    {"ERROR", EventType::error}};

}  // namespace

bool parse_event_type(std::string_view text, EventType& type) {
  for (const auto& [name, value] : kEventTypes) {
    if (text == name) {
      type = value;
      return true;
    }
  }
  return false;
}

std::string_view event_type_name(EventType type) {
  for (const auto& [name, value] : kEventTypes) {
    if (value == type) return name;
  }
  return "?";
}

std::string WatchEvent::resource_version() const { return metadata_string(object, "resourceVersion"); }

boost::system::result<WatchEvent, std::string> decode_event(std::string_view text,
                                                           json::storage_ptr sp) {
  json::parse_options options;
  options.max_depth = 512;  // objects may nest deeply (schemas in CRDs); Boost's default is 32
  boost::system::error_code ec;
  json::value v = json::parse(text, ec, std::move(sp), options);
  if (ec) return "an event that is not JSON (" + ec.message() + "): " + excerpt(text);
  const json::object* o = v.if_object();
  if (o == nullptr) return "an event that is not a JSON object: " + excerpt(text);
  const json::value* type = o->if_contains("type");
  if (type == nullptr || !type->is_string()) return "an event without a type: " + excerpt(text);
  EventType event_type;
  if (!parse_event_type(type->get_string(), event_type)) {
    return "an unknown event type \"" + excerpt(type->get_string()) + "\"";
  }
  json::value* object = v.get_object().if_contains("object");
  if (object == nullptr || !object->is_object()) {
    return "a " + std::string(type->get_string()) + " event without an object: " + excerpt(text);
  }
  // Constructed, not assigned: the object keeps the storage it was parsed into.
  return WatchEvent{event_type, std::move(object->get_object())};
}

DecodeResult EventDecoder::feed(std::string_view bytes, std::vector<WatchEvent>& out,
                                const json::storage_ptr& sp) {
  if (failed_) return std::string("the event stream is broken already");
  while (!bytes.empty()) {
    const auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      if (partial_.size() + bytes.size() > max_event_) {
        failed_ = true;
        return "an event longer than " + std::to_string(max_event_) + " bytes";
      }
      partial_.append(bytes);
      return {};
    }
    std::string_view line = bytes.substr(0, nl);
    bytes.remove_prefix(nl + 1);
    if (!partial_.empty()) {
      if (partial_.size() + line.size() > max_event_) {
        failed_ = true;
        return "an event longer than " + std::to_string(max_event_) + " bytes";
      }
      partial_.append(line);
      line = partial_;
    }
    line = without_eol(line);
    if (!line.empty()) {
      auto event = decode_event(line, sp);
      if (!event) {
        failed_ = true;
        return event.error();
      }
      out.push_back(std::move(*event));
    }
    partial_.clear();
  }
  return {};
}

}  // namespace kwatch::client
