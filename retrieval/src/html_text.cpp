// HTML to text through gumbo (an HTML5-conformant parser), never regular expressions.
#include <gumbo.h>

#include <string>

#include "ragd/retrieval/reader.h"
#include "ragd/retrieval/text_util.h"

namespace ragd::retrieval {

namespace {

bool is_skipped(GumboTag t) {
  switch (t) {
    case GUMBO_TAG_SCRIPT: case GUMBO_TAG_STYLE: case GUMBO_TAG_NOSCRIPT: case GUMBO_TAG_TEMPLATE:
    case GUMBO_TAG_HEAD: case GUMBO_TAG_IFRAME: case GUMBO_TAG_SVG: case GUMBO_TAG_MATH:
    case GUMBO_TAG_OBJECT: case GUMBO_TAG_EMBED: case GUMBO_TAG_CANVAS:
      return true;
    default:
      return false;
  }
}

bool is_block(GumboTag t) {
  switch (t) {
    case GUMBO_TAG_P: case GUMBO_TAG_DIV: case GUMBO_TAG_LI: case GUMBO_TAG_UL: case GUMBO_TAG_OL:
    case GUMBO_TAG_H1: case GUMBO_TAG_H2: case GUMBO_TAG_H3: case GUMBO_TAG_H4: case GUMBO_TAG_H5:
    case GUMBO_TAG_H6: case GUMBO_TAG_SECTION: case GUMBO_TAG_ARTICLE: case GUMBO_TAG_HEADER:
    case GUMBO_TAG_FOOTER: case GUMBO_TAG_NAV: case GUMBO_TAG_ASIDE: case GUMBO_TAG_MAIN:
    case GUMBO_TAG_BLOCKQUOTE: case GUMBO_TAG_PRE: case GUMBO_TAG_TABLE: case GUMBO_TAG_TR:
    case GUMBO_TAG_DL: case GUMBO_TAG_DT: case GUMBO_TAG_DD: case GUMBO_TAG_FIGURE:
    case GUMBO_TAG_FIGCAPTION: case GUMBO_TAG_HR: case GUMBO_TAG_ADDRESS: case GUMBO_TAG_BODY:
    case GUMBO_TAG_FORM: case GUMBO_TAG_FIELDSET: case GUMBO_TAG_DETAILS: case GUMBO_TAG_SUMMARY:
      return true;
    default:
      return false;
  }
}

class Extractor {
 public:
  std::string out;

  void paragraph_break() {
    trim_trailing_spaces();
    if (out.empty()) return;
    size_t nl = 0;
    for (size_t i = out.size(); i > 0 && out[i - 1] == '\n'; --i) ++nl;
    for (; nl < 2; ++nl) out.push_back('\n');
  }
  void line_break() {
    trim_trailing_spaces();
    if (!out.empty()) out.push_back('\n');
  }
  void text(const char* s, bool pre) {
    if (pre) {
      out.append(s);
      return;
    }
    for (const char* p = s; *p; ++p) {
      if (is_space_byte(static_cast<unsigned char>(*p))) {
        if (!out.empty() && !is_space_byte(static_cast<unsigned char>(out.back()))) out.push_back(' ');
      } else {
        out.push_back(*p);
      }
    }
  }
  void walk(const GumboNode* node, bool pre) {
    if (node->type == GUMBO_NODE_TEXT || node->type == GUMBO_NODE_CDATA) {
      text(node->v.text.text, pre);
      return;
    }
    if (node->type == GUMBO_NODE_WHITESPACE) {
      text(node->v.text.text, pre);
      return;
    }
    if (node->type != GUMBO_NODE_ELEMENT && node->type != GUMBO_NODE_DOCUMENT) return;
    if (node->type == GUMBO_NODE_ELEMENT) {
      GumboTag tag = node->v.element.tag;
      if (is_skipped(tag)) return;
      if (tag == GUMBO_TAG_BR) {
        line_break();
        return;
      }
      bool block = is_block(tag);
      bool child_pre = pre || tag == GUMBO_TAG_PRE || tag == GUMBO_TAG_TEXTAREA;
      if (block) paragraph_break();
      else if (tag == GUMBO_TAG_TD || tag == GUMBO_TAG_TH) text(" ", false);
      const GumboVector& kids = node->v.element.children;
      for (unsigned i = 0; i < kids.length; ++i) walk(static_cast<const GumboNode*>(kids.data[i]), child_pre);
      if (block) paragraph_break();
      return;
    }
    const GumboVector& kids = node->v.document.children;
    for (unsigned i = 0; i < kids.length; ++i) walk(static_cast<const GumboNode*>(kids.data[i]), pre);
  }

 private:
  void trim_trailing_spaces() {
    while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
  }
};

const GumboNode* find_title(const GumboNode* node) {
  if (node->type != GUMBO_NODE_ELEMENT) return nullptr;
  if (node->v.element.tag == GUMBO_TAG_TITLE) return node;
  const GumboVector& kids = node->v.element.children;
  for (unsigned i = 0; i < kids.length; ++i)
    if (const GumboNode* t = find_title(static_cast<const GumboNode*>(kids.data[i]))) return t;
  return nullptr;
}

}  // namespace

HtmlText html_to_text(std::string_view html) {
  HtmlText r;
  GumboOutput* doc = gumbo_parse_with_options(&kGumboDefaultOptions, html.data(), html.size());
  if (const GumboNode* t = find_title(doc->root)) {
    Extractor ex;
    const GumboVector& kids = t->v.element.children;
    for (unsigned i = 0; i < kids.length; ++i) ex.walk(static_cast<const GumboNode*>(kids.data[i]), false);
    r.title = ex.out;
    while (!r.title.empty() && is_space_byte(static_cast<unsigned char>(r.title.back()))) r.title.pop_back();
    size_t b = 0;
    while (b < r.title.size() && is_space_byte(static_cast<unsigned char>(r.title[b]))) ++b;
    r.title.erase(0, b);
  }
  Extractor ex;
  ex.walk(doc->root, false);
  gumbo_destroy_output(&kGumboDefaultOptions, doc);
  std::string& s = ex.out;
  size_t b = 0;
  while (b < s.size() && is_space_byte(static_cast<unsigned char>(s[b]))) ++b;
  size_t e = s.size();
  while (e > b && is_space_byte(static_cast<unsigned char>(s[e - 1]))) --e;
  r.text = s.substr(b, e - b);
  return r;
}

}  // namespace ragd::retrieval
