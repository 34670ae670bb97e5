# config.json, safetensors, tokenizer.json, chat templates, sampler.
list(APPEND RAGD_ENGINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/src/model_config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/presets.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/safetensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/random_weights.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/bpe_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/bpe_trainer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/added_tokens.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/tokenizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/wordpiece_tokenizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/wordpiece_vocab.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/sentence_pooling.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/stream_decoder.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/chat_template.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/jinja/text.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/jinja/value.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/jinja/ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/jinja/methods.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/jinja/lexer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/jinja/parser.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/jinja/eval.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/jinja/filters.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/model_chat_template.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/sampler.cpp)
