"""The life of queued work, whatever the work is (a training job, an evaluation run, a
corpus's statistics, a part counted for a job): claim, heartbeat, memory guard, stopping lost
work, fenced writes and failure (lifecycle), which queued row a free slot starts, team by team
(scheduling), and a job's stage and progress (progress)."""
