// Private to retrieval: the text of a manual page from its roff source, as Debian installs them
// (/usr/share/man/man1/grep.1.gz): the man(7) macros most pages use and the mdoc(7) ones of BSD
// pages, read as a reader of the rendered page would see them — requests, comments and font or
// size changes removed, special characters and strings written out, paragraphs separated by blank
// lines, preformatted (.nf / .EX) blocks kept line by line, tables (.TS / .TE) as their data rows.
// Headings (.SH / .SS, mdoc .Sh / .Ss) stay in the text as their own paragraphs and cut it into
// sections, like html_text.cpp's headings. Not a roff interpreter: user-defined macros (.de), number
// registers and conditionals are dropped, which loses at most some decoration.
// Thread-safety: free functions over their arguments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ragd/retrieval/document.h"

namespace ragd::retrieval {

struct ManText {
  std::string name;         // from .TH / .Dt (mdoc), as written ("GREP", "ls")
  std::string section;      // "1", "3pm", ...
  std::string description;  // the NAME section's text after its "\-" ("print lines that match patterns")
  std::string text;
  std::vector<Section> sections;  // path: [.SH] or [.SH, .SS]; tile the text from the first heading
  // Non-empty when the page is only a link to another one (".so man1/other.1"): the target.
  std::string link;
  // "grep(1) — print lines that match patterns"; the name alone when NAME says nothing.
  std::string title() const;
};

// Whether `head` (a file's first bytes) is roff manual-page source: after blank lines and roff
// comments, a .TH, .Dd or .Dt request, or a .so link; definitions first (.de, .ds, .nr, .if, as
// pod2man writes) count when `man_extension` (the file is named like a page: "ls.1", "Foo.3pm")
// or a .TH follows within the head.
bool looks_like_man(std::string_view head, bool man_extension);

ManText man_to_text(std::string_view roff);

}  // namespace ragd::retrieval
