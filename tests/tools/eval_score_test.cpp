// SQuAD-style answer normalisation, exact match and token F1, against hand-computed values.
#include <gtest/gtest.h>

#include "eval_score.h"

namespace ragd::tools {
namespace {

TEST(EvalScore, NormalisesCasePunctuationArticlesAndSpaces) {
  EXPECT_EQ(normalize_answer("  The  Fresnel-Lens. "), "fresnel lens");
  EXPECT_EQ(normalize_answer("an Apple, a pear"), "apple pear");
  EXPECT_EQ(normalize_answer(""), "");
  EXPECT_EQ(normalize_answer("theatre"), "theatre");  // only whole-word articles go
}

TEST(EvalScore, ExactMatch) {
  EXPECT_TRUE(exact_match("396 megawatts", "396 Megawatts."));
  EXPECT_TRUE(exact_match("Stathholm\n", "stathholm"));
  EXPECT_FALSE(exact_match("396", "396 megawatts"));
  EXPECT_FALSE(exact_match("1751 ", "1715"));
}

TEST(EvalScore, TokenF1) {
  EXPECT_DOUBLE_EQ(token_f1("396 megawatts", "396 megawatts"), 1.0);
  // prediction 1 token, gold 2, 1 common: P = 1, R = 0.5, F1 = 2/3
  EXPECT_NEAR(token_f1("396", "396 megawatts"), 2.0 / 3.0, 1e-12);
  // repeated tokens count once per occurrence in gold: "ada ada" vs "ada thorne": common 1, P = R = 0.5
  EXPECT_NEAR(token_f1("Ada Ada", "Ada Thorne"), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(token_f1("Corrow", "Brackwater"), 0.0);
  EXPECT_DOUBLE_EQ(token_f1("", "x"), 0.0);
  EXPECT_DOUBLE_EQ(token_f1("the", "a"), 1.0);  // both normalise to nothing
}

}  // namespace
}  // namespace ragd::tools
