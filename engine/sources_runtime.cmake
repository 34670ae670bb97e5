# paged KV, model forward, backends.
list(APPEND RAGD_ENGINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/src/kv_cache.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/kv_storage.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/model_weights.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/cpu_backend.cpp)
