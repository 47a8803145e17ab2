"""Grading a patch in a fresh sandbox: apply ladder, the task's tests put back, eval_cmd / swepro / SWE-bench
graders."""
