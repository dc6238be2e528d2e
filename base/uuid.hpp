// Random (version 4) UUIDs, as kube gives objects their metadata.uid and requests their audit ID.
//
// Thread-safe: each thread draws from its own generator, seeded from std::random_device.
#pragma once

#include <string>

namespace kwatch::base {

// "xxxxxxxx-xxxx-4xxx-Yxxx-xxxxxxxxxxxx" in lowercase hex, Y one of 8, 9, a, b (RFC 4122).
std::string new_uuid();

}  // namespace kwatch::base
