#include "ragd/common/status.h"

#include <gtest/gtest.h>

namespace ragd {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Status::InvalidArgument("value " + std::to_string(v) + " is not positive");
  return v;
}

Result<int> doubled(int v) {
  RAGD_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

TEST(Status, CarriesCodeAndMessage) {
  Status st = Status::NotFound("pipeline 'x'").with_context("route");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.to_string(), "NotFound: route: pipeline 'x'");
  EXPECT_TRUE(Status::OK().ok());
}

TEST(Result, PropagatesErrors) {
  auto ok = doubled(21);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 42);
  auto bad = doubled(-3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("-3"), std::string::npos);
}

}  // namespace
}  // namespace ragd
