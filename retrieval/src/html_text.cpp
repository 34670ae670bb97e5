// HTML to text through gumbo (an HTML5-conformant parser), never regular expressions.
//
// Main content. Documentation sites repeat their navigation bar, sidebar table of contents,
// "previous / next" links and copyright footer on every page; indexed as text they match every
// query about the site and crowd out the page that answers it. The rules find that boilerplate by
// HTML structure and semantics, not by one generator's class names; they were measured on Sphinx
// (python3.11-doc), DocBook (postgresql-doc-15, debian-reference) and asciidoc (git-doc) pages:
//   1. Landmarks and widgets are dropped: <nav>, page-level <aside>, <footer>, <form>, <button>,
//      <select>, <textarea>, <dialog>, <menu>, <noscript>, <template>, <svg>; elements whose ARIA
//      role is navigation, banner, contentinfo, complementary, search, menu(bar), toolbar, dialog,
//      tooltip or doc-toc; hidden elements (`hidden`, aria-hidden="true", display:none,
//      visibility:hidden). An explicit role wins over the tag's implicit one. A page-level
//      <header> (the site banner) is dropped; a <header> inside article / section / main keeps
//      its headings only.
//   2. Permalink anchors go: <a href="#..."> whose text is one symbol ("¶", "#", "§").
//   3. The root is the largest visible <main> / role="main", else the page's one <article>, else
//      <body>.
//   4. Blocks (div, table, ul, dl, p, td, ...) below the root are dropped when link-dense (at
//      least kLinkDenseMinLinks links and kLinkDensityNum / kLinkDensityDen of their text inside
//      links: menus, tables of contents, link lists; measured bottom-up, on what the blocks inside
//      leave, with a caption over a dropped list going too), or when they are short
//      (kNavBlockMaxText), hold no heading and carry a navigation link, an <a> with `accesskey` or
//      rel = next / prev / up / home / ... (DocBook's navheader and navfooter tables, whose links
//      are images). Only links within the site count: lists of outside references are content.
// When the rules leave no paragraph (only headings, or nothing) under <main>, they are retried on
// <body>, then on <body> without the link-density rule (a page that is one table of contents keeps
// it, without the site's navigation); when that too leaves none, the plain visible text is
// returned, so a page with text never comes back empty.
//
// Repeated short lines were tried as a fifth rule (a short paragraph, mostly link text, that
// occurs twice in a page): on the four sites above it removed only content (class names in
// tables, repeated cross-references), the repeated boilerplate being the navigation bars rules 1
// and 4 already drop, so it is not applied.
//
// Thread-safety: html_to_text is a pure function of its arguments (gumbo keeps no global state).
#include <gumbo.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ragd/common/utf8.h"
#include "ragd/retrieval/reader.h"
#include "ragd/retrieval/text_util.h"

namespace ragd::retrieval {

namespace {

// Rule 4's link-dense block has at least this many internal links: three keeps a sentence with one
// or two cross-references ("see json.dumps() and json.loads()")...
constexpr size_t kLinkDenseMinLinks = 3;
// ... and at least this share of its text inside them. Measured on the Python library reference:
// at 1/2, prose sentences naming three functions ("Note that get_event_loop(), set_event_loop()
// and new_event_loop() ...") were dropped; from 3/4 up only lists of links are.
constexpr size_t kLinkDensityNum = 3, kLinkDensityDen = 4;
// A block carrying a navigation link (accesskey / rel=next...) is dropped when it has at most this
// many non-space bytes: DocBook's navigation tables hold two page titles (~70-140 bytes).
constexpr size_t kNavBlockMaxText = 256;
// Plain (non-link) text a link-dense block may hold and still go whole (rule 4).
constexpr size_t kLinkDenseLeftover = 64;

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

// Containers the link-density and navigation-block rules may drop (rule 4).
bool is_prunable(GumboTag t) {
  switch (t) {
    case GUMBO_TAG_P: case GUMBO_TAG_DIV: case GUMBO_TAG_LI: case GUMBO_TAG_UL: case GUMBO_TAG_OL:
    case GUMBO_TAG_SECTION: case GUMBO_TAG_TABLE: case GUMBO_TAG_TBODY: case GUMBO_TAG_THEAD:
    case GUMBO_TAG_TFOOT: case GUMBO_TAG_TR: case GUMBO_TAG_TD: case GUMBO_TAG_TH: case GUMBO_TAG_DL:
    case GUMBO_TAG_DT: case GUMBO_TAG_DD: case GUMBO_TAG_CENTER: case GUMBO_TAG_DIR:
    case GUMBO_TAG_BLOCKQUOTE: case GUMBO_TAG_ADDRESS: case GUMBO_TAG_DETAILS: case GUMBO_TAG_FIELDSET:
      return true;
    default:
      return false;
  }
}

int heading_level(GumboTag t) {
  switch (t) {
    case GUMBO_TAG_H1: return 1;
    case GUMBO_TAG_H2: return 2;
    case GUMBO_TAG_H3: return 3;
    case GUMBO_TAG_H4: return 4;
    case GUMBO_TAG_H5: return 5;
    case GUMBO_TAG_H6: return 6;
    default: return 0;
  }
}

unsigned char ascii_lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c; }

bool ieq(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(static_cast<unsigned char>(a[i])) != ascii_lower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

const char* attr(const GumboNode* n, const char* name) {
  const GumboAttribute* a = gumbo_get_attribute(&n->v.element.attributes, name);
  return a ? a->value : nullptr;
}

// The first whitespace-separated token of an attribute value (ARIA uses the first role it knows;
// the roles tested here are all known ones).
std::string_view first_token(const char* v) {
  std::string_view s = v ? v : "";
  size_t b = 0;
  while (b < s.size() && is_space_byte(static_cast<unsigned char>(s[b]))) ++b;
  size_t e = b;
  while (e < s.size() && !is_space_byte(static_cast<unsigned char>(s[e]))) ++e;
  return s.substr(b, e - b);
}

bool has_token(const char* v, std::string_view token) {
  std::string_view s = v ? v : "";
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space_byte(static_cast<unsigned char>(s[i]))) ++i;
    size_t e = i;
    while (e < s.size() && !is_space_byte(static_cast<unsigned char>(s[e]))) ++e;
    if (e > i && ieq(s.substr(i, e - i), token)) return true;
    i = e;
  }
  return false;
}

// Unknown tags (dialog is not in gumbo's table) by their source name.
bool unknown_tag_is(const GumboNode* n, std::string_view name) {
  if (n->v.element.tag != GUMBO_TAG_UNKNOWN) return false;
  GumboStringPiece p = n->v.element.original_tag;
  gumbo_tag_from_original_text(&p);
  return ieq(std::string_view(p.data, p.length), name);
}

bool is_hidden(const GumboNode* n) {
  if (attr(n, "hidden")) return true;
  if (const char* a = attr(n, "aria-hidden"); a && ieq(first_token(a), "true")) return true;
  if (const char* st = attr(n, "style")) {
    std::string s;
    for (const char* p = st; *p; ++p)
      if (!is_space_byte(static_cast<unsigned char>(*p))) s.push_back(static_cast<char>(ascii_lower(static_cast<unsigned char>(*p))));
    if (s.find("display:none") != std::string::npos || s.find("visibility:hidden") != std::string::npos) return true;
  }
  return false;
}

bool is_boilerplate_role(std::string_view r) {
  for (std::string_view b : {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar",
                             "toolbar", "dialog", "alertdialog", "tooltip", "doc-toc"})
    if (ieq(r, b)) return true;
  return false;
}

bool is_main_role(const GumboNode* n) {
  return n->v.element.tag == GUMBO_TAG_MAIN || ieq(first_token(attr(n, "role")), "main");
}

// An <a> that moves through the site rather than pointing at content (rule 4).
bool is_nav_link(const GumboNode* n) {
  if (attr(n, "accesskey")) return true;
  const char* rel = attr(n, "rel");
  if (!rel) return false;
  for (std::string_view r : {"next", "prev", "previous", "up", "home", "first", "last", "start", "contents", "index"})
    if (has_token(rel, r)) return true;
  return false;
}

enum class Fate : uint8_t { kKeep, kDrop, kHeadingsOnly };

// Where an element sits, for the implicit roles of <header> and <aside> (HTML-AAM): inside
// article / aside / main / nav / section a <header> introduces that section, not the site; inside
// article / aside / nav / section an <aside> is a note of that section (Sphinx's footnotes), not
// the page's sidebar.
struct Scope {
  bool header_scoped = false;
  bool aside_scoped = false;
};

// Rule 1.
Fate structural_fate(const GumboNode* n, Scope scope) {
  if (is_hidden(n)) return Fate::kDrop;
  std::string_view role = first_token(attr(n, "role"));
  if (!role.empty() && !ieq(role, "presentation") && !ieq(role, "none"))
    return is_boilerplate_role(role) ? Fate::kDrop : Fate::kKeep;
  switch (n->v.element.tag) {
    case GUMBO_TAG_NAV: case GUMBO_TAG_FOOTER: case GUMBO_TAG_FORM:
    case GUMBO_TAG_BUTTON: case GUMBO_TAG_SELECT: case GUMBO_TAG_TEXTAREA: case GUMBO_TAG_DATALIST:
    case GUMBO_TAG_MENU: case GUMBO_TAG_NOSCRIPT: case GUMBO_TAG_TEMPLATE: case GUMBO_TAG_SVG:
      return Fate::kDrop;
    case GUMBO_TAG_HEADER:
      return scope.header_scoped ? Fate::kHeadingsOnly : Fate::kDrop;
    case GUMBO_TAG_ASIDE:
      return scope.aside_scoped ? Fate::kKeep : Fate::kDrop;
    case GUMBO_TAG_UNKNOWN:
      return unknown_tag_is(n, "dialog") ? Fate::kDrop : Fate::kKeep;
    default:
      return Fate::kKeep;
  }
}

size_t non_space_bytes(const char* s) {
  size_t n = 0;
  for (; *s; ++s) n += !is_space_byte(static_cast<unsigned char>(*s));
  return n;
}

// Rule 2: "¶" / "#" / "§" self-links that generators put after headings and definitions.
bool is_permalink(const GumboNode* n) {
  const char* href = attr(n, "href");
  if (!href || href[0] != '#') return false;
  std::string t;
  const GumboVector& kids = n->v.element.children;
  for (unsigned i = 0; i < kids.length; ++i) {
    const GumboNode* k = static_cast<const GumboNode*>(kids.data[i]);
    if (k->type == GUMBO_NODE_TEXT) t += k->v.text.text;
    else if (k->type != GUMBO_NODE_WHITESPACE) return false;
  }
  size_t b = 0, e = t.size();
  while (b < e && is_space_byte(static_cast<unsigned char>(t[b]))) ++b;
  while (e > b && is_space_byte(static_cast<unsigned char>(t[e - 1]))) --e;
  if (e == b || e - b > 4) return false;
  // One code point (a UTF-8 lead byte then continuation bytes) that is not a letter or digit.
  for (size_t i = b + 1; i < e; ++i)
    if (!utf8_continuation(t[i])) return false;
  unsigned char c = static_cast<unsigned char>(t[b]);
  return c >= 0x80 || !std::isalnum(c);
}

// The lower-case host of an absolute or protocol-relative URL ("" for a relative one); `*scheme`
// gets the scheme ("" when none).
std::string url_host(std::string_view u, std::string* scheme) {
  scheme->clear();
  size_t b = 0;
  while (b < u.size() && is_space_byte(static_cast<unsigned char>(u[b]))) ++b;
  u.remove_prefix(b);
  size_t i = 0;
  while (i < u.size() && (std::isalnum(static_cast<unsigned char>(u[i])) || u[i] == '+' || u[i] == '-' || u[i] == '.')) ++i;
  if (i > 0 && i < u.size() && u[i] == ':' && std::isalpha(static_cast<unsigned char>(u[0]))) {
    for (size_t k = 0; k < i; ++k) scheme->push_back(static_cast<char>(ascii_lower(static_cast<unsigned char>(u[k]))));
    u.remove_prefix(i + 1);
  }
  if (u.substr(0, 2) != "//") return "";
  u.remove_prefix(2);
  std::string host;
  for (char ch : u) {
    if (ch == '/' || ch == '?' || ch == '#' || ch == ':') break;
    host.push_back(static_cast<char>(ascii_lower(static_cast<unsigned char>(ch))));
  }
  if (size_t at = host.rfind('@'); at != std::string::npos) host.erase(0, at + 1);
  return host;
}

// Rule 4 counts only links within the site: menus, tables of contents and "previous / next" bars
// point inside it, while a list of outside references (DocBook's glossaries of acronyms linked to
// encyclopedia articles, "further reading" lists) is content. A link is external when it names a
// scheme or host and that host is not the page's own (from <base> or the canonical URL); a
// javascript: link is a widget, internal.
bool is_external(const char* href, const std::string& page_host) {
  std::string scheme;
  std::string host = url_host(href, &scheme);
  if (scheme.empty() && host.empty()) return false;
  if (scheme == "javascript") return false;
  if (host.empty()) return true;  // mailto:, tel:, ...
  return page_host.empty() || host != page_host;
}

// The page's own host: <base href>, else <link rel="canonical">, else <meta property="og:url">.
std::string find_page_host(const GumboNode* html) {
  if (html->type != GUMBO_NODE_ELEMENT) return "";
  const char* base = nullptr;
  const char* canonical = nullptr;
  const char* og = nullptr;
  const GumboVector& kids = html->v.element.children;
  for (unsigned i = 0; i < kids.length; ++i) {
    const GumboNode* head = static_cast<const GumboNode*>(kids.data[i]);
    if (head->type != GUMBO_NODE_ELEMENT || head->v.element.tag != GUMBO_TAG_HEAD) continue;
    const GumboVector& hk = head->v.element.children;
    for (unsigned j = 0; j < hk.length; ++j) {
      const GumboNode* e = static_cast<const GumboNode*>(hk.data[j]);
      if (e->type != GUMBO_NODE_ELEMENT) continue;
      if (e->v.element.tag == GUMBO_TAG_BASE && !base) base = attr(e, "href");
      if (e->v.element.tag == GUMBO_TAG_LINK && !canonical && has_token(attr(e, "rel"), "canonical"))
        canonical = attr(e, "href");
      if (e->v.element.tag == GUMBO_TAG_META && !og && ieq(first_token(attr(e, "property")), "og:url"))
        og = attr(e, "content");
    }
  }
  std::string scheme;
  for (const char* u : {base, canonical, og})
    if (u) {
      std::string h = url_host(u, &scheme);
      if (!h.empty()) return h;
    }
  return "";
}

struct Counts {
  size_t text = 0;       // non-space text bytes
  size_t link_text = 0;  // of which inside internal links (see is_external)
  size_t links = 0;      // internal <a href> elements, with or without text (image links count)
  size_t nav_links = 0;
  size_t headings = 0;

  void add(const Counts& o) {
    text += o.text;
    link_text += o.link_text;
    links += o.links;
    nav_links += o.nav_links;
    headings += o.headings;
  }
};

struct NodeInfo {
  Fate fate = Fate::kKeep;
  bool permalink = false;
  bool nav_block = false;    // rule 4's navigation block (never applied to the extraction root)
  bool link_block = false;   // rule 4's link-dense block (same)
  size_t link_items = 0;     // child blocks whose text is all internal link text (list items of a menu)
  Counts raw;                // everything rule 1 keeps below the element
  Counts kept;               // the same without the rule-4 blocks inside it
};

bool link_dense(const Counts& c) {
  return c.links >= kLinkDenseMinLinks && c.text > 0 && c.link_text * kLinkDensityDen >= c.text * kLinkDensityNum;
}

// Rule 4. Density is measured on what is left once the rule-4 blocks inside are dropped, so a
// chapter whose table of contents outweighs its introduction keeps the introduction. A block that
// is link-dense as a whole and keeps no more than kLinkDenseLeftover bytes of plain text (the
// "Table of Contents" caption over a dropped list) goes whole.
bool is_link_block(const NodeInfo& i) {
  if (link_dense(i.kept)) return true;
  if (i.kept.text - i.kept.link_text > kLinkDenseLeftover) return false;
  // A caption over links: dense as a whole, or half links with at least kLinkDenseMinLinks items
  // that are nothing but a link (a short table of contents under a long "Table of Contents").
  return link_dense(i.raw) || (i.link_items >= kLinkDenseMinLinks && 2 * i.raw.link_text >= i.raw.text);
}
bool is_nav_block(const NodeInfo& i) {
  return i.raw.nav_links > 0 && i.raw.headings == 0 && i.raw.text <= kNavBlockMaxText;
}

// Pass 1: rule 1's fates and rule 4's counts and decisions for every element, bottom-up, plus the
// root candidates.
class Analyzer {
 public:
  std::unordered_map<const GumboNode*, NodeInfo> info;
  std::vector<const GumboNode*> mains;     // visible <main> / role="main", outermost only
  std::vector<const GumboNode*> articles;  // visible <article>, outermost only
  const GumboNode* body = nullptr;
  std::string page_host;  // lower-case host of <base> / canonical URL, "" when unknown

  void run(const GumboNode* root) { visit(root, Scope{}, false, false, false, nullptr); }

 private:
  // Adds `n`'s counts to `parent` (nullptr at the root).
  void visit(const GumboNode* n, Scope scope, bool in_link, bool headings_only, bool in_heading, NodeInfo* parent) {
    if (n->type == GUMBO_NODE_TEXT || n->type == GUMBO_NODE_CDATA) {
      if (parent && (!headings_only || in_heading)) {
        size_t k = non_space_bytes(n->v.text.text);
        for (Counts* c : {&parent->raw, &parent->kept}) {
          c->text += k;
          if (in_link) c->link_text += k;
        }
      }
      return;
    }
    if (n->type != GUMBO_NODE_ELEMENT) return;
    GumboTag tag = n->v.element.tag;
    if (is_skipped(tag)) return;
    NodeInfo& me = info[n];
    me.fate = structural_fate(n, scope);
    if (me.fate == Fate::kDrop) return;
    if (tag == GUMBO_TAG_BODY) body = n;
    const char* href = tag == GUMBO_TAG_A ? attr(n, "href") : nullptr;
    if (tag == GUMBO_TAG_A && is_permalink(n)) {
      me.permalink = true;
      return;
    }
    if (me.fate == Fate::kHeadingsOnly) headings_only = true;
    Counts own;
    if (heading_level(tag)) {
      own.headings = 1;
      in_heading = true;
    }
    if (href) {
      own.nav_links = is_nav_link(n) ? 1 : 0;
      if (!is_external(href, page_host)) {
        own.links = 1;
        in_link = true;
      } else {
        in_link = false;  // an external link's text counts as text
      }
    }
    me.raw = me.kept = own;
    Scope child_scope = scope;
    if (tag == GUMBO_TAG_ARTICLE || tag == GUMBO_TAG_ASIDE || tag == GUMBO_TAG_NAV || tag == GUMBO_TAG_SECTION)
      child_scope.header_scoped = child_scope.aside_scoped = true;
    if (is_main_role(n)) child_scope.header_scoped = true;
    if (is_main_role(n) && !in_root_candidate_) mains.push_back(n);
    else if (tag == GUMBO_TAG_ARTICLE && !in_root_candidate_) articles.push_back(n);
    bool was_in_candidate = in_root_candidate_;
    if (is_main_role(n) || tag == GUMBO_TAG_ARTICLE) in_root_candidate_ = true;
    const GumboVector& kids = n->v.element.children;
    // `me` stays valid while children are inserted: unordered_map never moves its elements.
    for (unsigned i = 0; i < kids.length; ++i)
      visit(static_cast<const GumboNode*>(kids.data[i]), child_scope, in_link, headings_only, in_heading, &me);
    in_root_candidate_ = was_in_candidate;
    if (is_prunable(tag)) {
      me.nav_block = is_nav_block(me);
      me.link_block = !me.nav_block && is_link_block(me);
    }
    if (parent) {
      if (is_prunable(tag) && me.raw.text > 0 && me.raw.link_text == me.raw.text) ++parent->link_items;
      parent->raw.add(me.raw);
      if (!me.nav_block && !me.link_block) parent->kept.add(me.kept);
    }
  }
  bool in_root_candidate_ = false;
};

struct Block {
  std::string text;
  int heading = 0;        // 1..6 for a heading's paragraph
};

// Pass 2: the kept text as paragraphs (blocks).
class Emitter {
 public:
  // `info` null: plain visible text. `prune`: drop link-dense blocks too.
  Emitter(const std::unordered_map<const GumboNode*, NodeInfo>* info, bool prune)
      : info_(info), rules_(info != nullptr), prune_(prune) {}

  std::vector<Block> blocks;

  void walk_root(const GumboNode* root) {
    root_ = root;
    walk(root, Ctx{});
    close_block();
  }

 private:
  struct Ctx {
    bool pre = false;
    bool headings_only = false;
    bool in_heading = false;
  };

  void close_block() {
    std::string& s = cur_.text;
    while (!s.empty() && is_space_byte(static_cast<unsigned char>(s.back()))) s.pop_back();
    size_t b = 0;
    while (b < s.size() && (s[b] == '\n' || s[b] == '\r')) ++b;
    s.erase(0, b);
    if (!s.empty()) blocks.push_back(std::move(cur_));
    cur_ = Block{};
  }
  void line_break() {
    std::string& s = cur_.text;
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
    if (!s.empty()) s.push_back('\n');
  }
  void text(const char* s, const Ctx& c) {
    if (c.headings_only && !c.in_heading) return;
    std::string& out = cur_.text;
    if (c.pre) {
      out.append(s);
    } else {
      for (const char* p = s; *p; ++p) {
        if (is_space_byte(static_cast<unsigned char>(*p))) {
          if (!out.empty() && !is_space_byte(static_cast<unsigned char>(out.back()))) out.push_back(' ');
        } else {
          out.push_back(*p);
        }
      }
    }
  }
  void walk(const GumboNode* node, Ctx c) {
    if (node->type == GUMBO_NODE_TEXT || node->type == GUMBO_NODE_CDATA || node->type == GUMBO_NODE_WHITESPACE) {
      text(node->v.text.text, c);
      return;
    }
    if (node->type == GUMBO_NODE_DOCUMENT) {
      const GumboVector& kids = node->v.document.children;
      for (unsigned i = 0; i < kids.length; ++i) walk(static_cast<const GumboNode*>(kids.data[i]), c);
      return;
    }
    if (node->type != GUMBO_NODE_ELEMENT) return;
    GumboTag tag = node->v.element.tag;
    if (is_skipped(tag)) return;
    if (rules_) {
      auto it = info_->find(node);
      if (it == info_->end() || it->second.fate == Fate::kDrop || it->second.permalink) return;
      if (node != root_ && (it->second.nav_block || (prune_ && it->second.link_block))) return;
      if (it->second.fate == Fate::kHeadingsOnly) c.headings_only = true;
    }
    if (tag == GUMBO_TAG_BR) {
      line_break();
      return;
    }
    int level = heading_level(tag);
    bool block = is_block(tag);
    if (block) close_block();
    if (level) {
      cur_.heading = level;
      c.in_heading = true;
    } else if (tag == GUMBO_TAG_TD || tag == GUMBO_TAG_TH) {
      text(" ", c);
    }
    if (tag == GUMBO_TAG_PRE || tag == GUMBO_TAG_TEXTAREA) c.pre = true;
    const GumboVector& kids = node->v.element.children;
    for (unsigned i = 0; i < kids.length; ++i) walk(static_cast<const GumboNode*>(kids.data[i]), c);
    if (block) close_block();
  }

  const std::unordered_map<const GumboNode*, NodeInfo>* info_;
  bool rules_;
  bool prune_;
  const GumboNode* root_ = nullptr;
  Block cur_;
};

bool has_paragraph(const std::vector<Block>& blocks) {
  return std::any_of(blocks.begin(), blocks.end(), [](const Block& b) { return b.heading == 0; });
}

// Joins blocks with "\n\n" and records the heading path of every stretch.
void assemble(std::vector<Block>& blocks, HtmlText* r) {
  std::vector<std::pair<int, std::string>> stack;  // (level, heading text)
  int top_level = 7;
  for (Block& b : blocks) {
    if (!r->text.empty()) r->text += "\n\n";
    size_t at = r->text.size();
    if (b.heading) {
      std::string h = b.text;
      std::replace(h.begin(), h.end(), '\n', ' ');
      while (!stack.empty() && stack.back().first >= b.heading) stack.pop_back();
      stack.emplace_back(b.heading, h);
      if (!r->sections.empty()) r->sections.back().byte_end = at;
      HtmlSection s;
      for (auto& [lvl, t] : stack) s.path.push_back(t);
      s.byte_begin = at;
      r->sections.push_back(std::move(s));
      if (b.heading < top_level) {
        top_level = b.heading;
        r->heading = h;
      }
    } else if (r->sections.empty()) {
      r->sections.push_back(HtmlSection{{}, at, at});
    }
    r->text += b.text;
  }
  if (!r->sections.empty()) r->sections.back().byte_end = r->text.size();
}

const GumboNode* find_title(const GumboNode* node) {
  if (node->type != GUMBO_NODE_ELEMENT) return nullptr;
  if (node->v.element.tag == GUMBO_TAG_TITLE) return node;
  const GumboVector& kids = node->v.element.children;
  for (unsigned i = 0; i < kids.length; ++i)
    if (const GumboNode* t = find_title(static_cast<const GumboNode*>(kids.data[i]))) return t;
  return nullptr;
}

std::string title_text(const GumboNode* t) {
  std::string s;
  const GumboVector& kids = t->v.element.children;
  for (unsigned i = 0; i < kids.length; ++i) {
    const GumboNode* k = static_cast<const GumboNode*>(kids.data[i]);
    if (k->type != GUMBO_NODE_TEXT && k->type != GUMBO_NODE_WHITESPACE) continue;
    for (const char* p = k->v.text.text; *p; ++p) {
      if (is_space_byte(static_cast<unsigned char>(*p))) {
        if (!s.empty() && s.back() != ' ') s.push_back(' ');
      } else {
        s.push_back(*p);
      }
    }
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

enum class Rules { kNone, kStructure, kAll };

std::vector<Block> extract(const GumboNode* root, const Analyzer& a, Rules rules) {
  Emitter e(rules == Rules::kNone ? nullptr : &a.info, rules == Rules::kAll);
  e.walk_root(root);
  return std::move(e.blocks);
}

}  // namespace

HtmlText html_to_text(std::string_view html, const HtmlOptions& opts) {
  HtmlText r;
  GumboOutput* doc = gumbo_parse_with_options(&kGumboDefaultOptions, html.data(), html.size());
  if (const GumboNode* t = find_title(doc->root)) r.title = title_text(t);
  Analyzer a;
  std::vector<Block> blocks;
  bool done = false;
  if (opts.main_content) {
    a.page_host = find_page_host(doc->root);
    a.run(doc->root);
    const GumboNode* main = nullptr;
    for (const GumboNode* m : a.mains)
      if (!main || a.info[m].raw.text > a.info[main].raw.text) main = m;
    if (!main && a.articles.size() == 1) main = a.articles[0];
    // Fallbacks, each when the one before leaves no paragraph: all rules in <main>, all rules in
    // <body>, all but link density and rule 5 in <body> (a page that is one table of contents
    // keeps it, without the site's navigation), the plain visible text.
    std::vector<std::pair<const GumboNode*, Rules>> tries;
    if (main) tries.emplace_back(main, Rules::kAll);
    if (a.body) tries.emplace_back(a.body, Rules::kAll);
    if (a.body) tries.emplace_back(a.body, Rules::kStructure);
    for (auto [root, rules] : tries) {
      blocks = extract(root, a, rules);
      if ((done = has_paragraph(blocks))) break;
    }
  }
  if (!done) blocks = extract(doc->root, a, Rules::kNone);
  gumbo_destroy_output(&kGumboDefaultOptions, doc);
  assemble(blocks, &r);
  return r;
}

}  // namespace ragd::retrieval
