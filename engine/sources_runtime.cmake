# paged KV, model forward, backends.
list(APPEND RAGD_ENGINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/src/kv_cache.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/kv_storage.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/model_weights.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/host_buffer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/bert_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/encoder_dir.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/cpu_backend.cpp)
if(RAGD_HAVE_CUDA)
  # The CUDA backend itself is the module libragd_cuda.so (engine/CMakeLists.txt); the engine holds
  # the loader only.
  list(APPEND RAGD_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/src/cuda_backend_loader.cpp)
endif()
