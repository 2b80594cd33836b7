"""The model: rates and verdicts derived from two raw samples. Never imports Textual."""

# The version of what the model and the detector make of raw samples.  Raise it with any
# change that can change a rate, a verdict or an episode: recordings carry summaries made
# by the model of their day (record/derived.py), and `report` uses them only while they
# are this version's; older ones are recomputed from the raw samples.
MODEL_VERSION = "10"  # 3: the loaders' time decides disk vs CPU; iowait is idle; 4: own vs
# others; 5: a checkpoint's Dirty in MB below a GB (episode reasons are in the summaries);
# 6: episodes carry their culprits, and the storage advice follows them (and O_DIRECT);
# 7: no readable GPU is the state "unavailable", not idle; 8: what-if predictions, the
# trainer's own verdict, the job-wide CPU, mixed causes ranked by predicted gain; 9: the
# others' CPU leaves out what niced processes ran, the what-if's load-per-stage model;
# 10: a checkpoint stall goes on through its fsync's flush, the cache fix drops cold reads'
# kernel time (stime)
