"""The names of the tasks on the broker: the API sends by them (service/queue.py), the workers
define them (workers/tasks.py). A message carries the row's id, never the work."""

TRAIN = "tokenmill.train"
EVALUATE = "tokenmill.evaluate"
STATISTICS = "tokenmill.corpus_statistics"
COUNT_PARTS = "tokenmill.count_parts"
MEASURE_PARTS = "tokenmill.measure_parts"
