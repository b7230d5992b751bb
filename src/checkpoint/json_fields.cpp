#include "checkpoint/json_fields.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace hf2pte {

using nlohmann::json;

namespace {

// Builds the DOM from SAX events. We do not use json::parse(..., false):
// it reports only "discarded", without the byte position, and it cannot
// reject duplicate keys or bound nesting depth, which a hostile header needs.
class DomBuilder : public nlohmann::json_sax<json> {
 public:
  explicit DomBuilder(const JsonParseOptions& options) : options_(options) {}

  bool null() override { return put(json(nullptr)); }
  bool boolean(bool v) override { return put(json(v)); }
  bool number_integer(number_integer_t v) override { return put(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return put(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return put(json(v)); }
  bool string(string_t& v) override { return put(json(std::move(v))); }
  bool binary(binary_t&) override { return fail(0, "binary values are not JSON"); }

  bool start_object(std::size_t) override {
    if (stack_.size() >= options_.max_depth) return too_deep();
    json* v = put_container(json::object());
    if (v == nullptr) return false;
    stack_.push_back(v);
    return true;
  }
  bool key(string_t& k) override {
    json& obj = *stack_.back();
    if (options_.reject_duplicate_keys && obj.contains(k)) {
      error_ = fmt::format("duplicate key '{}'", k);
      return false;
    }
    // Insert now so that the value lands under this key, even if it is null.
    pending_ = &obj[k];
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (stack_.size() >= options_.max_depth) return too_deep();
    json* v = put_container(json::array());
    if (v == nullptr) return false;
    stack_.push_back(v);
    return true;
  }
  bool end_array() override {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    // ex.what() is "[json.exception.parse_error.101] parse error at line 1, column 5: <reason>";
    // keep only the reason, the byte position is reported separately.
    std::string what = ex.what();
    auto colon = what.find(": ");
    return fail(position, colon == std::string::npos ? what : what.substr(colon + 2));
  }

  json& root() { return root_; }
  const std::string& error() const { return error_; }
  size_t error_position() const { return error_position_; }

 private:
  bool put(json v) { return put_container(std::move(v)) != nullptr; }

  // Places a value where the parser is: the root, the pending object key,
  // or the end of the enclosing array. Returns where it went.
  json* put_container(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    *pending_ = std::move(v);
    return pending_;
  }
  bool too_deep() {
    error_ = fmt::format("nesting deeper than {} levels", options_.max_depth);
    return false;
  }
  bool fail(size_t position, std::string message) {
    error_position_ = position;
    error_ = std::move(message);
    return false;
  }

  const JsonParseOptions& options_;
  json root_;
  std::vector<json*> stack_;
  json* pending_ = nullptr;
  std::string error_;
  size_t error_position_ = 0;
};

Status wrong_type(std::string_view key, std::string_view expected, const json& got, const std::string& where) {
  return make_error(ErrorCode::kInvalidInput, "{}: field '{}' has wrong type; expected {}, got {} ({})",
                    json_label(where), key, expected, json_type_name(got), where);
}

Status missing(std::string_view key, const std::string& where) {
  return make_error(ErrorCode::kInvalidInput, "{}: missing required field '{}' ({})", json_label(where), key,
                    where);
}

// The field's value, or nullptr when absent or null.
Result<const json*> lookup(const json& object, std::string_view key, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(object.is_object(), kInvalidInput, "{}: expected a JSON object, got {} ({})",
                         json_label(where), json_type_name(object), where);
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return static_cast<const json*>(nullptr);
  return &*it;
}

Result<int64_t> as_int(const json& v, std::string_view key, const std::string& where) {
  if (v.is_number_unsigned()) {
    auto u = v.get<uint64_t>();
    HF2PTE_CHECK_OR_RETURN(u <= uint64_t(std::numeric_limits<int64_t>::max()), kInvalidInput,
                           "{}: field '{}' is out of range; expected at most {}, got {} ({})", json_label(where),
                           key, std::numeric_limits<int64_t>::max(), u, where);
    return int64_t(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return wrong_type(key, "integer", v, where);
}

}  // namespace

std::string json_type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "float";
    case json::value_t::binary: return "binary";
    case json::value_t::discarded: return "discarded";
  }
  return "?";
}

std::string json_label(const std::string& where) {
  std::string name = std::filesystem::path(where).filename().string();
  return name.empty() ? where : name;
}

Result<json> parse_json(std::string_view text, const std::string& where, const JsonParseOptions& options) {
  DomBuilder builder(options);
  bool ok = json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json,
                            /*strict=*/true, /*ignore_comments=*/false);
  if (!ok) {
    return make_error(ErrorCode::kInvalidInput, "{}: invalid JSON at byte {}: {} ({})", json_label(where),
                      builder.error_position(), builder.error(), where);
  }
  return std::move(builder.root());
}

Result<json> read_json_object_file(const std::string& path, const JsonParseOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return make_error(ErrorCode::kNotFound, "missing file {} ({})", json_label(path), path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIoError, "cannot open file: {} ({})", std::strerror(errno), path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::kIoError, "cannot read file ({})", path);
  HF2PTE_ASSIGN_OR_RETURN(json doc, parse_json(buffer.str(), path, options));
  HF2PTE_CHECK_OR_RETURN(doc.is_object(), kInvalidInput, "{}: expected a JSON object, got {} ({})",
                         json_label(path), json_type_name(doc), path);
  return doc;
}

// ---- integers ----

Result<int64_t> get_int(const json& object, std::string_view key, const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(const json* v, lookup(object, key, where));
  if (v == nullptr) return missing(key, where);
  return as_int(*v, key, where);
}

Result<std::optional<int64_t>> get_optional_int(const json& object, std::string_view key,
                                                const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(const json* v, lookup(object, key, where));
  if (v == nullptr) return std::optional<int64_t>();
  HF2PTE_ASSIGN_OR_RETURN(int64_t i, as_int(*v, key, where));
  return std::optional<int64_t>(i);
}

Result<int64_t> get_int_or(const json& object, std::string_view key, int64_t fallback, const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(std::optional<int64_t> v, get_optional_int(object, key, where));
  return v.value_or(fallback);
}

// ---- doubles ----

Result<double> get_double(const json& object, std::string_view key, const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(std::optional<double> v, get_optional_double(object, key, where));
  if (!v) return missing(key, where);
  return *v;
}

Result<std::optional<double>> get_optional_double(const json& object, std::string_view key,
                                                  const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(const json* v, lookup(object, key, where));
  if (v == nullptr) return std::optional<double>();
  // Integers are fine here: "rope_theta": 10000 is as valid as 10000.0.
  if (!v->is_number()) return wrong_type(key, "number", *v, where);
  return std::optional<double>(v->get<double>());
}

Result<double> get_double_or(const json& object, std::string_view key, double fallback, const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(std::optional<double> v, get_optional_double(object, key, where));
  return v.value_or(fallback);
}

// ---- booleans ----

Result<bool> get_bool(const json& object, std::string_view key, const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(std::optional<bool> v, get_optional_bool(object, key, where));
  if (!v) return missing(key, where);
  return *v;
}

Result<std::optional<bool>> get_optional_bool(const json& object, std::string_view key, const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(const json* v, lookup(object, key, where));
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return wrong_type(key, "boolean", *v, where);
  return std::optional<bool>(v->get<bool>());
}

Result<bool> get_bool_or(const json& object, std::string_view key, bool fallback, const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(std::optional<bool> v, get_optional_bool(object, key, where));
  return v.value_or(fallback);
}

// ---- strings ----

Result<std::string> get_string(const json& object, std::string_view key, const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(std::optional<std::string> v, get_optional_string(object, key, where));
  if (!v) return missing(key, where);
  return std::move(*v);
}

Result<std::optional<std::string>> get_optional_string(const json& object, std::string_view key,
                                                       const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(const json* v, lookup(object, key, where));
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return wrong_type(key, "string", *v, where);
  return std::optional<std::string>(v->get<std::string>());
}

Result<std::string> get_string_or(const json& object, std::string_view key, std::string fallback,
                                  const std::string& where) {
  HF2PTE_ASSIGN_OR_RETURN(std::optional<std::string> v, get_optional_string(object, key, where));
  if (!v) return fallback;
  return std::move(*v);
}

// ---- lists ----

Result<std::optional<std::vector<int64_t>>> get_optional_int_list(const json& object, std::string_view key,
                                                                  const std::string& where) {
  using List = std::optional<std::vector<int64_t>>;
  HF2PTE_ASSIGN_OR_RETURN(const json* v, lookup(object, key, where));
  if (v == nullptr) return List();
  if (v->is_number_integer()) {
    HF2PTE_ASSIGN_OR_RETURN(int64_t i, as_int(*v, key, where));
    return List(std::vector<int64_t>{i});
  }
  if (!v->is_array()) return wrong_type(key, "integer or list of integers", *v, where);
  std::vector<int64_t> out;
  out.reserve(v->size());
  for (const json& e : *v) {
    if (!e.is_number_integer()) return wrong_type(key, "integer or list of integers", e, where);
    HF2PTE_ASSIGN_OR_RETURN(int64_t i, as_int(e, key, where));
    out.push_back(i);
  }
  return List(std::move(out));
}

}  // namespace hf2pte
