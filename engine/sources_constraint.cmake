# Constrained decoding: grammars (JSON Schema, regex, choice, tool calls) compiled to byte automata, bound to a
# vocabulary (token masks), per-sequence matchers.
list(APPEND RAGD_ENGINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/src/constraint/nfa_builder.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/constraint/regex_grammar.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/constraint/number_grammar.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/constraint/json_schema_grammar.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/constraint/tool_call_grammar.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/constraint/grammar_registry.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/constraint/lazy_dfa.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/constraint/token_constraint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/constraint/constraint_matcher.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/constraint/constraint_cache.cpp)
