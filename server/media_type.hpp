// Content negotiation of the API's answers: which of the representations kwatch can produce an
// `Accept` header allows (JSON, the default; YAML for single answers), and YAML written from JSON
// for clients that ask for it. Pure functions; safe from any thread.
#pragma once

#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kwatch::server {

// protobuf: kube's `application/vnd.kubernetes.protobuf` (built-in kinds); cbor: kube's
// `application/cbor` (every kind; its watches `application/cbor-seq`).
enum class Representation { json, yaml, protobuf, cbor };

// The first media range of `accept` kwatch can answer with (`application/json` with any
// parameters, `application/yaml`, `application/*`, `*/*`; no header means JSON), ranges taken in
// the order of their q values (q=0 refuses); a stream (a watch) has no YAML form. nullopt when
// none fits: a 406. For documents with one form (discovery, OpenAPI): parameters are not read.
std::optional<Representation> negotiate(std::string_view accept, bool stream);

// What a resource's answer is turned into before it is encoded, as a media range's `as`, `g`
// and `v` parameters ask: kubectl's Table, or only the object's metadata (client-go's metadata
// client: PartialObjectMetadata for one object or a watch's events, PartialObjectMetadataList for
// a list).
enum class Transform : std::uint8_t {
  none,
  table,
  partial_object_metadata,
  partial_object_metadata_list,
};

struct OutputForm {
  Representation representation = Representation::json;
  Transform transform = Transform::none;
  // meta.k8s.io's version of a transformed answer: "v1" or "v1beta1".
  std::string_view meta_version = "v1";
};

// kube-apiserver's negotiation of a resource's answer: ranges in the order of their q values
// (q=0 refuses), each tried against JSON, then YAML; a range fits when its `as`/`g`/`v` name a
// form kwatch can make (Table, PartialObjectMetadata or PartialObjectMetadataList in
// meta.k8s.io v1 or v1beta1), its `stream` is empty or `watch` (JSON only) and its `sv` empty or
// v1. A stream (a watch) has no YAML form. `binary`: a range naming kube's protobuf type, or
// `application/cbor` (or `application/cbor-seq`), fits too (without `as`, `g`, `v` or
// `stream`). nullopt when no range fits: a 406.
std::optional<OutputForm> negotiate_output(std::string_view accept, bool stream,
                                           bool binary = false);

// `json` (compact, as kwatch writes it) indented as Go's json.MarshalIndent(v, "", "  ") writes
// it: two spaces per level, ": " after names, `{}` and `[]` when empty; no final newline.
// nullopt when the indented text would pass `max_bytes`: indentation grows with depth, so a
// deep object of many small values (a hostile one may nest a hundred levels) could otherwise
// make a 3 MiB object a response of hundreds of MiB.
std::optional<std::string> indent_json(std::string_view json, std::size_t max_bytes);

// Whether an answer is indented for a person, as kube-apiserver decides: `pretty` in the query
// when it reads as a Go boolean, else a user agent of curl, Wget or a browser (Mozilla/5.0).
bool wants_pretty(std::optional<std::string_view> pretty_param, std::string_view user_agent);

// The media types named in a 406's message.
inline constexpr std::string_view kAcceptedMediaTypes = "application/json, application/yaml";

// `value` as a YAML document (block style, strings quoted where YAML would read them otherwise),
// as kube-apiserver answers `Accept: application/yaml`.
std::string to_yaml(const boost::json::value& value);

}  // namespace kwatch::server
