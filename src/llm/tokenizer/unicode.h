// UTF-8 and Unicode helpers shared by the tokenizer stages. They follow Rust's
// `char` predicates because the reference (HF `tokenizers`) is written in Rust:
// parity depends on matching its idea of whitespace, punctuation and marks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hf2pte::llm::tok {

/// Decodes UTF-8 into code points; invalid bytes become U+FFFD (callers validate first).
std::vector<char32_t> utf8_decode(std::string_view s);
/// Appends the UTF-8 encoding of `c`.
void utf8_append(std::string& out, char32_t c);
std::string utf8_encode(const std::vector<char32_t>& cps);
/// Byte length of the UTF-8 sequence starting with `lead` (1 for stray bytes).
int utf8_len(unsigned char lead);
/// Rust's `String::from_utf8_lossy`: each maximal invalid subpart becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);
/// True when `s` is well-formed UTF-8.
bool utf8_valid(std::string_view s);

/// Rust `char::is_whitespace` (the White_Space property).
bool is_whitespace(char32_t c);
/// Rust `char::is_alphanumeric` plus '_' : the `\w` of the HF Whitespace pre-tokenizer.
bool is_word_char(char32_t c);
/// Rust `char::is_numeric` (categories Nd, Nl, No).
bool is_numeric(char32_t c);
/// HF `is_bert_punc`: ASCII punctuation or any Unicode P* category.
bool is_bert_punctuation(char32_t c);
/// Unicode general category C* (Cc, Cf, Cs, Co, Cn).
bool is_other(char32_t c);
/// Category Mn only (BERT's accent stripping).
bool is_mark_nonspacing(char32_t c);
/// Categories Mn, Mc, Me (the StripAccents normalizer).
bool is_combining_mark(char32_t c);
/// The CJK ideograph blocks BERT pads with spaces.
bool is_chinese_char(char32_t c);

/// Unicode normalization through utf8proc; `form` is "NFC", "NFD", "NFKC" or "NFKD".
std::string unicode_normalize(std::string_view s, std::string_view form);
/// Rust `char::to_lowercase` applied char by char (full mappings like U+0130).
std::string lowercase(std::string_view s);

/// GPT-2's bytes_to_unicode: byte -> printable code point, and its inverse (-1 where none).
const std::vector<char32_t>& byte_to_unicode();
int unicode_to_byte(char32_t c);

}  // namespace hf2pte::llm::tok
