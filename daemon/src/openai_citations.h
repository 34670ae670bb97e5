// Private to the daemon: the citations of a RAG answer as OpenAI marks cited content, `url_citation`
// annotations on the assistant message:
//   {"type": "url_citation", "url_citation": {"start_index", "end_index", "title", "url",
//    "doc_id", "source_index"}}
// one per passage number in a "[n]" or "[n, m, ...]" marker of the answer, for pipelines that
// number their passages ([prompt] number_passages: passage n of the prompt is sources[n-1]).
// start_index / end_index are the marker's span in the answer, in Unicode code points, end
// exclusive. url is the document's url, else its ragd route "/v1/documents/<percent-encoded id>".
// doc_id and source_index (0-based, into the sources of the context the marker was written under)
// are ragd's additions. Numbers outside 1..sources.size() are not citations.
// Thread-safety: value types and pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ragd/common/json_writer.h"
#include "ragd/pipelines/executor.h"

namespace ragd::daemon {

// The passages an answer was generated under from byte `from_byte` of the answer on (iterative
// pipelines change them between tokens; one-shot runs have one context from byte 0).
struct CitationContext {
  size_t from_byte = 0;
  std::vector<pipelines::Source> sources;
};

struct Citation {
  size_t start_index = 0, end_index = 0;  // code points, end exclusive
  size_t source_index = 0;                // into the sources of `context`
  size_t context = 0;                     // into the contexts passed to find_citations
};

// The "[n]" citations of `answer`, in order of position (then of n within a marker).
std::vector<Citation> find_citations(const std::string& answer, const std::vector<CitationContext>& contexts);

// Writes the annotations array of `answer` (possibly empty).
void write_url_citations(JsonWriter& w, const std::string& answer, const std::vector<CitationContext>& contexts);

// The text a sources_footer pipeline appends to its answer: "\n\nSources:\n" and one line a
// source, "[n] " first when `numbered` (n = its passage number), then the title (else the doc id),
// " — " and the url (else the document's route), the section path joined by " > " and "page N"
// when known: "[1] Zebras at Oakfield — https://zoo.example/zebra (Habitat > Water, page 3)".
// Unnumbered, a line that repeats an earlier one (another passage of the same section) is left
// out. "" when there are no sources.
std::string sources_footer(const std::vector<pipelines::Source>& sources, bool numbered);

// "/v1/documents/<id>" with the id percent-encoded as encodeURIComponent does.
std::string document_route(const std::string& doc_id);

}  // namespace ragd::daemon
