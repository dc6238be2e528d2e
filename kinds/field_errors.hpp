// Causes as kube's field.ErrorList words them (k8s.io/apimachinery/pkg/util/validation/field),
// for the kinds' validation: `Required value: <detail>`, `Invalid value: <shown>: <detail>`,
// `Forbidden: <detail>`, `Unsupported value: "v": supported values: "a", "b"`,
// `Duplicate value: <shown>`. `shown` is the value as Go's %#v prints it (go_quote for strings).
// Pure functions; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/fwd.hpp>

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::kinds::field_errors {

using Causes = std::vector<apimachinery::Cause>;

// field.Path's Index: `path[i]`.
std::string index(const std::string& path, std::size_t i);
// The elements of the array under `key` as strings, an element that is none as "" (so that an
// element's position stays its field path's index); empty when there is no array.
std::vector<std::string> string_items(const boost::json::object* obj, std::string_view key);

// Go's %#v of a slice of strings: `[]string{"a", "b"}`; `type` names another string type
// (`[]core.IPFamily{"IPv4"}`).
std::string go_strings(const std::vector<std::string>& items, std::string_view type = "string");

void required(Causes& causes, std::string field, std::string_view detail = "");
void invalid(Causes& causes, std::string field, const std::string& shown, std::string_view detail);
void forbidden(Causes& causes, std::string field, std::string_view detail);
void not_supported(Causes& causes, std::string field, const std::string& value,
                   std::initializer_list<std::string_view> supported);
void duplicate(Causes& causes, std::string field, const std::string& shown);
void too_many(Causes& causes, std::string field, std::size_t actual, std::size_t limit);
// field.TooLong: `Too long: may not be more than <limit> bytes` (kube leaves the value out).
void too_long(Causes& causes, std::string field, std::size_t limit);
// ValidateImmutableField: `<field>: Invalid value: <new>: field is immutable`.
void immutable(Causes& causes, std::string field, const std::string& shown);

// ValidateLabelSelector: label keys and values, and each requirement's operator and values.
void check_label_selector(const boost::json::object& selector, const std::string& path,
                          Causes& causes);

}  // namespace kwatch::kinds::field_errors
