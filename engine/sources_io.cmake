# config.json, safetensors, tokenizer.json, chat templates, sampler.
list(APPEND RAGD_ENGINE_SOURCES)
