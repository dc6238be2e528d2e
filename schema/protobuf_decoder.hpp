// Decodes Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) into JSON
// objects, and encodes JSON objects into that form: every built-in kind kwatch serves, and DeleteOptions with any group version, as typed
// Go clients send them (kubectl's create commands, `run`, `expose`, `debug`, `drain`, `create job
// --from`, controllers and schedulers).
//
// The decoder is table-driven: schema/schemas/protobuf.json lists every message's fields
// (numbers, JSON names, kinds), generated from the Kubernetes 1.32 types' protobuf tags by
// scripts/gen_protobuf_schema.py. Zero scalars are dropped as JSON's omitempty would, except
// where Go keeps them (pointers, fields without omitempty). A field it does not know, with a
// value, is an `unsupported_media_type` error naming the field, never silently dropped, so no
// data is lost; custom resources have no protobuf form. Pure functions; thread-safe.
#pragma once

#include "apimachinery/api_error.hpp"
#include "apimachinery/cbor.hpp"

#include <boost/json/object.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::schema {

inline constexpr std::string_view kProtobufMediaType = "application/vnd.kubernetes.protobuf";

// The protobuf form of `obj` (an object of a built-in kind, as JSON, with apiVersion and kind)
// as kube-apiserver writes it: the "k8s\0" magic, then a runtime.Unknown envelope holding the
// kind's message (field numbers of kube's generated.proto, fields in number order, map entries
// by key, nulls left out). nullopt when the kind has no message here (custom resources) or a
// value does not fit its field. decode_protobuf_object reads it back.
// A list (`<Kind>List` with `items`) is encoded as kube's list messages are: ListMeta = 1, each
// item the kind's message = 2.
std::optional<std::string> encode_protobuf_object(const boost::json::object& obj);

// The message of `obj`, of kind `kind` in `api_version`, alone (no envelope): what a list holds
// per item. nullopt as above.
std::optional<std::string> encode_protobuf_message(const boost::json::object& obj,
                                                   std::string_view api_version,
                                                   std::string_view kind);
// kube's envelope around a message: the "k8s\0" magic, then runtime.Unknown {typeMeta
// {apiVersion, kind}, raw, contentEncoding "", contentType ""}.
std::string protobuf_envelope(std::string_view api_version, std::string_view kind,
                              std::string_view raw);
// A list's message from its ListMeta (`metadata` as JSON; null: empty) and its items' messages
// (encode_protobuf_message), in the envelope, `kind` being the list's (e.g. "PodList").
std::string encode_protobuf_list(std::string_view api_version, std::string_view kind,
                                 const boost::json::object* metadata,
                                 const std::vector<std::string_view>& items);
// A meta/v1 Status (an error's answer) as kube writes it for a protobuf client; nullopt when
// `status` is no Status.
std::optional<std::string> encode_protobuf_status(const boost::json::object& status);
// Its message alone (what a watch's ERROR event wraps).
std::optional<std::string> encode_protobuf_status_message(const boost::json::object& status);

// Whether objects of `kind` in `api_version` have a protobuf form here (built-in kinds).
bool has_protobuf_form(std::string_view api_version, std::string_view kind);

// A watch event as kube streams it to a protobuf client: a 4-byte big-endian length, then a
// meta/v1 WatchEvent {type = 1, object = 2 (runtime.RawExtension {raw = 1})} whose raw is the
// object in its envelope (protobuf_envelope). Everything before the object's message is
// returned, so that the message itself (shared by every watcher) is written where it lies; the
// frame ends with kWatchEventSuffix.
std::string protobuf_watch_event_head(std::string_view type, std::string_view api_version,
                                      std::string_view kind, std::size_t message_size);
inline constexpr std::string_view kWatchEventSuffix{"\x1a\x00\x22\x00", 4};

// `bytes` is the whole body: the "k8s\0" magic, then a runtime.Unknown envelope.
apimachinery::ApiResult<boost::json::object> decode_protobuf_object(std::string_view bytes);

// Leaves out of `obj` (an object of a built-in kind, as JSON) what Go's encoding/json leaves out
// once kube-apiserver has decoded it into the kind's struct: omitempty fields that are zero
// scalars (not pointers), empty maps or lists, or null. Other kinds (custom resources) are left
// as they are. The same generated table says which fields those are.
void omit_empty_fields(std::string_view api_version, std::string_view kind,
                       boost::json::object& obj);

// Adds to `obj` (an object of a built-in kind, as JSON) what Go's encoding/json writes once
// kube-apiserver has decoded it into the kind's struct although the body left it out: a struct
// that is no pointer (omitempty does not drop structs) as `{}` with its own such fields, and a
// scalar without omitempty as its zero ("", 0, false). A Service's `status: {loadBalancer: {}}`,
// a claim's `spec.resources: {}`, a node's `status.nodeInfo`. The zeros Go writes as null are
// written as null when left out: lists and pointers without omitempty (a Role's
// `rules: null`) and times that are no pointers (an event's `firstTimestamp`, a condition's
// `lastProbeTime`); a list sent empty stays `[]`. Other kinds are left
// as they are. Members that are not objects where an object is expected are skipped.
void write_zero_fields(std::string_view api_version, std::string_view kind,
                       boost::json::object& obj);

// The strings of `obj` (an object of a built-in kind, as JSON) that hold Go []byte values,
// base64 in JSON (a Secret's data, a ConfigMap's binaryData, a CertificateSigningRequest's
// request), added to `out`: what kube's CBOR form writes as byte strings. Other kinds (custom
// resources) have none.
void collect_byte_strings(std::string_view api_version, std::string_view kind,
                          const boost::json::object& obj, apimachinery::CborByteStrings& out);

}  // namespace kwatch::schema
