# paged KV, model forward, backends.
list(APPEND RAGD_ENGINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/src/kv_cache.cpp)
