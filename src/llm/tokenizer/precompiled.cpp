#include "llm/tokenizer/precompiled.h"

#include <utf8proc.h>

#include "llm/tokenizer/unicode.h"

namespace hf2pte::llm::tok {
namespace {

Status charsmap_error(std::string_view what) {
  return make_error(ErrorCode::kInvalidInput, "Precompiled normalizer: {} (tokenizer.json precompiled_charsmap)", what);
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// darts-clone unit fields (see darts.h: DoubleArrayUnit).
bool unit_has_leaf(uint32_t u) { return ((u >> 8) & 1) != 0; }
uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }
uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

// Grapheme cluster boundaries of `cps` (indices where a cluster starts), UAX #29 via utf8proc.
std::vector<size_t> grapheme_starts(const std::vector<char32_t>& cps) {
  std::vector<size_t> starts;
  utf8proc_int32_t state = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (i == 0 || utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(cps[i - 1]),
                                                   static_cast<utf8proc_int32_t>(cps[i]), &state)) {
      starts.push_back(i);
    }
  }
  return starts;
}

}  // namespace

Result<std::string> base64_decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return charsmap_error("base64 text has a bad length");
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = base64_value(c);
    if (v < 0) return charsmap_error("invalid base64 character");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

Result<PrecompiledCharsMap> PrecompiledCharsMap::parse(std::string_view blob) {
  if (blob.size() < 4) return charsmap_error("shorter than its 4-byte header");
  auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(blob[i])); };
  uint32_t trie_bytes = byte(0) | byte(1) << 8 | byte(2) << 16 | byte(3) << 24;
  if (trie_bytes == 0 || trie_bytes % 4 != 0) return charsmap_error("trie size is not a positive multiple of 4");
  if (trie_bytes > blob.size() - 4) {
    return charsmap_error(fmt::format("trie size {} exceeds the {} bytes present", trie_bytes, blob.size() - 4));
  }
  PrecompiledCharsMap m;
  m.units_.resize(trie_bytes / 4);
  for (size_t k = 0; k < m.units_.size(); ++k) {
    size_t o = 4 + 4 * k;
    m.units_[k] = byte(o) | byte(o + 1) << 8 | byte(o + 2) << 16 | byte(o + 3) << 24;
  }
  m.normalized_ = std::string(blob.substr(4 + trie_bytes));
  if (!utf8_valid(m.normalized_)) return charsmap_error("replacement strings are not valid UTF-8");
  return m;
}

std::optional<std::string_view> PrecompiledCharsMap::transform(std::string_view chunk) const {
  const size_t n = units_.size();
  size_t pos = unit_offset(units_[0]);
  for (char ch : chunk) {
    auto c = static_cast<unsigned char>(ch);
    if (c == 0) break;
    pos ^= c;
    if (pos >= n) return std::nullopt;
    uint32_t unit = units_[pos];
    if (unit_label(unit) != c) return std::nullopt;
    pos ^= unit_offset(unit);
    if (!unit_has_leaf(unit)) continue;
    // The first leaf met is the shortest matching key: HF takes that one.
    if (pos >= n) return std::nullopt;
    size_t begin = unit_value(units_[pos]);
    if (begin > normalized_.size()) return std::nullopt;
    size_t end = normalized_.find('\0', begin);
    if (end == std::string::npos) end = normalized_.size();
    // An offset into the middle of a character would yield invalid UTF-8: treat it as no rule.
    if (begin < end && (static_cast<unsigned char>(normalized_[begin]) & 0xC0) == 0x80) return std::nullopt;
    return std::string_view(normalized_).substr(begin, end - begin);
  }
  return std::nullopt;
}

std::string PrecompiledCharsMap::normalize(std::string_view text) const {
  // Work on well-formed UTF-8 (invalid bytes become U+FFFD, as everywhere else in the pipeline).
  std::vector<char32_t> cps = utf8_decode(text);
  std::vector<size_t> starts = grapheme_starts(cps);
  std::string out;
  out.reserve(text.size());
  std::string cluster, one;
  for (size_t g = 0; g < starts.size(); ++g) {
    size_t b = starts[g], e = g + 1 < starts.size() ? starts[g + 1] : cps.size();
    cluster.clear();
    for (size_t k = b; k < e; ++k) utf8_append(cluster, cps[k]);
    if (cluster.size() < 6) {
      if (auto r = transform(cluster)) {
        out += *r;
        continue;
      }
    }
    for (size_t k = b; k < e; ++k) {
      one.clear();
      utf8_append(one, cps[k]);
      auto r = transform(one);
      out += r ? *r : std::string_view(one);
    }
  }
  return out;
}

}  // namespace hf2pte::llm::tok
