#include "checkpoint/json_fields.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace hf2pte {
namespace {

using nlohmann::json;

const std::string kWhere = "/m/generation_config.json";

TEST(JsonFields, Accessors) {
  json j = {{"i", 3}, {"u", 5u}, {"d", 0.5}, {"b", true}, {"s", "x"}, {"n", nullptr}, {"l", {1, 2}}};
  EXPECT_EQ(*get_int(j, "i", kWhere), 3);
  EXPECT_EQ(*get_int(j, "u", kWhere), 5);
  EXPECT_DOUBLE_EQ(*get_double(j, "d", kWhere), 0.5);
  EXPECT_DOUBLE_EQ(*get_double(j, "i", kWhere), 3.0);  // integers are numbers too
  EXPECT_TRUE(*get_bool(j, "b", kWhere));
  EXPECT_EQ(*get_string(j, "s", kWhere), "x");

  EXPECT_FALSE(get_optional_int(j, "absent", kWhere)->has_value());
  EXPECT_FALSE(get_optional_int(j, "n", kWhere)->has_value());  // null reads as absent
  EXPECT_EQ(*get_int_or(j, "n", 7, kWhere), 7);
  EXPECT_EQ(*get_string_or(j, "absent", "dflt", kWhere), "dflt");
  EXPECT_TRUE(*get_bool_or(j, "absent", true, kWhere));
  EXPECT_DOUBLE_EQ(*get_double_or(j, "absent", 2.5, kWhere), 2.5);
  EXPECT_EQ(**get_optional_int_list(j, "l", kWhere), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(**get_optional_int_list(j, "i", kWhere), (std::vector<int64_t>{3}));
  EXPECT_FALSE(get_optional_int_list(j, "n", kWhere)->has_value());

  EXPECT_EQ(get_int(j, "n", kWhere).status().message(),
            "generation_config.json: missing required field 'n' (" + kWhere + ")");
  EXPECT_EQ(get_int(j, "d", kWhere).status().message(),
            "generation_config.json: field 'd' has wrong type; expected integer, got float (" + kWhere + ")");
  EXPECT_EQ(get_bool(j, "s", kWhere).status().message(),
            "generation_config.json: field 's' has wrong type; expected boolean, got string (" + kWhere + ")");
  EXPECT_EQ(get_string_or(j, "l", "", kWhere).status().message(),
            "generation_config.json: field 'l' has wrong type; expected string, got array (" + kWhere + ")");
  EXPECT_EQ(get_double(j, "b", kWhere).status().code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(get_int(json::array(), "x", kWhere).status().message(),
            "generation_config.json: expected a JSON object, got array (" + kWhere + ")");
}

TEST(JsonFields, ParseReportsPositionAndRejectsDuplicatesOnRequest) {
  auto bad = parse_json(R"({"a": 1,})", kWhere);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(bad.status().message().find("generation_config.json: invalid JSON at byte 9: "), std::string::npos)
      << bad.status().message();

  const char* dup = R"({"a": 1, "b": {"c": 2, "c": 3}})";
  auto lenient = parse_json(dup, kWhere);
  ASSERT_TRUE(lenient.is_ok());
  EXPECT_EQ((*lenient)["b"]["c"], 3);  // last wins, as in Python
  JsonParseOptions strict;
  strict.reject_duplicate_keys = true;
  auto rejected = parse_json(dup, kWhere, strict);
  ASSERT_FALSE(rejected.is_ok());
  EXPECT_NE(rejected.status().message().find("duplicate key 'c'"), std::string::npos);

  // The DOM is rebuilt faithfully: nesting, arrays of objects, nulls, numbers.
  const char* text = R"({"x": [1, -2, 3.5, {"y": null, "z": [true, "s"]}, []], "big": 18446744073709551615})";
  auto doc = parse_json(text, kWhere);
  ASSERT_TRUE(doc.is_ok()) << doc.status().message();
  EXPECT_EQ(*doc, json::parse(text));

  std::string deep(100, '[');
  deep += std::string(100, ']');
  EXPECT_NE(parse_json(deep, kWhere).status().message().find("nesting deeper than 64"), std::string::npos);
  EXPECT_TRUE(parse_json("7", kWhere).is_ok());
  EXPECT_FALSE(parse_json("", kWhere).is_ok());
}

TEST(JsonFields, ReadObjectFile) {
  testing::TempDir dir;
  EXPECT_EQ(read_json_object_file(dir.file("x.json")).status().code(), ErrorCode::kNotFound);
  testing::write_text(dir.file("x.json"), "\"str\"");
  EXPECT_EQ(read_json_object_file(dir.file("x.json")).status().message(),
            "x.json: expected a JSON object, got string (" + dir.file("x.json") + ")");
  testing::write_text(dir.file("x.json"), "{\"k\": 1}\n");
  EXPECT_EQ((*read_json_object_file(dir.file("x.json")))["k"], 1);
}

}  // namespace
}  // namespace hf2pte
