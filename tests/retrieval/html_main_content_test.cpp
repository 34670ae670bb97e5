// html_to_text's main-content rules on small pages in the styles of Sphinx, DocBook and asciidoc
// and on a page with <main>; then, where the Debian documentation packages are installed, on real
// pages of four sites from three generators.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ragd/retrieval/reader.h"

namespace ragd::retrieval {
namespace {

bool has(const std::string& text, const std::string& s) { return text.find(s) != std::string::npos; }

// Every section's stretch starts with its last heading, sections tile the text in order.
void expect_sections_consistent(const HtmlText& h) {
  size_t at = 0;
  for (const HtmlSection& s : h.sections) {
    EXPECT_EQ(s.byte_begin, at);
    ASSERT_LE(s.byte_begin, s.byte_end);
    ASSERT_LE(s.byte_end, h.text.size());
    if (!s.path.empty()) {
      EXPECT_EQ(h.text.compare(s.byte_begin, s.path.back().size(), s.path.back()), 0) << s.path.back();
    }
    at = s.byte_end;
  }
  if (!h.sections.empty()) {
    EXPECT_EQ(at, h.text.size());
  }
}

const HtmlSection* find_section(const HtmlText& h, const std::vector<std::string>& path) {
  for (const HtmlSection& s : h.sections)
    if (s.path == path) return &s;
  return nullptr;
}

std::string section_text(const HtmlText& h, const HtmlSection& s) {
  return h.text.substr(s.byte_begin, s.byte_end - s.byte_begin);
}

const char* kSphinxPage = R"(<!DOCTYPE html>
<html><head><title>json — JSON encoder and decoder &#8212; Python 3.11 documentation</title>
<script>var x = "<p>script</p>";</script></head><body>
<div class="related" role="navigation" aria-label="related navigation"><h3>Navigation</h3><ul>
 <li class="right"><a href="genindex.html" accesskey="I">index</a></li>
 <li class="right"><a href="py-modindex.html">modules</a> |</li>
 <li class="right"><a href="mailbox.html" accesskey="N">next</a> |</li>
 <li class="right"><a href="email.iterators.html" accesskey="P">previous</a> |</li>
 <li><a href="index.html">Python</a> &#187;</li></ul></div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper">
<div class="body" role="main">
<section id="module-json">
<h1><code>json</code> — JSON encoder and decoder<a class="headerlink" href="#module-json" title="Permalink">¶</a></h1>
<p><strong>Source code:</strong> <a href="https://github.com/python/cpython/tree/3.11/Lib/json/__init__.py">Lib/json/__init__.py</a></p>
<p>JSON is a lightweight data interchange format inspired by JavaScript object literal syntax.</p>
<p>Note that <a href="#json.dump">dump()</a>, <a href="#json.dumps">dumps()</a> and <a href="#json.load">load()</a> share their keyword arguments with the encoder classes.</p>
<div class="toctree-wrapper"><ul><li><a href="a.html">First subpage</a></li><li><a href="b.html">Second subpage</a></li><li><a href="c.html">Third subpage</a></li></ul></div>
<section id="basic-usage">
<h2>Basic Usage<a class="headerlink" href="#basic-usage">¶</a></h2>
<dl><dt id="json.dump">json.dump(obj, fp)<a class="headerlink" href="#json.dump">¶</a></dt>
<dd><p>Serialize obj as a JSON formatted stream to fp.</p></dd></dl>
<p class="rubric">Footnotes</p>
<aside class="footnote-list"><aside class="footnote" id="f1" role="note"><p>JSON permits literal U+2028 in strings.</p></aside></aside>
</section>
</section>
<div class="clearer"></div></div></div></div>
<div class="sphinxsidebar" role="navigation" aria-label="main navigation"><div class="sphinxsidebarwrapper">
 <h3><a href="contents.html">Table of Contents</a></h3>
 <ul><li><a href="#">json — JSON encoder and decoder</a><ul><li><a href="#basic-usage">Basic Usage</a></li></ul></li></ul>
 <h4>Previous topic</h4><p class="topless"><a href="email.iterators.html">email.iterators: Iterators</a></p>
 <div role="note" aria-label="source link"><h3>This Page</h3><ul><li><a href="bugs.html">Report a Bug</a></li></ul></div>
 <div id="searchbox" role="search"><form><input type="text" name="q"/><input type="submit" value="Go"/></form></div>
</div></div>
<div class="clearer"></div></div>
<div class="related" role="navigation" aria-label="related navigation"><h3>Navigation</h3><ul>
 <li class="right"><a href="genindex.html">index</a></li><li class="right"><a href="mailbox.html">next</a> |</li>
 <li class="right"><a href="email.iterators.html">previous</a> |</li></ul></div>
<div class="footer">&copy; <a href="copyright.html">Copyright</a> 2001-2023, Python Software Foundation.</div>
</body></html>)";

TEST(HtmlMainContent, SphinxLikePage) {
  HtmlText h = html_to_text(kSphinxPage);
  EXPECT_EQ(h.title, "json — JSON encoder and decoder — Python 3.11 documentation");
  EXPECT_EQ(h.heading, "json — JSON encoder and decoder");
  for (const char* gone : {"Navigation", "modules", "previous", "Table of Contents", "Previous topic", "This Page",
                           "Report a Bug", "Copyright", "¶", "First subpage", "script", "Go"})
    EXPECT_FALSE(has(h.text, gone)) << gone << "\n" << h.text;
  for (const char* kept : {"JSON is a lightweight data interchange format", "Source code: Lib/json/__init__.py",
                           "Note that dump(), dumps() and load() share their keyword arguments",
                           "Serialize obj as a JSON formatted stream to fp.", "json.dump(obj, fp)",
                           "JSON permits literal U+2028 in strings."})
    EXPECT_TRUE(has(h.text, kept)) << kept << "\n" << h.text;
  EXPECT_EQ(h.text.rfind("json — JSON encoder and decoder\n\n", 0), 0u) << h.text;
  expect_sections_consistent(h);
  ASSERT_EQ(h.sections.size(), 2u);
  EXPECT_EQ(h.sections[0].path, (std::vector<std::string>{"json — JSON encoder and decoder"}));
  const HtmlSection* usage = find_section(h, {"json — JSON encoder and decoder", "Basic Usage"});
  ASSERT_NE(usage, nullptr);
  EXPECT_EQ(section_text(h, *usage).rfind("Basic Usage\n\njson.dump(obj, fp)", 0), 0u) << section_text(h, *usage);
  EXPECT_TRUE(has(section_text(h, *usage), "JSON permits literal"));
  EXPECT_FALSE(has(section_text(h, h.sections[0]), "Serialize obj"));
}

const char* kDocBookPage = R"(<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>9.16. JSON Functions and Operators</title>
<link rel="prev" href="functions-xml.html" title="9.15. XML Functions"/></head>
<body id="docContent"><div class="navheader"><table width="100%" summary="Navigation header">
<tr><th colspan="5" align="center">9.16. JSON Functions and Operators</th></tr>
<tr><td width="10%" align="left"><a accesskey="p" href="functions-xml.html">Prev</a> </td>
<td width="10%" align="left"><a accesskey="u" href="functions.html">Up</a></td>
<th width="60%" align="center">Chapter 9. Functions and Operators</th>
<td width="10%" align="right"><a accesskey="h" href="index.html"><img src="home.png" alt="Home"/></a></td>
<td width="10%" align="right"> <a accesskey="n" href="functions-sequence.html">Next</a></td></tr></table><hr/></div>
<div class="sect1" id="FUNCTIONS-JSON"><div class="titlepage"><div><div><h2 class="title">9.16. JSON Functions and Operators</h2></div></div></div>
<div class="toc"><p><strong>Table of Contents</strong></p><dl class="toc">
<dt><span class="sect2"><a href="#FUNCTIONS-JSON-PROCESSING">9.16.1. Processing and Creating JSON Data</a></span></dt>
<dt><span class="sect2"><a href="#FUNCTIONS-SQLJSON-PATH">9.16.2. The SQL/JSON Path Language</a></span></dt>
<dt><span class="sect2"><a href="#GLOSSARY">9.16.3. Acronyms</a></span></dt></dl></div>
<p>This section describes functions and operators for processing and creating JSON data.</p>
<div class="sect2" id="FUNCTIONS-JSON-PROCESSING"><div class="titlepage"><div><div><h3 class="title">9.16.1. Processing and Creating JSON Data</h3></div></div></div>
<p><a class="xref" href="#OP-TABLE">Table 9.45</a> shows the operators that are available for use with JSON data types.</p>
<div class="table"><table border="1"><tr><th>Operator</th><th>Description</th></tr>
<tr><td><code>json -&gt; integer</code></td><td>Extracts n'th element of JSON array.</td></tr></table></div></div>
<div class="sect2" id="FUNCTIONS-SQLJSON-PATH"><div class="titlepage"><div><div><h3 class="title">9.16.2. The SQL/JSON Path Language</h3></div></div></div>
<p>SQL/JSON path expressions specify the items to be retrieved from the JSON data.</p>
<div class="sect3"><h4>9.16.2.1. Strict and Lax Modes</h4><p>Lax mode facilitates matching of a JSON document structure and path expression.</p></div></div>
<div class="sect2" id="GLOSSARY"><h3 class="title">9.16.3. Acronyms</h3><dl>
<dt>ANSI</dt><dd><a href="https://en.wikipedia.org/wiki/American_National_Standards_Institute">American National Standards Institute</a></dd>
<dt>API</dt><dd><a href="https://en.wikipedia.org/wiki/API">Application Programming Interface</a></dd>
<dt>ASCII</dt><dd><a href="https://en.wikipedia.org/wiki/Ascii">American Standard Code for Information Interchange</a></dd></dl></div>
</div>
<div class="navfooter"><hr/><table width="100%" summary="Navigation footer">
<tr><td width="40%" align="left"><a accesskey="p" href="functions-xml.html">Prev</a> </td>
<td width="20%" align="center"><a accesskey="u" href="functions.html">Up</a></td>
<td width="40%" align="right"> <a accesskey="n" href="functions-sequence.html">Next</a></td></tr>
<tr><td width="40%" align="left" valign="top">9.15. XML Functions </td>
<td width="20%" align="center"><a accesskey="h" href="index.html">Home</a></td>
<td width="40%" align="right" valign="top"> 9.17. Sequence Manipulation Functions</td></tr></table></div>
</body></html>)";

TEST(HtmlMainContent, DocBookLikePage) {
  HtmlText h = html_to_text(kDocBookPage);
  EXPECT_EQ(h.title, "9.16. JSON Functions and Operators");
  EXPECT_EQ(h.heading, "9.16. JSON Functions and Operators");  // no h1: the first h2
  for (const char* gone : {"Prev", "Next", "Home", "Up", "Chapter 9.", "9.15. XML Functions",
                           "9.17. Sequence Manipulation Functions", "Table of Contents"})
    EXPECT_FALSE(has(h.text, gone)) << gone << "\n" << h.text;
  for (const char* kept : {"This section describes functions and operators",
                           "Table 9.45 shows the operators that are available", "Extracts n'th element of JSON array.",
                           "Lax mode facilitates matching", "American National Standards Institute",
                           "Application Programming Interface"})
    EXPECT_TRUE(has(h.text, kept)) << kept << "\n" << h.text;
  EXPECT_EQ(h.text.rfind("9.16. JSON Functions and Operators\n\nThis section describes", 0), 0u) << h.text;
  expect_sections_consistent(h);
  const std::string top = "9.16. JSON Functions and Operators";
  const HtmlSection* lax =
      find_section(h, {top, "9.16.2. The SQL/JSON Path Language", "9.16.2.1. Strict and Lax Modes"});
  ASSERT_NE(lax, nullptr);
  EXPECT_EQ(section_text(h, *lax), "9.16.2.1. Strict and Lax Modes\n\nLax mode facilitates matching of a JSON "
                                   "document structure and path expression.\n\n");
  const HtmlSection* acr = find_section(h, {top, "9.16.3. Acronyms"});  // h3 after h4 pops back
  ASSERT_NE(acr, nullptr);
  EXPECT_EQ(acr->byte_end, h.text.size());
}

const char* kAsciidocPage = R"(<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">
<html xmlns="http://www.w3.org/1999/xhtml"><head><meta name="generator" content="AsciiDoc 10.2.0" />
<title>Git User Guide</title></head>
<body class="article">
<div id="header"><h1>Git User Guide</h1>
<div id="toc"><div id="toctitle">Table of Contents</div>
<div class="toclevel1"><a href="#_introduction">Introduction</a></div>
<div class="toclevel1"><a href="#_branches">Branches</a></div>
<div class="toclevel2"><a href="#_creating">Creating branches</a></div>
<div class="toclevel1"><a href="#_merging">Merging</a></div></div></div>
<div id="content">
<div id="preamble"><div class="sectionbody"><div class="paragraph"><p>This guide shows the everyday commands.</p></div></div></div>
<div class="sect1"><h2 id="_introduction">Introduction</h2><div class="sectionbody">
<div class="paragraph"><p>Git is a distributed version control system; see <a href="git.html">git(1)</a> for the command list.</p></div></div></div>
<div class="sect1"><h2 id="_branches">Branches</h2><div class="sectionbody">
<div class="paragraph"><p>A branch is a movable pointer to a commit.</p></div>
<div class="sect2"><h3 id="_creating">Creating branches</h3>
<div class="listingblock"><div class="content"><pre><code>$ git switch -c topic
$ git log --oneline</code></pre></div></div></div></div></div>
<div class="sect1"><h2 id="_merging">Merging</h2><div class="sectionbody">
<div class="paragraph"><p>Merging joins two histories.</p></div></div></div>
<div class="sect1"><h2 id="_see_also">SEE ALSO</h2><div class="sectionbody"><div class="paragraph"><p>
<a href="git-add.html">git-add(1)</a>, <a href="git-rm.html">git-rm(1)</a>, <a href="git-mv.html">git-mv(1)</a>,
<a href="git-merge.html">git-merge(1)</a></p></div></div></div>
</div>
<div id="footnotes"><hr /></div>
</body></html>)";

TEST(HtmlMainContent, AsciidocLikePage) {
  HtmlText h = html_to_text(kAsciidocPage);
  EXPECT_EQ(h.heading, "Git User Guide");
  for (const char* gone : {"Table of Contents", "Creating branches\n\nIntroduction", "git-add(1)", "SEE ALSO"})
    EXPECT_FALSE(has(h.text, gone)) << gone << "\n" << h.text;
  for (const char* kept : {"This guide shows the everyday commands.", "see git(1) for the command list",
                           "A branch is a movable pointer", "$ git switch -c topic\n$ git log --oneline",
                           "Merging joins two histories."})
    EXPECT_TRUE(has(h.text, kept)) << kept << "\n" << h.text;
  EXPECT_EQ(h.text.rfind("Git User Guide\n\nThis guide shows", 0), 0u) << h.text;
  expect_sections_consistent(h);
  std::vector<std::vector<std::string>> paths;
  for (const HtmlSection& s : h.sections) paths.push_back(s.path);
  EXPECT_EQ(paths, (std::vector<std::vector<std::string>>{{"Git User Guide"},
                                                           {"Git User Guide", "Introduction"},
                                                           {"Git User Guide", "Branches"},
                                                           {"Git User Guide", "Branches", "Creating branches"},
                                                           {"Git User Guide", "Merging"}}));
}

const char* kMainPage = R"(<!doctype html><html><head><title>Tuning the cache | Example Docs</title>
<link rel="canonical" href="https://docs.example.com/guide/cache"></head><body>
<a href="#content" class="skip">Skip to content</a>
<header><a href="/"><img src="logo.png" alt="Example"></a><h1>Example Docs</h1>
<nav><ul><li><a href="/guide">Guide</a></li><li><a href="/api">API</a></li><li><a href="/blog">Blog</a></li></ul></nav></header>
<div class="cookie" role="dialog">We use cookies. <button>Accept</button></div>
<div class="wrapper">
<aside class="sidebar"><h2>In this section</h2><ul><li><a href="/guide/install">Install</a></li><li><a href="/guide/cache">Cache</a></li></ul></aside>
<main id="content">
<article>
<header><h1>Tuning the cache</h1><p class="byline">By the docs team, 3 min read</p></header>
<p>Intro text before any subheading is short.</p>
<h2>Sizing</h2>
<p>The cache holds the most recently used blocks; size it to the working set.</p>
<p hidden>Hidden draft paragraph.</p>
<div aria-hidden="true">Decorative caption</div>
<div style="display: none">Collapsed widget text</div>
<ul class="related"><li><a href="/guide/eviction">Eviction</a></li><li><a href="/guide/tiers">Tiers</a></li><li><a href="https://docs.example.com/guide/metrics">Metrics</a></li></ul>
<p>See also: <a href="/guide/eviction">eviction</a> · <a href="/guide/tiers">tiers</a> · <a href="/guide/metrics">metrics</a></p>
<p>External reading: <a href="https://en.wikipedia.org/wiki/Cache_replacement_policies">Cache replacement policies</a>, <a href="https://en.wikipedia.org/wiki/Page_cache">Page cache</a>, <a href="https://en.wikipedia.org/wiki/Working_set">Working set</a>.</p>
<h3>Per tenant</h3>
<p>Each tenant gets a share <a href="https://docs.example.com/guide/tenants">proportional to its weight</a>.</p>
<form><label>Was this page helpful?</label><button>Yes</button><button>No</button></form>
<footer>Last edited by someone</footer>
</article>
</main></div>
<footer><p>&copy; 2024 Example Inc.</p><ul><li><a href="/privacy">Privacy</a></li><li><a href="/terms">Terms</a></li></ul></footer>
</body></html>)";

TEST(HtmlMainContent, PageWithMain) {
  HtmlText h = html_to_text(kMainPage);
  EXPECT_EQ(h.title, "Tuning the cache | Example Docs");
  EXPECT_EQ(h.heading, "Tuning the cache");
  for (const char* gone : {"Skip to content", "Example Docs", "Guide", "cookies", "Accept", "In this section",
                           "By the docs team", "Hidden draft", "Decorative", "Collapsed widget", "Eviction",
                           "helpful", "Last edited", "2024 Example", "Privacy"})
    EXPECT_FALSE(has(h.text, gone)) << gone << "\n" << h.text;
  // A line of links under a caption is kept: the links are 60% of its text, under the 3/4 that
  // keeps prose naming three functions.
  for (const char* kept : {"Intro text before any subheading", "size it to the working set", "See also: eviction",
                           "External reading: Cache replacement policies, Page cache, Working set.",
                           "Each tenant gets a share proportional to its weight."})
    EXPECT_TRUE(has(h.text, kept)) << kept << "\n" << h.text;
  expect_sections_consistent(h);
  ASSERT_EQ(h.sections.size(), 3u);
  EXPECT_EQ(h.sections[0].path, (std::vector<std::string>{"Tuning the cache"}));
  EXPECT_EQ(section_text(h, h.sections[0]), "Tuning the cache\n\nIntro text before any subheading is short.\n\n");
  EXPECT_EQ(h.sections[2].path, (std::vector<std::string>{"Tuning the cache", "Sizing", "Per tenant"}));
  EXPECT_EQ(section_text(h, h.sections[2]), "Per tenant\n\nEach tenant gets a share proportional to its weight.");
}

TEST(HtmlMainContent, TextBeforeTheFirstHeadingIsAnUntitledSection) {
  HtmlText h = html_to_text("<body><p>Preface words.</p><h2>Later</h2><p>Body.</p><h2>Last</h2></body>");
  ASSERT_EQ(h.sections.size(), 3u);
  EXPECT_TRUE(h.sections[0].path.empty());
  EXPECT_EQ(section_text(h, h.sections[0]), "Preface words.\n\n");
  EXPECT_EQ(h.sections[1].path, (std::vector<std::string>{"Later"}));
  EXPECT_EQ(h.sections[2].path, (std::vector<std::string>{"Last"}));
  EXPECT_EQ(h.heading, "Later");
  expect_sections_consistent(h);
  EXPECT_TRUE(html_to_text("<p>no headings</p>").sections.size() == 1);
  EXPECT_TRUE(html_to_text("").sections.empty());
}

TEST(HtmlMainContent, NeverEmptyWhenThePageHasText) {
  // Only a list of links: the rules would leave nothing, so the visible text comes back.
  const char* links = "<body><ul><li><a href='a.html'>Alpha page</a></li><li><a href='b.html'>Beta page</a></li>"
                      "<li><a href='c.html'>Gamma page</a></li></ul></body>";
  EXPECT_EQ(html_to_text(links).text, "Alpha page\n\nBeta page\n\nGamma page");
  // Everything inside <nav>: same.
  EXPECT_EQ(html_to_text("<nav><p>Only navigation text</p></nav>").text, "Only navigation text");
  // A chapter page that is a heading over a table of contents keeps the contents but not the
  // site's previous / next bar.
  const char* toc_page =
      "<body><div><a accesskey='p' href='p.html'>Prev</a> <a accesskey='n' href='n.html'>Next</a></div>"
      "<div><h2>Chapter 56. Coding Conventions</h2><dl><dt><a href='s1.html'>56.1. Formatting</a></dt>"
      "<dt><a href='s2.html'>56.2. Reporting Errors</a></dt><dt><a href='s3.html'>56.3. Message Style</a></dt></dl>"
      "</div></body>";
  EXPECT_EQ(html_to_text(toc_page).text,
            "Chapter 56. Coding Conventions\n\n56.1. Formatting\n\n56.2. Reporting Errors\n\n56.3. Message Style");
  // <main> that holds only a heading: the body's content is used.
  HtmlText m = html_to_text("<body><main><h1>Title</h1></main><div><p>The real text.</p></div></body>");
  EXPECT_EQ(m.text, "Title\n\nThe real text.");
}

TEST(HtmlMainContent, PlainOptionKeepsEverything) {
  HtmlOptions plain;
  plain.main_content = false;
  HtmlText h = html_to_text(kSphinxPage, plain);
  EXPECT_TRUE(has(h.text, "Navigation"));
  EXPECT_TRUE(has(h.text, "Copyright 2001-2023"));
  EXPECT_TRUE(has(h.text, "¶"));
  EXPECT_TRUE(has(h.text, "JSON is a lightweight data interchange format"));
  expect_sections_consistent(h);
}

TEST(HtmlMainContent, LargestMainWinsAndRolesOverrideTags) {
  const char* page =
      "<body><main hidden><p>Old version.</p></main><div role='main'><p>Current text.</p>"
      "<aside role='note'><p>A note that stays.</p></aside><nav role='doc-toc'><a href='#a'>A</a></nav></div>"
      "<p>Outside.</p></body>";
  HtmlText h = html_to_text(page);
  EXPECT_EQ(h.text, "Current text.\n\nA note that stays.");
}

// Real pages from Debian documentation packages, when installed (not a build dependency).
std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct RealPage {
  const char* package;
  const char* path;
  std::vector<std::string> gone;
  std::vector<std::string> kept;
  std::string heading;
};

TEST(HtmlMainContent, RealDebianDocumentationPages) {
  const std::string nbsp = "\xC2\xA0";
  const std::vector<RealPage> pages = {
      // Sphinx
      {"python3.11-doc", "/usr/share/doc/python3.11/html/library/json.html",
       {"Navigation", "Table of Contents", "Copyright", "Previous topic", "Report a Bug", "modules |",
        "Python Software Foundation is a non-profit", "¶"},
       {"JSON (JavaScript Object Notation), specified by RFC 7159",
        "Serialize obj as a JSON formatted stream to fp", "JSON permits literal U+2028"},
       "json — JSON encoder and decoder"},
      {"python3.11-doc", "/usr/share/doc/python3.11/html/library/csv.html",
       {"Navigation", "Table of Contents", "Copyright", "Next topic", "Show Source"},
       {"The so-called CSV (Comma Separated Values) format is the most common import and export format"},
       "csv — CSV File Reading and Writing"},
      // DocBook (PostgreSQL's stylesheets)
      {"postgresql-doc-15", "/usr/share/doc/postgresql-doc-15/html/functions-json.html",
       {"Prev", "Home", "Sequence Manipulation Functions", "XML Functions", "Chapter" + nbsp + "9."},
       {"shows the operators that are available for use with JSON data types"},
       "9.16." + nbsp + "JSON Functions and Operators"},
      {"postgresql-doc-15", "/usr/share/doc/postgresql-doc-15/html/acronyms.html",
       {"Prev", "Home"},
       {"American National Standards Institute", "Multi-Version Concurrency Control"},
       "Appendix" + nbsp + "L." + nbsp + "Acronyms"},
      // DocBook (debian-reference's stylesheets: image links)
      {"debian-reference-en", "/usr/share/debian-reference/ch02.en.html",
       {"Table of Contents", "GNU/Linux tutorials", "The system initialization"},
       {"Debian is a volunteer organization which builds consistent distributions"},
       "Chapter" + nbsp + "2." + nbsp + "Debian package management"},
      // asciidoc
      {"git-doc", "/usr/share/doc/git/html/git-commit.html",
       {"git-add(1), git-rm(1), git-mv(1), git-merge(1)"},
       {"Create a new commit containing the current contents of the index", "git-commit - Record changes"},
       "git-commit(1) Manual Page"},
      {"git-doc", "/usr/share/doc/git/html/gittutorial.html",
       {"gitcvs-migration(7), gitcore-tutorial(7), gitglossary(7)"},
       {"This tutorial explains how to import a new project into Git"},
       "gittutorial(7) Manual Page"},
  };
  std::vector<std::string> missing;
  size_t ran = 0;
  for (const RealPage& p : pages) {
    if (!std::filesystem::exists(p.path)) {
      missing.push_back(std::string(p.package) + " (" + p.path + ")");
      continue;
    }
    SCOPED_TRACE(p.path);
    std::string html = read_file(p.path);
    HtmlText h = html_to_text(html);
    HtmlText plain = html_to_text(html, HtmlOptions{.main_content = false});
    for (const std::string& g : p.gone) EXPECT_FALSE(has(h.text, g)) << g;
    for (const std::string& k : p.kept) EXPECT_TRUE(has(h.text, k)) << k;
    EXPECT_EQ(h.heading, p.heading);
    EXPECT_LT(h.text.size(), plain.text.size());
    EXPECT_GT(h.text.size(), plain.text.size() / 2);
    EXPECT_GE(h.sections.size(), 1u);
    expect_sections_consistent(h);
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no Debian documentation package installed (apt-get install python3.11-doc "
                                "postgresql-doc-15 debian-reference-en git-doc)";
  if (!missing.empty()) {
    std::string m;
    for (const auto& s : missing) m += " " + s;
    std::cout << "[ info ] not installed, pages skipped:" << m << "\n";
  }
}

}  // namespace
}  // namespace ragd::retrieval
