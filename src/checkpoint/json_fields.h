// Reading JSON documents from a checkpoint folder without exceptions, and
// typed field accessors that every architecture's config parser reuses.
//
// All accessors name the document in their errors the same way:
//   "config.json: missing required field 'hidden_size' (DIR/config.json)"
//   "config.json: field 'hidden_size' has wrong type; expected integer, got string (DIR/config.json)"
// where `where` is the document's path and the prefix is its file name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace hf2pte {

/// Limits and strictness for parse_json().
struct JsonParseOptions {
  /// Reject an object that names the same key twice. Python's json module
  /// keeps the last value silently; for files where a duplicate would hide a
  /// tensor (safetensors headers) we refuse instead.
  bool reject_duplicate_keys = false;
  /// Nesting deeper than this is refused (bounds memory on hostile input).
  size_t max_depth = 64;
};

/// Parses `text` as one JSON document. Never throws: syntax errors come back
/// as kInvalidInput "LABEL: invalid JSON at byte N: <reason> (where)", with
/// LABEL the file name of `where`.
Result<nlohmann::json> parse_json(std::string_view text, const std::string& where,
                                  const JsonParseOptions& options = {});

/// Reads and parses the file at `path`; it must hold a JSON object.
/// kNotFound/kIoError when it cannot be read, kInvalidInput when it is not an object.
Result<nlohmann::json> read_json_object_file(const std::string& path, const JsonParseOptions& options = {});

/// Short JSON type name used in "expected X, got Y" messages: "integer",
/// "float", "string", "boolean", "null", "array", "object".
std::string json_type_name(const nlohmann::json& value);

/// The prefix used in field errors: the file name of `where` ("config.json").
std::string json_label(const std::string& where);

// ---- field accessors ----------------------------------------------------
// get_X: the field is required; absent or null is an error.
// get_optional_X: absent or null gives nullopt; a wrong type is an error.
// get_X_or: absent or null gives `fallback`; a wrong type is an error.
// `object` must be a JSON object (checked; a non-object is an error).
// Integers must be JSON integers that fit int64 (1.0 is rejected: configs
// write integer fields as integers, and a float there signals a broken file).
// Doubles accept any JSON number. Booleans accept only true/false.

Result<int64_t> get_int(const nlohmann::json& object, std::string_view key, const std::string& where);
Result<std::optional<int64_t>> get_optional_int(const nlohmann::json& object, std::string_view key,
                                                const std::string& where);
Result<int64_t> get_int_or(const nlohmann::json& object, std::string_view key, int64_t fallback,
                           const std::string& where);

Result<double> get_double(const nlohmann::json& object, std::string_view key, const std::string& where);
Result<std::optional<double>> get_optional_double(const nlohmann::json& object, std::string_view key,
                                                  const std::string& where);
Result<double> get_double_or(const nlohmann::json& object, std::string_view key, double fallback,
                             const std::string& where);

Result<bool> get_bool(const nlohmann::json& object, std::string_view key, const std::string& where);
Result<std::optional<bool>> get_optional_bool(const nlohmann::json& object, std::string_view key,
                                              const std::string& where);
Result<bool> get_bool_or(const nlohmann::json& object, std::string_view key, bool fallback,
                         const std::string& where);

Result<std::string> get_string(const nlohmann::json& object, std::string_view key, const std::string& where);
Result<std::optional<std::string>> get_optional_string(const nlohmann::json& object, std::string_view key,
                                                       const std::string& where);
Result<std::string> get_string_or(const nlohmann::json& object, std::string_view key, std::string fallback,
                                  const std::string& where);

/// An integer or a list of integers (e.g. eos_token_id); absent or null gives
/// nullopt, a single integer a one-element list.
Result<std::optional<std::vector<int64_t>>> get_optional_int_list(const nlohmann::json& object,
                                                                  std::string_view key,
                                                                  const std::string& where);

}  // namespace hf2pte
