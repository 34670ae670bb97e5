# config.json, safetensors, tokenizer.json, chat templates, sampler.
list(APPEND RAGD_ENGINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/src/model_config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/safetensors.cpp)
