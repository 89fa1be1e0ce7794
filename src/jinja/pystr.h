#pragma once
// Python str semantics on UTF-8 text: indices and lengths count code points, whitespace is
// Python's, case mapping uses Unicode data.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::jinja::pystr {

std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
std::vector<std::string> chars(std::string_view s);
size_t length(std::string_view s);
bool is_ascii(std::string_view s);
bool is_space(char32_t c);

// strip/lstrip/rstrip; `chars` nullopt means whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split / str.rsplit; `sep` nullopt splits on runs of whitespace. maxsplit < 0: no limit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string swapcase(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()

// Code-point index of the first/last occurrence (-1 if none), and the number of occurrences.
int64_t find(std::string_view s, std::string_view sub, bool reverse);
int64_t count(std::string_view s, std::string_view sub);

// Predicates of str: isdigit, isalpha, ... (name without "is"); nullopt if unknown.
std::optional<bool> predicate(std::string_view name, std::string_view s);

// Pads to `width` code points: align '<', '>' or '^' (center as Python does).
std::string pad(std::string_view s, int64_t width, char align, std::string_view fill = " ");

}  // namespace ember::jinja::pystr
