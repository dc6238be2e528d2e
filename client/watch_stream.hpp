// Decoding a watch response as kube-apiserver (and kwatch) sends it: an HTTP/1.1 chunked body
// whose payload is one JSON event per line, `{"type":"ADDED","object":{...}}`, or one event per
// WebSocket message. The decoders take bytes as they arrive, in pieces of any size, keep only
// what an unfinished chunk or event needs (bounded: a peer cannot make them buffer without
// limit), and report malformed input as an error naming what is wrong: they never guess.
//
// Not thread-safe: one decoder per stream.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/storage_ptr.hpp>
#include <boost/system/result.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::client {

using DecodeResult = boost::system::result<void, std::string>;

// HTTP/1.1 chunked transfer coding (RFC 9112 7.1): `<hex size>[;ext]\r\n<data>\r\n`, ending with
// a zero-size chunk and optional trailer lines.
class ChunkedDecoder {
 public:
  explicit ChunkedDecoder(std::size_t max_chunk_bytes = 64u << 20) : max_chunk_(max_chunk_bytes) {}

  // Appends the data of the chunks in `bytes` to `out`. After an error the decoder is spent.
  DecodeResult feed(std::string_view bytes, std::string& out);
  // The zero-size chunk and the trailer have been read: the server ended the stream cleanly.
  bool done() const { return state_ == State::done; }
  // Why a connection that closed now ended early ("" when done()).
  std::string truncation() const;

 private:
  enum class State { size, data, data_end, trailer, done, failed };
  State state_ = State::size;
  std::string line_;            // the size or trailer line read so far
  std::uint64_t remaining_ = 0;  // data bytes left in the chunk
  std::size_t max_chunk_;
};

enum class EventType { added, modified, deleted, bookmark, error };

struct WatchEvent {
  EventType type = EventType::added;
  boost::json::object object;  // the object; for `error`, a Status
  // The object's metadata.resourceVersion ("" when it has none, as an ERROR's Status).
  std::string resource_version() const;
};

// "ADDED" ... "ERROR"; false for anything else.
bool parse_event_type(std::string_view text, EventType& type);
// The wire name of `type` ("ADDED" ... "ERROR").
std::string_view event_type_name(EventType type);

// One event from its JSON text (a line, or a WebSocket message), its object allocated from `sp`
// (the default heap unless given).
boost::system::result<WatchEvent, std::string> decode_event(std::string_view text,
                                                           boost::json::storage_ptr sp = {});

// Newline-delimited events, from the de-chunked body in pieces of any size.
class EventDecoder {
 public:
  explicit EventDecoder(std::size_t max_event_bytes = 16u << 20) : max_event_(max_event_bytes) {}

  // Appends every complete event in `bytes` to `out`, their objects allocated from `sp`. An
  // error (the event's text in it, shortened) leaves the decoder spent: the stream can no
  // longer be trusted.
  DecodeResult feed(std::string_view bytes, std::vector<WatchEvent>& out,
                    const boost::json::storage_ptr& sp = {});
  // Bytes of an event not yet ended by its newline.
  std::size_t pending() const { return partial_.size(); }

 private:
  std::string partial_;
  std::size_t max_event_;
  bool failed_ = false;
};

}  // namespace kwatch::client
