#pragma once
// Numbers as people read them in messages: bounds without trailing zeros ("2", "0.01", not
// "2.000000"), byte counts in the unit that fits them.
#include <cstdint>
#include <span>
#include <string>

namespace ember {

// The shortest of the usual forms: integers as integers, others with up to 6 significant digits.
std::string format_number(double x);

// "a, b or c": the names a flag or field accepts, for --help and error messages.
std::string one_of(std::span<const char* const> names);

// Bytes in binary units, three significant digits: "512 B", "32 KiB", "1.50 MiB", "17.5 GiB".
std::string format_bytes(double bytes);

}  // namespace ember
