# Fitted adapt profile (ragctl eval --fit-adapt). quality: logistic weights over
# bias, score_margin, lexical_agreement, lexical_margin, question_tokens
source = '/tmp/adapt/full/fit_set/questions.jsonl (400 questions, 1,16 in flight)'

[candidates.'k1']
quality = [-8.38509802, 27.3622545, 8.66726797, 13.4916479, -0.0516337908]
ttft_idle_ms = 22.6007304
ttft_per_run_ms = 6.03450754
fit_samples = 400
fit_accuracy = 0.8575

[candidates.'k2-rerank1']
quality = [-2.05615783, 14.5649627, 3.84414503, 13.3746123, -0.0937085113]
ttft_idle_ms = 29.4166744
ttft_per_run_ms = 13.9332659
fit_samples = 400
fit_accuracy = 0.92

[candidates.'k4']
quality = [-2.09952583, 6.418873, 0.241406018, 2.16074253, 0.0618435097]
ttft_idle_ms = 52.0949231
ttft_per_run_ms = 25.7164415
fit_samples = 400
fit_accuracy = 0.5575

[candidates.'k4-rerank1']
quality = [1.67380294, 16.2249652, 1.20264399, 20.1849341, -0.205324416]
ttft_idle_ms = 46.220485
ttft_per_run_ms = 17.977404
fit_samples = 400
fit_accuracy = 0.97
