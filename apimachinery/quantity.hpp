// resource.Quantity as kube reads and writes it: a written quantity (`cpu: "0.5"`,
// `memory: 1.5Gi`) is parsed as Go's ParseQuantity parses it and stored in the form its
// MarshalJSON writes (`500m`, `1536Mi`): decimal SI, binary SI or decimal exponent, kept from
// the text; values past nano precision rounded up; binary values capped at 2^63-1, and shown
// as decimal when under 1024 or fractional. Like Go, a text already in canonical form that
// fits its fast path is kept verbatim (`+1`, `01`).
//
// The value is held as decimal digits and a power of ten, never expanded: `1e2147483647` costs
// what `1` costs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kwatch::apimachinery {

// kube's ErrFormatWrong.
inline constexpr std::string_view kQuantityFormatError =
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

// The canonical text of a quantity written as `text` (its JSON string, or a JSON number's
// text); nullopt with `error` set to kube's message when it is not one. `scale`: the power of
// ten it is rounded up to (away from zero): -9, or -3 for the values of a core/v1 ResourceList,
// which kube's SetDefaults_ResourceList rounds to milli-units.
std::optional<std::string> canonical_quantity(std::string_view text, std::string& error,
                                              int scale = -9);

// The sum of two quantities as Go's Quantity.Add makes it (exact, in the first one's format),
// written as MarshalJSON writes it; nullopt when either is not a quantity, or when their
// exponents lie more than 1024 apart (the exact sum would be written out digit by digit).
std::optional<std::string> add_quantities(std::string_view a, std::string_view b);

// -1, 0 or 1 as Quantity.Cmp answers; nullopt when either is not a quantity.
std::optional<int> compare_quantities(std::string_view a, std::string_view b);

}  // namespace kwatch::apimachinery
