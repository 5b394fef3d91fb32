// Tests of store/etcd_json.h: etcd's proto3 JSON read without throwing, and
// the txn operations EtcdStore sends, asserted literally. No etcd needed.
#include "store/etcd_json.h"

#include <string>

#include "gtest/gtest.h"

namespace devmesh {
namespace etcd_internal {
namespace {

using Json = nlohmann::json;

TEST(EtcdJsonTest, PrefixEnd) {
  EXPECT_EQ(PrefixEnd("a/"), "a0");
  EXPECT_EQ(PrefixEnd("/devmesh/job/"), "/devmesh/job0");
  EXPECT_EQ(PrefixEnd("a\xff"), "b");
  EXPECT_EQ(PrefixEnd("a\xff\xff"), "b");
  EXPECT_EQ(PrefixEnd("\xff"), std::string(1, '\0'));
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));
}

TEST(EtcdJsonTest, Int64) {
  const Json j = Json::parse(
      R"({"revision":"9223372036854775807","n":7,"bad":"x","neg":"-3"})");
  EXPECT_EQ(Int64(j, "revision"), 9223372036854775807);
  EXPECT_EQ(Int64(j, "n"), 7);
  EXPECT_EQ(Int64(j, "neg"), -3);
  EXPECT_EQ(Int64(j, "bad"), 0);
  EXPECT_EQ(Int64(j, "absent"), 0);
  EXPECT_EQ(Int64(Json::array(), "n"), 0);
  EXPECT_EQ(Int64(Json(), "n"), 0);
}

TEST(EtcdJsonTest, BoolAndField) {
  const Json j = Json::parse(R"({"succeeded":true,"canceled":"yes"})");
  EXPECT_TRUE(Bool(j, "succeeded"));
  EXPECT_FALSE(Bool(j, "canceled"));  // not a bool
  EXPECT_FALSE(Bool(j, "absent"));
  EXPECT_TRUE(Field(j, "absent").is_null());
  EXPECT_TRUE(Field(Json(42), "x").is_null());
}

TEST(EtcdJsonTest, Bytes) {
  const Json j = Json::parse(R"({"value":"YmFy","bad":"!!","num":3})");
  EXPECT_EQ(*Bytes(j, "value"), "bar");
  EXPECT_EQ(*Bytes(j, "absent"), "");  // proto3 leaves "" out
  EXPECT_TRUE(absl::IsInternal(Bytes(j, "bad").status()));
  EXPECT_TRUE(absl::IsInternal(Bytes(j, "num").status()));
}

TEST(EtcdJsonTest, FirstKv) {
  const Json found = Json::parse(
      R"({"kvs":[{"key":"Zm9v","mod_revision":"5","value":"YmFy"}],"count":"1"})");
  absl::StatusOr<Kv> kv = FirstKv(found);
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_TRUE(kv->found);
  EXPECT_EQ(kv->value, "bar");
  EXPECT_EQ(kv->mod_revision, 5);
  // An empty value is left out of the JSON.
  kv = FirstKv(Json::parse(R"({"kvs":[{"key":"Zm9v","mod_revision":"6"}]})"));
  ASSERT_TRUE(kv.ok());
  EXPECT_TRUE(kv->found);
  EXPECT_EQ(kv->value, "");
  kv = FirstKv(Json::parse(R"({"header":{"revision":"6"}})"));
  ASSERT_TRUE(kv.ok());
  EXPECT_FALSE(kv->found);
}

TEST(EtcdJsonTest, Ops) {
  EXPECT_EQ(RangeOp("foo", false).dump(),
            R"({"request_range":{"key":"Zm9v"}})");
  EXPECT_EQ(RangeOp("foo", true).dump(),
            R"({"request_range":{"count_only":true,"key":"Zm9v"}})");
  EXPECT_EQ(PutOp("foo", "bar").dump(),
            R"({"request_put":{"key":"Zm9v","value":"YmFy"}})");
  EXPECT_EQ(PutOp(std::string("\0", 1), "").dump(),
            R"({"request_put":{"key":"AA==","value":""}})");
}

}  // namespace
}  // namespace etcd_internal
}  // namespace devmesh
