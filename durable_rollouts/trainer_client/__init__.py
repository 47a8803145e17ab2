"""The trainer's side: start or attach workflows, wait through outages, record results, answer operator queries, local
services."""
