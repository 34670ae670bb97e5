// The enum-name facility (enum_names.h) on a table of its own; the real tables are tested next to
// their enums (kernels, kvstore, engine, seqparallel, pipelines) and through the daemon's config.
#include "ragd/common/enum_names.h"

#include <gtest/gtest.h>

namespace ragd::testns {

enum class Fruit : uint8_t { kApple = 1, kPear = 4, kFig = 9 };
inline constexpr auto kFruitNames = make_enum_names<Fruit>(
    "fruit", {{Fruit::kApple, "apple"}, {Fruit::kPear, "pear"}, {Fruit::kFig, "fig"}, {Fruit::kApple, "malus"}});
constexpr const auto& ragd_enum_names(Fruit) { return kFruitNames; }
static_assert(enum_names_valid(kFruitNames));
static_assert(enum_name(Fruit::kPear) == "pear");
static_assert(enum_from_name<Fruit>("malus") == Fruit::kApple);

TEST(EnumNames, EveryNameRoundTripsAndAliasesParseToTheirValue) {
  for (Fruit f : enum_values<Fruit>()) {
    auto back = parse_enum<Fruit>(enum_name(f));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, f);
  }
  EXPECT_EQ(enum_values<Fruit>().size(), 3u);  // the alias is not another value
  EXPECT_EQ(*parse_enum<Fruit>("malus"), Fruit::kApple);
  EXPECT_EQ(enum_name(Fruit::kApple), "apple");  // the first name is the canonical one
  EXPECT_EQ(enum_name(static_cast<Fruit>(7)), "?");
  EXPECT_FALSE(enum_known(static_cast<Fruit>(7)));
  EXPECT_TRUE(enum_known(Fruit::kFig));
}

TEST(EnumNames, UnknownNamesListTheChoices) {
  EXPECT_EQ(enum_choices<Fruit>(), "apple | pear | fig");
  EXPECT_EQ(enum_choices<Fruit>(", "), "apple, pear, fig");
  auto r = parse_enum<Fruit>("kiwi");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "fruit must be one of apple | pear | fig; got 'kiwi'");
  r = parse_enum<Fruit>("Apple", "basket.fruit");  // names are case-sensitive; the caller names the key
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "basket.fruit must be one of apple | pear | fig; got 'Apple'");
  r = parse_enum<Fruit>("");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("got ''"), std::string::npos);
  r = parse_enum<Fruit>(std::string(500, 'x'));  // a hostile value is clipped
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.status().message().size(), 160u);
}

TEST(EnumNames, ValidityCatchesDuplicateAndEmptyNames) {
  constexpr auto dup = make_enum_names<Fruit>("fruit", {{Fruit::kApple, "apple"}, {Fruit::kPear, "apple"}});
  static_assert(!enum_names_valid(dup));
  constexpr auto empty = make_enum_names<Fruit>("fruit", {{Fruit::kApple, ""}});
  static_assert(!enum_names_valid(empty));
  constexpr auto nowhat = make_enum_names<Fruit>("", {{Fruit::kApple, "apple"}});
  static_assert(!enum_names_valid(nowhat));
}

}  // namespace ragd::testns
