# cmake -DRAGCTL=ragctl -DWORK=dir -DSRC=repo -P qa_toolchain.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(run out_var rc_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${out_var} "${out}${err}" PARENT_SCOPE)
  set(${rc_var} ${rc} PARENT_SCOPE)
endfunction()
function(expect_fail needle)
  run(out rc ${ARGN})
  if(rc EQUAL 0 OR NOT out MATCHES "${needle}")
    message(FATAL_ERROR "expected a failure naming '${needle}' from: ${ARGN}\ngot (${rc}): ${out}")
  endif()
endfunction()

set(MODEL ${SRC}/models/ragd-qa)

# 1. Malformed inputs name the file and line.
file(WRITE ${WORK}/bad_eps.jsonl "{\"passages\": [\"a b c\"], \"question\": \"q\", \"answer\": \"x\"}\n{\"passages\": \"not a list\", \"question\": \"q\", \"answer\": \"x\"}\n")
expect_fail("bad_eps.jsonl:2: 'passages' must be an array" ${RAGCTL} encode-episodes --tokenizer ${MODEL}/tokenizer.json --in ${WORK}/bad_eps.jsonl --out ${WORK}/e.bin)
file(WRITE ${WORK}/bad_q.jsonl "{\"question\": \"Who?\", \"answer\": \"Ada\"}\n\n{\"question\": \"Who?\"\n")
expect_fail("bad_q.jsonl:3: not a JSON object" ${RAGCTL} eval --questions ${WORK}/bad_q.jsonl --url http://127.0.0.1:9)
file(WRITE ${WORK}/bad_q2.jsonl "{\"question\": \"Who?\", \"answer\": 7}\n")
expect_fail("bad_q2.jsonl:1: \"answer\" must be a string" ${RAGCTL} eval --questions ${WORK}/bad_q2.jsonl --url http://127.0.0.1:9)
file(WRITE ${WORK}/nogold.jsonl "{\"question\": \"Who?\", \"answer\": \"Ada\"}\n")
expect_fail("needs a \"gold\" document id" ${RAGCTL} eval --questions ${WORK}/nogold.jsonl --context gold --url http://127.0.0.1:9)
expect_fail("reuse must be one of none . prefix .* got .bogus." ${RAGCTL} eval --questions ${WORK}/nogold.jsonl --reuse none,bogus --url http://127.0.0.1:9)

# 2. --no-digit-merges: no vocabulary entry mixes a digit with anything else.
string(RANDOM LENGTH 4000 ALPHABET "0123456789 abcdefgh" text)
file(WRITE ${WORK}/text.txt "${text} 1999 2024 1999 2024 year 1999\n")
run(out rc ${RAGCTL} train-tokenizer --text ${WORK}/text.txt --vocab 400 --no-digit-merges --out ${WORK}/tok.json)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "train-tokenizer failed: ${out}")
endif()
file(READ ${WORK}/tok.json tok)
string(JSON vocab GET "${tok}" model vocab)
string(JSON n LENGTH "${vocab}")
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  string(JSON piece MEMBER "${vocab}" ${i})
  string(LENGTH "${piece}" len)
  if(len GREATER 1 AND piece MATCHES "[0-9]")
    message(FATAL_ERROR "--no-digit-merges produced the token '${piece}'")
  endif()
endforeach()

# 3. The committed model end to end on held-out questions (first 40): ingest, retrieval, prompt,
#    greedy answers; prefix and knowledge_tree must answer exactly as none does.
run(out rc ${RAGCTL} ingest ${SRC}/examples/qa_eval/corpus.jsonl --data ${WORK}/data --model ${MODEL})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ingest failed: ${out}")
endif()
run(out rc ${RAGCTL} eval --questions ${SRC}/examples/qa_eval/questions.jsonl --model ${MODEL} --data ${WORK}/data
    --limit 40 --reuse none,prefix,knowledge_tree --context both --threads 2 --json ${WORK}/report.json)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "eval failed (${rc}): ${out}")
endif()
message(STATUS "${out}")
file(READ ${WORK}/report.json report)
string(JSON nruns LENGTH "${report}" runs)
if(NOT nruns EQUAL 6)
  message(FATAL_ERROR "expected 6 runs (2 contexts x 3 modes), got ${nruns}")
endif()
foreach(r 1 2 4 5)
  string(JSON same GET "${report}" runs ${r} identical_to_first)
  string(JSON mode GET "${report}" runs ${r} reuse)
  if(NOT same EQUAL 40)
    message(FATAL_ERROR "reuse ${mode} gave ${same}/40 answers identical to none")
  endif()
endforeach()
# One eval run of the first 40 questions whose first run's exact match must reach `min`.
function(expect_em what min json)
  run(out rc ${RAGCTL} eval --questions ${SRC}/examples/qa_eval/questions.jsonl --model ${MODEL} --data ${WORK}/data
      --limit 40 --threads 2 --json ${json} ${ARGN})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "eval (${what}) failed (${rc}): ${out}")
  endif()
  message(STATUS "${out}")
  file(READ ${json} report)
  string(JSON em GET "${report}" runs 0 exact_match)
  if(em LESS ${min})
    message(FATAL_ERROR "exact match of ${what} is ${em}, below ${min}")
  endif()
endfunction()

# The gold passage alone in the context (top_k 1): the trained model must copy most of the held-out
# answers (MIN_GOLD_EM; the model card has 100 % on the full set; random output scores 0).
expect_em("the gold passage alone in context" ${MIN_GOLD_EM} ${WORK}/report_top1.json --top-k 1 --context gold)

# 4. The shipped reranking pipeline (configs/pipelines/qa-rerank.toml: top-4 retrieval, the model
#    reranks, the best passage in the prompt), end to end with retrieved context: the model card has
#    97.5 % on the full set; the first 40 questions must reach MIN_RERANK_EM.
expect_em("the reranking pipeline (retrieved context)" ${MIN_RERANK_EM} ${WORK}/report_rerank.json
          --pipelines ${SRC}/configs/pipelines --pipeline qa-rerank --reuse none --context retrieved)
