# paged KV, model forward, backends.
list(APPEND RAGD_ENGINE_SOURCES)
