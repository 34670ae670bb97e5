# Fitted adapt profile (ragctl eval --fit-adapt). quality: logistic weights over
# bias, score_margin, lexical_agreement, lexical_margin, question_tokens
source = '/tmp/adapt/q2/fit_set/questions.jsonl (400 questions, 1,4,16 in flight)'
# ttft_q_ms: the TTFT quantile below under load = [ms, + per run ahead, + per 1000 tokens of work ahead]
ttft_quantile = 0.99

[candidates.'k1']
quality = [-8.38509802, 27.3622545, 8.66726797, 13.4916479, -0.0516337908]
ttft_idle_ms = 23.6443132
ttft_per_run_ms = 4.94972584
ttft_q_ms = [41.3046829, 5.40237123, 103.550097]
fit_samples = 400
fit_accuracy = 0.8575

[candidates.'k2-rerank1']
quality = [-2.05615783, 14.5649627, 3.84414503, 13.3746123, -0.0937085113]
ttft_idle_ms = 35.5999619
ttft_per_run_ms = 7.89395351
ttft_q_ms = [50.7767638, 5.40237123, 103.550097]
fit_samples = 400
fit_accuracy = 0.92

[candidates.'k4']
quality = [-2.09952583, 6.418873, 0.241406018, 2.16074253, 0.0618435097]
ttft_idle_ms = 34.72907
ttft_per_run_ms = 19.3753838
ttft_q_ms = [110.631586, 5.40237123, 103.550097]
fit_samples = 400
fit_accuracy = 0.5575

[candidates.'k4-rerank1']
quality = [1.67380294, 16.2249652, 1.20264399, 20.1849341, -0.205324416]
ttft_idle_ms = 41.5586573
ttft_per_run_ms = 7.78834072
ttft_q_ms = [91.3849863, 5.40237123, 103.550097]
fit_samples = 400
fit_accuracy = 0.97
