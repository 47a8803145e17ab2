"""Breadth-first shortest path in an undirected graph given as "A-B" edges."""
import sys
from collections import defaultdict, deque


def build_graph(edges: list[str]) -> dict[str, list[str]]:
    graph = defaultdict(list)
    for edge in edges:
        a, b = edge.split("-")
        graph[a].append(b)
        graph[b].append(a)
    return graph


def shortest_path(graph: dict, start: str, goal: str) -> list[str]:
    previous = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for neighbour in sorted(graph[node]):
            if neighbour not in previous:
                previous[neighbour] = node
                queue.append(neighbour)
    path = [goal]
    while previous[path[-1]] is not None:
        path.append(previous[path[-1]])
    return path[::-1]


def degree_report(graph: dict) -> str:
    degrees = sorted(((len(set(graph[node])), node) for node in graph), reverse=True)
    return ", ".join(f"{node}={degree}" for degree, node in degrees[:3])


tokens = sys.stdin.read().split()
start, goal = tokens[0], tokens[1]
graph = build_graph(tokens[2:])
path = shortest_path(graph, start, goal)
print(" -> ".join(path))
print("hops:", len(path) - 1)
print("nodes:", len(graph))
print("busiest:", degree_report(graph))
