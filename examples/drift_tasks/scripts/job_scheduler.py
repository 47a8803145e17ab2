"""Greedy scheduling of prioritised jobs on a fixed number of workers."""
import heapq
import sys
from dataclasses import dataclass, field


@dataclass(order=True)
class Job:
    priority: int
    name: str = field(compare=False)
    duration: int = field(compare=False, default=1)


@dataclass
class Slot:
    job: str
    worker: int
    start: int
    end: int


def schedule(jobs: list[Job], *, workers: int) -> list[Slot]:
    free_at = [(0, worker) for worker in range(workers)]
    heapq.heapify(free_at)
    plan = []
    for job in sorted(jobs):
        start, worker = heapq.heappop(free_at)
        plan.append(Slot(job=job.name, worker=worker, start=start, end=start + job.duration))
        heapq.heappush(free_at, (start + job.duration, worker))
    return plan


def parse(lines: list[str]) -> list[Job]:
    jobs = []
    for line in lines:
        name, priority, duration = line.split()
        jobs.append(Job(priority=int(priority), name=name, duration=int(duration)))
    return jobs


header, *rows = sys.stdin.read().splitlines()
plan = schedule(parse(rows), workers=int(header))
for slot in plan:
    print(f"{slot.job}: worker {slot.worker} t={slot.start}..{slot.end}")
print("makespan:", max(slot.end for slot in plan))
busy = {worker: sum(s.end - s.start for s in plan if s.worker == worker) for worker in range(int(header))}
print("busy:", " ".join(f"w{worker}={time}" for worker, time in sorted(busy.items())))
