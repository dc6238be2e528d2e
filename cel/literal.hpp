// A value written as the CEL literal that denotes it, on one line: `2`, `2u`, `2.0`,
// `double("inf")`, `"a\n"`, `b"\xff"`, `[1, 2]`, `{"a": 1}` (keys sorted), `int`,
// `timestamp("2009-02-13T23:31:30Z")`, `duration("1.5s")`, `optional.of(1)`,
// `optional.none()`, `null`. Used by `kwatch-cel`, by error messages that quote a value, and by
// messageExpression results in tests. An error value prints as its message.
#pragma once

#include <string>

#include "cel/value.hpp"

namespace kwatch::cel {

std::string format_literal(const Value& v);

// A double as CEL writes it: the shortest text that reads back as the same number, with a `.`
// or an exponent so that it reads back as a double.
std::string format_double(double d);

// A string (`"..."`) or bytes (`b"..."`) literal of `text`: the one-letter escapes, `\xHH` for
// control characters (and, in bytes, for every octet outside printable ASCII).
std::string quote_text(std::string_view text, bool bytes);

// Appends the one-letter escape of `c` (`\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`, `\f`,
// `\v`) and returns true, or returns false for any other character.
bool append_simple_escape(std::string& out, char32_t c);

}  // namespace kwatch::cel
