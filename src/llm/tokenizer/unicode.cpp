#include "llm/tokenizer/unicode.h"

#include <utf8proc.h>

#include <array>
#include <cstdlib>
#include <unordered_map>

namespace hf2pte::llm::tok {

int utf8_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

namespace {
// Length of the valid sequence at s[i], or 0 with `*consumed` set to the
// maximal invalid subpart (Unicode's "substitution of maximal subparts",
// which Rust's lossy decoder follows).
int valid_seq(std::string_view s, size_t i, size_t* consumed) {
  auto b = static_cast<unsigned char>(s[i]);
  *consumed = 1;
  if (b < 0x80) return 1;
  int len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) len = 2;
  else if (b == 0xE0) len = 3, lo = 0xA0;
  else if (b >= 0xE1 && b <= 0xEC) len = 3;
  else if (b == 0xED) len = 3, hi = 0x9F;
  else if (b >= 0xEE && b <= 0xEF) len = 3;
  else if (b == 0xF0) len = 4, lo = 0x90;
  else if (b >= 0xF1 && b <= 0xF3) len = 4;
  else if (b == 0xF4) len = 4, hi = 0x8F;
  else return 0;
  for (int k = 1; k < len; ++k) {
    if (i + k >= s.size()) { *consumed = k; return 0; }
    auto c = static_cast<unsigned char>(s[i + k]);
    bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) { *consumed = k; return 0; }
  }
  return len;
}
}  // namespace

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t consumed;
    int n = valid_seq(s, i, &consumed);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += consumed;
    }
  }
  return out;
}

bool utf8_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t consumed;
    int n = valid_seq(s, i, &consumed);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::vector<char32_t> utf8_decode(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t consumed;
    int n = valid_seq(s, i, &consumed);
    if (n == 0) {
      out.push_back(0xFFFD);
      i += consumed;
      continue;
    }
    auto b = static_cast<unsigned char>(s[i]);
    char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(c);
    i += n;
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string utf8_encode(const std::vector<char32_t>& cps) {
  std::string out;
  for (char32_t c : cps) utf8_append(out, c);
  return out;
}

namespace {
utf8proc_category_t category(char32_t c) {
  return static_cast<utf8proc_category_t>(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
}
}  // namespace

bool is_whitespace(char32_t c) {
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_numeric(char32_t c) {
  auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_word_char(char32_t c) {
  if (c == '_') return true;
  auto cat = category(c);
  // Rust is_alphabetic is the Alphabetic property: letters, Nl, and
  // Other_Alphabetic marks (approximated by Mn/Mc, which covers common scripts).
  switch (cat) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
      return true;
    default:
      return false;
  }
}

bool is_bert_punctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  }
  auto cat = category(c);
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

bool is_other(char32_t c) {
  auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_CN || (cat >= UTF8PROC_CATEGORY_CC && cat <= UTF8PROC_CATEGORY_CO);
}

bool is_mark_nonspacing(char32_t c) { return category(c) == UTF8PROC_CATEGORY_MN; }

bool is_combining_mark(char32_t c) {
  auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
}

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::string unicode_normalize(std::string_view s, std::string_view form) {
  if (s.empty()) return {};
  // No UTF8PROC_NULLTERM: the text may hold NUL characters.
  int opts = UTF8PROC_STABLE;
  if (form == "NFC") opts |= UTF8PROC_COMPOSE;
  else if (form == "NFD") opts |= UTF8PROC_DECOMPOSE;
  else if (form == "NFKC") opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
  else opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  utf8proc_uint8_t* out = nullptr;
  auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                        &out, static_cast<utf8proc_option_t>(opts));
  if (n < 0) return std::string(s);  // invalid UTF-8: leave it to later stages
  std::string r(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) {
    if (c == 0x130) {  // the one full (multi-char) lowercase mapping in Unicode
      out += "i\xCC\x87";
      continue;
    }
    utf8_append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
  return out;
}

const std::vector<char32_t>& byte_to_unicode() {
  static const std::vector<char32_t> table = [] {
    std::vector<char32_t> t(256, 0);
    std::array<bool, 256> direct{};
    for (int b = '!'; b <= '~'; ++b) direct[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
    int n = 0;
    for (int b = 0; b < 256; ++b) t[b] = direct[b] ? char32_t(b) : char32_t(256 + n++);
    return t;
  }();
  return table;
}

int unicode_to_byte(char32_t c) {
  static const std::unordered_map<char32_t, int> inv = [] {
    std::unordered_map<char32_t, int> m;
    const auto& t = byte_to_unicode();
    for (int b = 0; b < 256; ++b) m[t[b]] = b;
    return m;
  }();
  auto it = inv.find(c);
  return it == inv.end() ? -1 : it->second;
}

}  // namespace hf2pte::llm::tok
