#pragma once
// Unicode helpers with the semantics of Rust's char predicates, which Hugging Face tokenizers uses.
#include <cstddef>
#include <string>
#include <string_view>

namespace ember::tokenizer::unicode {

// Decodes the code point at `pos` of valid UTF-8 `s` and advances `pos`.
char32_t next(std::string_view s, size_t& pos);

bool is_whitespace(char32_t c);    // Rust char::is_whitespace (White_Space property)
bool is_numeric(char32_t c);       // Rust char::is_numeric (Nd, Nl, No)
bool is_alphanumeric(char32_t c);  // letters and numbers
bool is_punctuation(char32_t c);   // Unicode P* categories
bool is_ascii_punctuation(char32_t c);
bool is_mark(char32_t c);  // Unicode M* categories

enum class Form { NFC, NFD, NFKC, NFKD };
std::string normalize(std::string_view s, Form form);
std::string lowercase(std::string_view s);  // per-char full lowercase mapping, as Rust char::to_lowercase

}  // namespace ember::tokenizer::unicode
